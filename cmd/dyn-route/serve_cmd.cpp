// dyn-route serve: the live session-aware frontend (router flags, trace flags) -> serve::Frontend.
#include <algorithm>
#include <memory>
#include <optional>

#include "dyn/cli/checks.h"
#include "dyn/base/defaults.h"

#include "admission_flags.h"
#include "commands.h"
#include "frontend_flags.h"
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
    auto w = std::find(workers.begin(), workers.end(), url);
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

}  // namespace

void setup_serve(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::cmd::FrontendFlags front;
    dyn::cmd::RouterFlags router;
    dyn::cmd::AdmissionFlags admission;
    dyn::cmd::QueueFlags queue;
    std::vector<std::string> workers;
    std::string binding_store;
    std::vector<std::string> worker_kv_events;
    bool allow_block_size_mismatch = false;
    std::string tokenizer_url;
    uint64_t seed = 0;
    double health_interval_ms = 1000;
    double health_timeout_ms = 1000;
    unsigned health_failure_threshold = 3;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Live OpenAI/Anthropic-compatible frontend: session-aware routing to workers, request tracing");
  sub->add_option("--worker", o->workers, "Worker base URL (repeat; worker ids 0..N-1 in this order)")
      ->required()
      ->type_name("URL");
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
  sub->add_option("--seed", o->seed, "Seed of every random routing choice")->capture_default_str();
  sub->add_option("--health-interval-ms", o->health_interval_ms, "Poll each worker's GET /health this often")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(10.0, 3.6e6));
  sub->add_option("--health-timeout-ms", o->health_timeout_ms,
                  "A /health poll slower than this counts as a failed poll")
      ->capture_default_str()
      ->check(dyn::cli::finite())
      ->check(CLI::Range(1.0, 3.6e6));
  sub->add_option("--health-failure-threshold", o->health_failure_threshold,
                  "Consecutive failed /health polls before a worker is marked down (a failed request marks it "
                  "down at once)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  sub->add_option("--router-binding-store", o->binding_store,
                  "Share session bindings with other serve replicas through Redis at redis://HOST:PORT[/DB]: "
                  "first claim wins, strict affinity across replicas (needs --router-session-affinity-ttl-secs)")
      ->envname("DYN_ROUTER_BINDING_STORE")
      ->type_name("URL")
      ->group("Router");
  o->front.add(*sub, /*trace_always_on=*/false);
  dyn::cmd::add_router_flags(*sub, o->router);
  dyn::cmd::add_admission_flags(*sub, o->admission, /*with_kv_blocks=*/true);
  dyn::cmd::add_queue_flags(*sub, o->queue);
  dispatch.add(sub, [o, sub] {
    o->front.apply(false);
    dyn::serve::FrontendOptions opt = o->front.opt;
    opt.run_config = dyn::cmd::frontend_run_config(*sub->get_parent(), opt);
    opt.workers = o->workers;
    opt.binding_store = o->binding_store;
    opt.router = o->router.config(o->seed);
    opt.queue = o->queue.config();
    opt.kv_events = kv_event_sources(o->workers, o->worker_kv_events, opt.router.kv_events);
    opt.allow_block_size_mismatch = o->allow_block_size_mismatch;
    opt.tokenizer_url = o->tokenizer_url;
    opt.health_interval_ms = o->health_interval_ms;
    opt.health_timeout_ms = o->health_timeout_ms;
    opt.health_failure_threshold = o->health_failure_threshold;
    opt.tool_name = "dyn-route";
    opt.admission = dyn::cmd::admission_config(o->admission);
    // SPEC 9 capacity: the workers' KV blocks (SPEC 8 default, dyn::kDefaultKvBlocks) x the router block size.
    opt.admission_capacity_tokens = (o->admission.kv_blocks ? o->admission.kv_blocks : dyn::kDefaultKvBlocks) *
                                    static_cast<uint64_t>(opt.router.block_size);
    return dyn::serve::run(opt);
  });
}
