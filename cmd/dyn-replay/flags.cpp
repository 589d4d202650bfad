// dyn-replay's flags: registration, and the replay::RunOptions and RunOutput they describe.
#include "flags.h"

#include <fmt/format.h>

#include "dyn/cli/checks.h"
#include "dyn/cli/choices.h"
#include "dyn/cli/run_config.h"
#include "dyn/records/aiperf_dataset.h"
#include "dyn/session/families.h"
#include "dyn/tokens/reference.h"
#include "engine_flags.h"
#include "kv_policy_flags.h"

namespace dyn::cmd {

namespace {

/// The KV retention policies of the simulated router (SPEC 6.4) and the engine's lease bounds.
void add_sim_kv_policy_flags(CLI::App& app, ReplayFlags& f) {
  const std::string g = "KV hints (--sim)";
  add_kv_hint_flags(app, f.run.cluster.engine.kv_hints, g);
  add_kv_policy_flags(app, f.run.cluster.kv_policy, f.kv_policies, g);
}

/// The policies chosen; a lease bound without any policy would do nothing: a usage error
/// (kExitUsage), as a policy's setting without the policy is.
void finish_sim_kv_policy_flags(const CLI::App& app, const std::vector<std::string>& names,
                                kvpolicy::KvPolicyConfig& k) {
  finish_kv_policy_flags(app, k, names);
  for (const char* flag : {"--kv-hint-max-pinned-fraction", "--kv-hint-max-ttl-s"})
    if (!k.any() && app.get_option(flag)->count() > 0)
      throw Fatal(kExitUsage, fmt::format("{} needs a --kv-policy (the hints it bounds)", flag));
}

/// --sim and the simulated cluster's flags (group "Simulation" and the engine, router and
/// admission groups); the options after --sim are recorded in f.cluster.
void add_sim_flags(CLI::App& app, ReplayFlags& f) {
  const char* g = "Simulation";
  replay::SimOptions& c = f.run.cluster;
  app.add_flag(
         "--sim", f.run.sim,
         "Replay through the simulated cluster on a virtual clock instead of an endpoint (the load flags apply as they do live; endpoint-only flags are usage errors)")
      ->group(g);
  const size_t first = app.get_options().size();
  app.add_option("--workers", c.workers, "Simulated engines (--sim)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u))
      ->group(g);
  app.add_option("--sim-epoch-unix-ms", c.epoch_unix_ms, "Unix ms of virtual time 0 in the records (--sim)")
      ->capture_default_str()
      ->group(g);
  app.add_option("--reference", f.references,
                 "Yardstick (repeatable): after the run, its requests with the same timing and engine blocks go "
                 "through one KV cache of every worker's blocks, and the summary gives this run's hit rate as a "
                 "fraction of that cache's: " +
                     cli::choices_help(tokens::kReferencePolicies, "; ", ": "))
      ->check(CLI::IsMember(cli::choice_names(tokens::kReferencePolicies)))
      ->allow_extra_args(false)  // one policy per --reference: a workload file after it stays the input
      ->group(g);
  add_engine_flags(app, c.engine, f.engine, /*with_block_size=*/false, "Engine (--sim)");
  add_sim_kv_policy_flags(app, f);
  add_router_flags(app, f.router);
  add_queue_flags(app, f.queue);
  add_admission_flags(app, f.admission, /*with_kv_blocks=*/false);
  const auto all = app.get_options();
  f.cluster.assign(all.begin() + static_cast<std::ptrdiff_t>(first), all.end());
}

/// The live endpoint's flags.
void add_endpoint_flags(CLI::App& app, replay::RunOptions& r) {
  app.add_option("--url,-u", r.url, "Endpoint base URL, e.g. http://127.0.0.1:8000 (required unless --sim)");
  cli::add_choice(app, "--endpoint-type", r.api, replay::kEndpointTypes, "API of the endpoint");
  app.add_option("--endpoint,--custom-endpoint", r.endpoint_path,
                 "Request path instead of the endpoint type's default (/v1/chat/completions)");
  app.add_flag("--streaming,!--no-streaming", r.streaming, "Stream responses (SSE; default on: TTFT and ITL need it)");
  app.add_option("--model,-m,--model-names", r.model,
                 "Model name sent in every request (default: the first of GET /v1/models; one name)");
  app.add_option(
         "--session-headers", r.session_headers,
         "How session identity is sent, as the named client does (SPEC 1.1, 6.3): " + session::describe_client_styles())
      ->check(CLI::IsMember(session::client_style_names()))
      ->capture_default_str();
  cli::add_choice(app, "--history", r.history, replay::kHistories, cli::choices_help(replay::kHistories, "; ", ": "));
}

/// The load flags (the same meaning live and with --sim).
void add_load_flags(CLI::App& app, replay::RunOptions& r) {
  replay::ScheduleOptions& s = r.schedule;
  app.add_flag("--fixed-schedule", r.fixed_schedule,
               "Send each request at its timestamp (default when the first row has a timestamp)");
  app.add_flag("--fixed-schedule-auto-offset", s.auto_offset,
               "Shift the schedule so the first kept timestamp is time 0");
  app.add_option("--fixed-schedule-start-offset", s.start_offset_ms,
                 "Skip rows before this timestamp (ms, inclusive); it becomes time 0")
      ->type_name("MS");
  app.add_option("--fixed-schedule-end-offset", s.end_offset_ms, "Skip rows after this timestamp (ms, inclusive)")
      ->type_name("MS");
  app.add_option("--speedup", s.speedup, "Divide every timestamp gap and delay by this factor")
      ->check(cli::positive())
      ->capture_default_str();
  app.add_option("--request-rate", s.request_rate,
                 "Start sessions / requests at this rate (req/s) instead of the schedule")
      ->check(cli::positive());
  cli::add_choice(app, "--request-rate-mode,--arrival-pattern", s.rate_mode, replay::kRateModes,
                  "Arrival process of --request-rate");
  app.add_option("--request-rate-gamma-shape,--arrival-smoothness,--vllm-burstiness", s.gamma_shape,
                 "Shape of gamma arrivals (1 = Poisson, larger = smoother)")
      ->check(cli::positive())
      ->capture_default_str();
  app.add_option("--concurrency", r.concurrency,
                 "Requests in flight at most; alone, it selects closed-loop concurrency mode")
      ->check(cli::positive());
  app.add_option("--request-count,--num-requests", s.request_count, "Send only the first N requests of the plan")
      ->check(cli::positive());
  app.add_option("--benchmark-duration", r.duration_s, "Send no request after this many seconds (AIPerf)")
      ->type_name("S")
      ->check(cli::positive());
  app.add_option("--benchmark-grace-period", r.grace_period_s,
                 "With --benchmark-duration: how long requests in flight may still finish before they are "
                 "cancelled (inf = wait for all)")
      ->type_name("S")
      ->check(cli::non_negative_or_inf())
      ->capture_default_str();
  app.add_option("--warmup-request-count,--num-warmup-requests", r.warmup,
                 "Warmup requests sent first (rows flagged dyn.warmup)");
}

/// The request flags after the load flags (tokenizer, workload, seed, body and connection).
void add_request_flags(CLI::App& app, replay::RunOptions& r) {
  app.add_option("--tokenizer-url", r.tokenizer_url,
                 "Size each synthetic prompt to exactly input_length tokens of the engine's tokenizer at URL "
                 "(OpenAI-compatible POST URL/tokenize, as vLLM and SGLang serve) instead of 4 bytes per token")
      ->type_name("URL");
  app.add_option("--tool-events-endpoint", r.tool_events_endpoint,
                 "Send a harness's tool events (Dynamo's agent-tool-events, ZMQ PUSH) to this address for the tool "
                 "waits replayed (rows with tool_wait_ms): tool_start when the turn before ends, tool_end when the "
                 "wait is over")
      ->type_name("tcp://HOST:PORT");
  app.add_option("--block-size", r.block_size, "Block size of hash_ids (default 512; Dynamo traces carry their own)");
  app.add_flag("--lenient", r.lenient,
               "Warn about hash_ids that do not fit input_length instead of rejecting the workload");
  app.add_option("--seed,--random-seed", r.seed, "Seed for synthetic prompts and random arrivals")
      ->capture_default_str();
  app.add_flag("--ignore-eos", r.ignore_eos,
               "Ask the server for exactly output_length tokens (ignore_eos, min_tokens)");
  app.add_option("--extra-inputs", r.extra_inputs, "Extra body field KEY:VALUE (VALUE parsed as JSON when it is)")
      ->type_name("KEY:VALUE");
  app.add_option("--header,-H", r.headers, "Extra request header 'Name: value'")->type_name("HEADER");
  app.add_option("--request-timeout-seconds", r.request_timeout_s,
                 "Fail a request after this long (also the idle read limit)")
      ->check(cli::positive())
      ->capture_default_str();
  app.add_option("--connect-timeout-seconds", r.connect_timeout_s, "Fail a connection attempt after this long")
      ->check(cli::positive())
      ->capture_default_str();
  app.add_option("--max-connections", r.max_connections, "Connections (worker threads) at most")
      ->check(cli::positive())
      ->capture_default_str();
  app.add_flag_function(
      "--progress,!--no-progress", [&r](int64_t n) { r.progress = n > 0; },
      "Progress on stderr (default: only when stderr is a terminal)");
  app.add_flag_function(
      "--summary-table,!--no-summary-table", [&r](int64_t n) { r.summary_table = n > 0; },
      "AIPerf's console table of the run's metrics on stderr at the end (default: for a live replay when stderr is "
      "a terminal; stdout keeps only the rows)");
}

}  // namespace

void add_replay_flags(CLI::App& app, ReplayFlags& f) {
  app.add_option("workload", f.run.inputs,
                 "Workload: Mooncake JSONL (with session extensions) or Dynamo trace files; - or none = stdin")
      ->type_name("FILE");
  app.add_option("--input-file", f.input_files, "The workload file (AIPerf's spelling of the positional FILE)")
      ->type_name("FILE");
  app.add_option_function<std::string>(
         "--custom-dataset-type",
         [&f](const std::string& s) { f.run.dataset_type = *parse_in(records::kDatasetTypes, s); },
         "AIPerf's dataset type of the workload (default: recognised by its rows; random_pool must be named): " +
             cli::choices_help(records::kDatasetTypes, "; ", ": "))
      ->check(CLI::IsMember(cli::choice_names(records::kDatasetTypes)));
  app.add_option("--conversation-num,--num-conversations,--num-sessions", f.run.conversation_num,
                 "random_pool: requests drawn from the pool (AIPerf's spelling; default 100)")
      ->check(cli::positive());
  app.add_option("--summary", f.summary_path,
                 "Also write the run summary as JSON to FILE: the configuration (version, flags and the environment "
                 "variables that set them, inputs with SHA-256) and the counts and timing printed on stderr")
      ->type_name("FILE");
  app.add_option(
         "--artifact-dir,--output-artifact-dir", f.artifact_dir,
         "Write requests.jsonl (unless -o), summary.json and AIPerf's profile_export files into DIR (AIPerf's spelling)")
      ->type_name("DIR");
  add_endpoint_flags(app, f.run);
  add_load_flags(app, f.run);
  add_request_flags(app, f.run);
  cli::add_output_options(app, f.out);
  add_sim_flags(app, f);
}

replay::RunOptions run_options(const CLI::App& app, const ReplayFlags& f) {
  replay::RunOptions r = f.run;
  // AIPerf's --input-file names the workload as the positional argument does.
  r.inputs.insert(r.inputs.end(), f.input_files.begin(), f.input_files.end());
  r.cluster.router = f.router.config();
  if (r.sim) {
    // One block size for engine and router: --kv-cache-block-size, or the profile's when not given.
    f.engine.finish(r.cluster.engine, r.cluster.router.block_size, f.router.block_size_given());
    r.cluster.router.block_size = r.cluster.engine.block_size;
    r.cluster.queue = f.queue.config();
  }
  r.cluster.admission = f.admission.config;  // validated by replay::run, after the flag conflicts
  finish_sim_kv_policy_flags(app, f.kv_policies, r.cluster.kv_policy);
  for (const auto& name : f.references) r.cluster.references.push_back(*parse_in(tokens::kReferencePolicies, name));
  r.typed = cli::typed_flags(app);
  for (const CLI::Option* o : f.cluster)
    if (cli::on_command_line(o)) r.cluster_typed.push_back("--" + o->get_lnames().front());
  return r;
}

replay::RunOutput run_output(const CLI::App& app, const ReplayFlags& f, const std::vector<std::string>& inputs) {
  replay::RunOutput out;
  out.rows = f.out.output;
  out.line_buffered = f.out.line_buffered;
  out.summary_path = f.summary_path;
  out.artifact_dir = f.artifact_dir;
  out.config = cli::run_config(app, inputs);
  return out;
}

}  // namespace dyn::cmd
