// dyn-route serve: the live session-aware frontend (router flags, trace flags) -> serve::Frontend.
#include <algorithm>
#include <memory>
#include <optional>

#include "dyn/cli/checks.h"
#include "dyn/base/defaults.h"
#include "dyn/http/url.h"
#include "dyn/toolevents/toolevents.h"

#include "admission_flags.h"
#include "commands.h"
#include "frontend_flags.h"
#include "kv_policy_flags.h"
#include "queue_flags.h"
#include "router_flags.h"

namespace {

/// --worker-kv-events URL=ENDPOINT[,REPLAY] values paired with the --worker URLs, in worker
/// order; every worker needs one once any is given or --router-kv-events is on (else none).
std::vector<dyn::serve::KvEventSource> kv_event_sources(const std::vector<std::string>& workers,
                                                        const std::vector<std::string>& specs, bool kv_events) {
  std::vector<std::optional<dyn::serve::KvEventSource>> src(workers.size());
  for (const auto& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw dyn::Fatal(dyn::kExitUsage, "--worker-kv-events " + spec + ": expected URL=ZMQ_ADDR[,REPLAY_ADDR]");
    std::string url = spec.substr(0, eq), rest = spec.substr(eq + 1);
    // Paired by canonical URL (issue 51.2): "http://h:8000/" names the worker "http://H:8000".
    auto canonical = dyn::http::canonical_worker_url(url);
    auto w = std::find_if(workers.begin(), workers.end(), [&](const std::string& u) {
      auto c = dyn::http::canonical_worker_url(u);
      return canonical && c && *c == *canonical;
    });
    if (w == workers.end())
      throw dyn::Fatal(dyn::kExitUsage, "--worker-kv-events " + spec + ": " + url + " is not one of the --worker URLs");
    size_t i = static_cast<size_t>(w - workers.begin());
    if (src[i]) throw dyn::Fatal(dyn::kExitUsage, "--worker-kv-events given twice for " + url);
    auto comma = rest.find(',');
    dyn::serve::KvEventSource k;
    k.endpoint = rest.substr(0, comma);
    if (comma != std::string::npos) k.replay_endpoint = rest.substr(comma + 1);
    if (k.endpoint.empty() || (comma != std::string::npos && k.replay_endpoint.empty()))
      throw dyn::Fatal(dyn::kExitUsage, "--worker-kv-events " + spec + ": empty ZMQ address");
    src[i] = k;
  }
  std::vector<dyn::serve::KvEventSource> out;
  if (specs.empty() && !kv_events) return out;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i])
      throw dyn::Fatal(dyn::kExitUsage, "--router-kv-events: worker " + workers[i] +
                                            " has no --worker-kv-events URL=ZMQ_ADDR (every worker needs its event "
                                            "endpoint)");
    out.push_back(*src[i]);
  }
  return out;
}

// The worker health poll's flags (SPEC 2.6): how often, how slow a poll fails, how many fail.
template <class Opts>
void add_health_flags(CLI::App& sub, Opts& o) {
  sub.add_option("--health-interval-ms", o.health_interval_ms,
                 "Poll each worker's GET /health this often (a healthy worker that completed proxied "
                 "requests since the last round is not polled: its answers say it is alive)")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(10.0, 3.6e6));
  sub.add_option("--health-timeout-ms", o.health_timeout_ms, "A /health poll slower than this counts as a failed poll")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(1.0, 3.6e6));
  sub.add_option("--health-failure-threshold", o.health_failure_threshold,
                 "Consecutive failed /health polls before a worker is marked down (a failed request marks it "
                 "down at once)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
}

/// Retries, circuit breakers (SGLang model gateway's names and defaults) and request migration
/// (Dynamo's --migration-limit, env DYN_MIGRATION_LIMIT).
template <class Opts>
void add_fault_flags(CLI::App& sub, Opts& o) {
  const char* g = "Failures";
  sub.add_option("--migration-limit", o.migration_limit,
                 "Times one streamed chat or messages generation may move to another worker when its worker dies "
                 "or stalls mid-stream (0 = never: the stream is cut)")
      ->envname("DYN_MIGRATION_LIMIT")
      ->capture_default_str()
      ->check(CLI::Range(0u, 100u))
      ->group(g);
  sub.add_option("--retry-max-retries", o.retry.max_retries,
                 "Retries on another worker of a request that failed before its first byte (connection error, 502, "
                 "503, 504; 429 with Retry-After)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 100u))
      ->group(g);
  sub.add_option("--retry-initial-backoff-ms", o.retry.initial_backoff_ms, "Delay before the first retry")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(0.0, 6e5))
      ->group(g);
  sub.add_option("--retry-max-backoff-ms", o.retry.max_backoff_ms, "Longest delay between retries")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(0.0, 6e5))
      ->group(g);
  sub.add_option("--retry-backoff-multiplier", o.retry.multiplier, "Each retry waits this much longer")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(1.0, 100.0))
      ->group(g);
  sub.add_option("--retry-jitter-factor", o.retry.jitter, "Delays vary by up to this fraction either way")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(0.0, 1.0))
      ->group(g);
  sub.add_flag("--disable-retries", o.disable_retries, "Never retry a failed request on another worker")->group(g);
  sub.add_option("--cb-failure-threshold", o.circuit.failure_threshold,
                 "Consecutive failed requests that open a worker's circuit (not routed to)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u))
      ->group(g);
  sub.add_option("--cb-success-threshold", o.circuit.success_threshold,
                 "Successful requests in half-open that close the circuit again")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u))
      ->group(g);
  sub.add_option("--cb-timeout-duration-secs", o.circuit.timeout_s, "An open circuit turns half-open after this")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(0.01, 86400.0))
      ->group(g);
  sub.add_option("--cb-window-duration-secs", o.circuit.window_s,
                 "A failure older than this no longer counts towards the threshold")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(0.01, 86400.0))
      ->group(g);
  sub.add_flag("--disable-circuit-breaker", o.disable_circuit_breaker, "No per-worker circuit breaker")->group(g);
}

/// --router-decision-log's RATE: "" (the flag without one) is 1.0; nullopt when not a number in [0, 1].
std::optional<double> decision_log_rate(const std::string& text) {
  if (text.empty()) return 1.0;
  size_t used = 0;
  double rate = -1;
  try {
    rate = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || !(rate >= 0 && rate <= 1)) return std::nullopt;
  return rate;
}

}  // namespace

void setup_serve(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::cmd::FrontendFlags front;
    dyn::cmd::RouterFlags router;
    dyn::cmd::AdmissionFlags admission;
    dyn::cmd::QueueFlags queue;
    std::vector<std::string> workers;
    std::string binding_store;
    std::string decision_log;
    std::vector<std::string> worker_kv_events;
    bool allow_block_size_mismatch = false;
    std::string tokenizer_url;
    std::string tool_events_endpoint, tool_events_topic = dyn::toolevents::kDefaultTopic;
    uint64_t seed = 0;
    double health_interval_ms = 1000;
    double health_timeout_ms = 1000;
    unsigned health_failure_threshold = 3;
    dyn::serve::RetryOptions retry;
    bool disable_retries = false;
    dyn::serve::CircuitOptions circuit;
    bool disable_circuit_breaker = false;
    unsigned migration_limit = 0;
    dyn::serve::WorkerPriority worker_priority = dyn::serve::WorkerPriority::kOff;
    std::string worker_file;
    double worker_file_interval_ms = 1000;
    std::vector<std::string> kv_policies;  // --kv-policy names (their settings go to front.opt.kv_policy)
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Live OpenAI/Anthropic-compatible frontend: session-aware routing to workers, request tracing");
  sub->add_option("--worker", o->workers,
                  "Worker base URL (repeat; worker ids 0..N-1 in this order; later workers get the next ids)")
      ->type_name("URL");
  sub->add_option("--worker-file", o->worker_file,
                  "Serve over the workers named in FILE (a URL or a JSON worker spec per line), re-read when it "
                  "changes: named workers are added, drained (\"draining\": true) or removed")
      ->type_name("FILE");
  sub->add_option("--worker-file-interval-ms", o->worker_file_interval_ms, "How often --worker-file is read")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(10.0, 3.6e6));
  sub->add_option("--worker-kv-events", o->worker_kv_events,
                  "Where worker URL publishes its KV events (vLLM --kv-events-config endpoint, and its replay "
                  "endpoint if any), for --router-kv-events; repeat for every --worker")
      ->type_name("URL=ZMQ_ADDR[,REPLAY_ADDR]");
  sub->add_flag("--allow-block-size-mismatch", o->allow_block_size_mismatch,
                "Route to a worker whose KV block size differs from --kv-cache-block-size (warn; approximate) "
                "instead of refusing it");
  sub->add_option("--tokenizer-url", o->tokenizer_url,
                  "Hash the token ids from this OpenAI-compatible server's POST /tokenize (vLLM, SGLang, dyn-mocker) "
                  "instead of 4-byte tokens")
      ->type_name("URL");
  sub->add_option(
         "--tool-events-endpoint", o->tool_events_endpoint,
         "Take harness tool events (Dynamo's agent-tool-events: ZMQ PUSH frames [topic, seq, msgpack record]) "
         "on a PULL socket bound here (port 0 = a free one, see GET /v1/tool_events): traced as their own rows "
         "and a session is ACTING while its tool runs")
      ->envname("DYN_REQUEST_TRACE_TOOL_EVENTS_ZMQ_ENDPOINT")
      ->type_name("tcp://HOST:PORT");
  sub->add_option("--tool-events-topic", o->tool_events_topic, "First frame a tool event must carry (\"\" = any)")
      ->envname("DYN_REQUEST_TRACE_TOOL_EVENTS_ZMQ_TOPIC")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of every random routing choice")->capture_default_str();
  add_health_flags(*sub, *o);
  add_fault_flags(*sub, *o);
  sub->add_option("--router-binding-store", o->binding_store,
                  "Share session bindings with other serve replicas through Redis at redis://HOST:PORT[/DB]: "
                  "first claim wins, strict affinity across replicas (needs --router-session-affinity-ttl-secs)")
      ->envname("DYN_ROUTER_BINDING_STORE")
      ->type_name("URL")
      ->group("Router");
  o->front.add(*sub, /*trace_always_on=*/false);
  CLI::Option* decision_log =
      sub->add_option("--router-decision-log", o->decision_log,
                      "Write a route_decision row (every candidate, margin, ties, binding reason, waits) into the "
                      "request trace for this fraction of requests, sampled per request id (default 1.0 when "
                      "given without RATE; needs --request-trace)")
          ->expected(0, 1)
          ->check(CLI::Validator(
              [](std::string& v) {
                return decision_log_rate(v) ? std::string() : "RATE must be a number in [0, 1]: " + v;
              },
              "RATE"))
          ->envname("DYN_ROUTER_DECISION_LOG_SAMPLE_RATE")
          ->type_name("RATE")
          ->group("Router");
  dyn::cmd::add_router_flags(*sub, o->router);
  dyn::cmd::add_admission_flags(*sub, o->admission, /*with_kv_blocks=*/true);
  dyn::cmd::add_queue_flags(*sub, o->queue);
  dyn::cli::add_choice(*sub, "--worker-priority-polarity", o->worker_priority, dyn::serve::kWorkerPriorities,
                       "Forward each request's resolved priority to its worker as the body's `priority`, in the "
                       "polarity its engine schedules by: " +
                           dyn::cli::choices_help(dyn::serve::kWorkerPriorities, "; ", ": "))
      ->group("Router queue");
  dyn::cmd::add_kv_policy_flags(*sub, o->front.opt.kv_policy, o->kv_policies, "KV hints");
  dyn::cmd::add_kv_policy_copy_flags(*sub, o->front.opt.kv_policy, "KV hints");
  dispatch.add(sub, [o, sub, decision_log] {
    o->front.apply(false);
    dyn::serve::FrontendOptions opt = o->front.opt;
    opt.run_config = dyn::cmd::frontend_run_config(*sub->get_parent(), opt);
    opt.workers = o->workers;
    opt.binding_store = o->binding_store;
    if (decision_log->count() > 0) {
      // The log goes into the request trace (SPEC 5.3): without one it would write nothing.
      if (!opt.trace)
        throw dyn::Fatal(dyn::kExitUsage, "--router-decision-log writes into the request trace: add --request-trace");
      opt.decision_log_rate = decision_log_rate(o->decision_log);
    }
    opt.router = o->router.config(o->seed);
    opt.learn_worker_kv_blocks = sub->get_option("--router-worker-kv-blocks")->count() == 0;  // SPEC 3.3
    opt.queue = o->queue.config();
    opt.worker_priority = o->worker_priority;
    opt.kv_events = kv_event_sources(o->workers, o->worker_kv_events, opt.router.kv_events);
    opt.allow_block_size_mismatch = o->allow_block_size_mismatch;
    opt.tokenizer_url = o->tokenizer_url;
    opt.tool_events_endpoint = o->tool_events_endpoint;
    opt.tool_events_topic = o->tool_events_topic;
    dyn::cmd::finish_kv_policy_flags(*sub, opt.kv_policy, o->kv_policies, /*serve=*/true);
    opt.health_interval_ms = o->health_interval_ms;
    opt.health_timeout_ms = o->health_timeout_ms;
    opt.health_failure_threshold = o->health_failure_threshold;
    if (o->workers.empty() && o->worker_file.empty())
      throw dyn::Fatal(dyn::kExitUsage, "at least one --worker URL (or a --worker-file) is needed");
    opt.worker_file = o->worker_file;
    opt.worker_file_interval_ms = o->worker_file_interval_ms;
    opt.retry = o->retry;
    opt.retry.enabled = !o->disable_retries;
    opt.circuit = o->circuit;
    opt.circuit.enabled = !o->disable_circuit_breaker;
    opt.migration_limit = o->migration_limit;
    opt.tool_name = "dyn-route";
    opt.admission = dyn::cmd::admission_config(o->admission);
    // SPEC 9 capacity: the workers' KV blocks (SPEC 8 default, dyn::kDefaultKvBlocks) x the router block size.
    opt.admission_capacity_tokens = (o->admission.kv_blocks ? o->admission.kv_blocks : dyn::kDefaultKvBlocks) *
                                    static_cast<uint64_t>(opt.router.block_size);
    return dyn::serve::run(opt);
  });
}
