// dyn-replay: replay a workload against a live OpenAI-compatible endpoint (SPEC 6.3) and write
// one request_end row per request.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "dyn/cli/checks.h"
#include "dyn/base/diag.h"
#include "dyn/cli/run_config.h"
#include "dyn/cli/run_tool.h"
#include "dyn/io/output.h"
#include "dyn/metrics/report.h"
#include "dyn/http/server.h"
#include "dyn/replay/live.h"
#include "dyn/replay/load.h"
#include "dyn/replay/summary.h"
#include "dyn/session/families.h"
#include "sim_cmd.h"

namespace {

struct Opts {
  std::vector<std::string> inputs, input_files;
  std::string dataset_type, summary_path, artifact_dir;
  std::string tokenizer_url;
  std::string url, endpoint_type = "chat", endpoint, model, session_headers = "dynamo", history = "cumulative";
  bool streaming = true, fixed_schedule = false, auto_offset = false, lenient = false, ignore_eos = false;
  std::optional<double> start_offset, end_offset;
  double speedup = 1, request_rate = 0, gamma_shape = 1, duration_s = 0, request_timeout_s = 600,
         connect_timeout_s = 10;
  std::string rate_mode = "constant";
  uint64_t concurrency = 0, request_count = 0, warmup = 0, seed = 0, max_connections = 4096;
  uint32_t block_size = 0;
  std::vector<std::string> headers, extra_inputs;
  std::optional<bool> progress;
  dyn::cli::OutputOptions out;
  dyn::cmd::SimFlags sim;
};

/// "KEY:VALUE" -> (key, JSON value or string).
std::pair<std::string, dyn::Json> parse_extra(const std::string& kv) {
  auto c = kv.find(':');
  if (c == std::string::npos || c == 0)
    throw dyn::Fatal(dyn::kExitUsage, "--extra-inputs " + kv + ": expected KEY:VALUE");
  std::string v = kv.substr(c + 1);
  dyn::Json j = dyn::Json::parse(v, nullptr, false);
  return {kv.substr(0, c), j.is_discarded() ? dyn::Json(v) : j};
}

std::string pick_model(const dyn::http::ClientOptions& co) {
  dyn::http::ClientOptions o = co;
  o.read_timeout_s = std::min(o.read_timeout_s, 10.0);
  dyn::http::Connection c(o);
  auto [status, body] = c.get("/v1/models");
  if (status == 200) {
    dyn::Json j = dyn::Json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
        j["data"][0].contains("id") && j["data"][0]["id"].is_string())
      return j["data"][0]["id"].get<std::string>();
  }
  // status 0: nothing answered. That is a network failure (exit 4) saying why, not a usage error.
  if (status == 0) throw dyn::Fatal(dyn::kExitIo, body);
  throw dyn::Fatal(dyn::kExitUsage, "no --model given and GET " + co.endpoint.join("/v1/models") + " answered HTTP " +
                                        std::to_string(status) + " without a model id; pass --model");
}

/// --artifact-dir (AIPerf's spelling): DIR/summary.json plus AIPerf's three export files computed
/// from the rows just written, with the run's configuration as their input_config.
void write_artifacts(const Opts& o, const dyn::Json& config, const dyn::Json& summary) {
  using namespace dyn;
  cli::write_run_record(*cli::open_run_record(o.artifact_dir + "/summary.json"), config, summary);
  metrics::RequestSet set = metrics::load_requests({o.out.output});
  metrics::write_aiperf_export(set, metrics::build_report(set), o.artifact_dir, config);
  diag::note("artifacts in " + o.artifact_dir + ": " + o.out.output.substr(o.out.output.rfind('/') + 1) +
             ", summary.json, profile_export.jsonl, profile_export_aiperf.json, profile_export_aiperf.csv");
}

int run_live(Opts& o, CLI::App& app, dyn::Json& summary);

/// The load flags (mode flags and schedule) as given, for the live replay and --sim alike; the
/// mode is replay::choose_load's.
dyn::replay::LoadFlags load_flags(const Opts& o, const CLI::App& app) {
  dyn::replay::LoadFlags f;
  f.fixed_schedule = o.fixed_schedule;
  f.concurrency = o.concurrency;
  f.rate_mode_given = app.count("--request-rate-mode") > 0;
  f.gamma_shape_given = app.count("--request-rate-gamma-shape") > 0;
  dyn::replay::ScheduleOptions& s = f.schedule;
  s.speedup = o.speedup;
  s.start_offset_ms = o.start_offset;
  s.end_offset_ms = o.end_offset;
  s.auto_offset = o.auto_offset;
  s.request_rate = o.request_rate;
  s.rate_mode = *dyn::replay::parse_rate_mode(o.rate_mode);
  s.gamma_shape = o.gamma_shape;
  s.seed = o.seed;
  s.request_count = o.request_count;
  return f;
}

/// --sim: the load controls mean what they mean live (the mode chosen the same way: fixed
/// schedule unless --request-rate or --concurrency alone say otherwise; replay::SimOptions).
/// Every live-only flag, and any combination the simulator cannot honour, is a usage error
/// naming the flag: an accepted flag works (house rule), it is never silently ignored.
void set_sim_load(Opts& o, const CLI::App& app) {
  using namespace dyn;
  // The simulated engines count 4-byte tokens (SPEC 4.2) by construction: an engine tokenizer
  // has nothing to size there.
  if (!o.tokenizer_url.empty())
    throw Fatal(kExitUsage, "--tokenizer-url sizes prompts for a live endpoint; it cannot be used with --sim");
  for (const char* name : {"--url", "--endpoint-type", "--endpoint", "--streaming", "--session-headers", "--history",
                           "--header", "--extra-inputs", "--ignore-eos", "--request-timeout-seconds",
                           "--connect-timeout-seconds", "--max-connections", "--progress"}) {
    if (!app.count(name)) continue;
    const std::string shown = std::string(name) == "--streaming" || std::string(name) == "--progress"
                                  ? fmt::format("{} / --no-{}", name, name + 2)
                                  : name;
    throw Fatal(kExitUsage, shown + " applies to a live endpoint; it has no meaning with --sim");
  }
  if (o.warmup)
    throw Fatal(kExitUsage, "--warmup-request-count cannot be used with --sim: the simulator sends no warmup requests");
  const replay::LoadFlags lf = load_flags(o, app);
  replay::refuse_schedule_with_rate(lf);
  replay::refuse_rate_shape_without_rate(lf);
  // The fixed schedule by default: the simulator reads the workload requiring timestamps then.
  const replay::Load load = replay::choose_load(lf, /*workload_has_timestamps=*/true);
  o.sim.schedule = lf.schedule;
  o.sim.schedule.mode = load.mode;
  o.sim.concurrency = load.concurrency;
  o.sim.duration_s = o.duration_s;
}

int run(Opts& o, CLI::App& app) {
  using namespace dyn;
  // AIPerf's --input-file names the workload as the positional argument does.
  o.inputs.insert(o.inputs.end(), o.input_files.begin(), o.input_files.end());
  if (cli::stdin_is_interactive(o.inputs)) {
    std::fputs(app.help().c_str(), stderr);
    return kExitUsage;
  }
  if (!o.artifact_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.artifact_dir, ec);
    if (ec) throw Fatal(kExitIo, o.artifact_dir + ": cannot create directory: " + ec.message());
    if (o.out.output.empty() || o.out.output == "-") o.out.output = o.artifact_dir + "/requests.jsonl";
  }
  const bool record = !o.summary_path.empty() || !o.artifact_dir.empty();
  std::unique_ptr<io::Output> summary_out;  // opened now: a bad --summary path fails before the run
  if (!o.summary_path.empty()) summary_out = cli::open_run_record(o.summary_path);
  const Json config = cli::run_config(app, o.inputs);
  // Settings taken from the environment change results as flags do: say so on stderr.
  std::string from_env;
  for (const auto& [name, src] : config["sources"].items())
    if (src.get<std::string>().rfind("env ", 0) == 0)
      from_env += (from_env.empty() ? "" : ", ") + name + " " + config["options"][name].dump() + " (" +
                  src.get<std::string>() + ")";
  if (!from_env.empty()) diag::note("settings from the environment: " + from_env);
  Json summary;
  int rc;
  if (o.sim.sim) {  // the same workload through the simulated cluster (engine's sim_cmd)
    set_sim_load(o, app);
    o.sim.seed = o.seed;
    o.sim.lenient = o.lenient;
    if (!o.model.empty()) o.sim.model = o.model;
    rc = cmd::run_sim_cmd(o.inputs, o.block_size, o.sim, o.out.output, o.out.line_buffered, &summary);
  } else {
    rc = run_live(o, app, summary);
  }
  if (record && !summary.is_null()) {
    summary["exit_status"] = rc;
    if (summary_out) cli::write_run_record(*summary_out, config, summary);
    if (!o.artifact_dir.empty()) write_artifacts(o, config, summary);
  }
  return rc;
}

int run_live(Opts& o, CLI::App& app, dyn::Json& summary) {
  using namespace dyn;
  if (o.url.empty()) throw Fatal(kExitUsage, "--url is required (or --sim)");
  if (!o.sim.references.empty())
    throw Fatal(kExitUsage,
                "--reference needs --sim (for a live run's rows: dyn-bench report --reference NAME "
                "--reference-kv-blocks N)");
  // The simulated cluster's settings mean nothing to a live endpoint: typed, they are usage
  // errors, not silently ignored (an accepted flag works).
  for (const CLI::Option* opt : o.sim.cluster_options) {
    if (!cli::on_command_line(opt)) continue;
    throw Fatal(kExitUsage, "--" + opt->get_lnames().front() +
                                " configures the simulated cluster (--sim); a live run uses the endpoint's own "
                                "workers, router and engines");
  }
  replay::LiveOptions lo;
  auto ep = http::Endpoint::parse(o.url);
  if (!ep) throw Fatal(ep.error().exit_code, ep.error().message);
  lo.client.endpoint = *ep;
  lo.client.connect_timeout_s = o.connect_timeout_s;
  lo.client.read_timeout_s = o.request_timeout_s;
  lo.client.request_timeout_s = o.request_timeout_s;
  lo.api = o.endpoint_type == "completions" ? api::Api::kCompletions : api::Api::kChat;
  lo.endpoint_path = o.endpoint;
  lo.streaming = o.streaming;
  lo.header_style = dyn::session::find_client_style(o.session_headers);
  lo.history = o.history == "delta" ? replay::History::kDelta : replay::History::kCumulative;
  lo.warmup_count = o.warmup;
  lo.duration_s = o.duration_s;
  lo.prompt_seed = o.seed;
  lo.ignore_eos = o.ignore_eos;
  lo.max_connections = o.max_connections;
  lo.tokenizer_url = o.tokenizer_url;
  for (const auto& kv : o.extra_inputs) {
    auto [k, v] = parse_extra(kv);
    lo.extra_inputs[k] = v;
  }
  for (const auto& h : o.headers) {
    auto c = h.find(':');
    if (c == std::string::npos || c == 0) throw Fatal(kExitUsage, "--header " + h + ": expected 'Name: value'");
    std::string v = h.substr(c + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    const std::string name = h.substr(0, c);
    // RFC 9110 5.1/5.5: a field name is a token (no spaces: "Name : v" or " Name: v" would go
    // out as a malformed or continued line), and a value holds no CR, LF or NUL.
    if (name.find_first_of(" \t\r\n") != std::string::npos ||
        v.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
      throw Fatal(kExitUsage, "--header '" + h + "': expected 'Name: value' (no spaces in the name, no line breaks)");
    // The style writes its headers from each row's session: a second value of the same header
    // would make every request's identity conflict (the router answers 400).
    for (const auto& w : lo.header_style->writes)
      if (dyn::http::header_name_equal(name, w.name))
        throw Fatal(kExitUsage, "--header " + name + ": --session-headers " + o.session_headers +
                                    " sends this header from each row's session; use --session-headers none to send "
                                    "your own");
    lo.extra_headers.emplace_back(name, v);
  }
  // What the live replay cannot honour is a usage error, as in --sim, before the workload is read.
  const replay::LoadFlags lf = load_flags(o, app);
  replay::refuse_schedule_with_rate(lf);
  replay::refuse_rate_shape_without_rate(lf);
  replay::refuse_offsets_off_schedule(lf);
  records::WorkloadOptions wo;
  wo.block_size = o.block_size;
  wo.strict_hash_ids = !o.lenient;
  replay::require_timestamps(lf, wo);
  records::Workload w = records::load_workload(o.inputs.empty() ? std::vector<std::string>{"-"} : o.inputs, wo);
  if (!w.ok()) throw Fatal(kExitBadData, std::to_string(w.errors.size()) + " workload error(s); nothing was sent");
  if (w.rows.empty()) throw Fatal(kExitBadData, records::no_workload_rows_message(o.inputs));
  const replay::Load load = replay::choose_load(lf, w.has_timestamps);
  lo.schedule = lf.schedule;
  lo.schedule.mode = load.mode;
  lo.concurrency = load.concurrency;
  lo.model = o.model.empty() ? pick_model(lo.client) : o.model;
  lo.progress = o.progress.value_or(isatty(STDERR_FILENO) != 0);

  io::Output* out = nullptr;
  auto file = cli::open_output(o.out, &out);
  replay::LiveStats st;
  {
    // SIGINT/SIGTERM stop the replay without losing a row (interrupt_live); the connection
    // threads inherit the blocked mask. A second signal exits at once.
    http::SignalWatcher watcher(
        [](int sig) {
          replay::interrupt_live(std::string("interrupted (") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                                 "): sending nothing more; requests in flight are cancelled and keep their rows "
                                 "(again to quit at once)");
        },
        /*exit_on_second=*/true);
    st = replay::run_live(w, lo, *out);
  }
  out->close();

  diag::note(replay::live_summary_line(st));
  for (const auto& [k, n] : st.errors_by_type) diag::note("  errors " + k + ": " + std::to_string(n));
  summary = replay::live_summary_json(st, o.url);
  replay::LiveVerdict v = replay::live_verdict(st, o.url);
  if (!v.error.empty()) diag::error("", v.error);
  return v.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Replay a workload against a live endpoint or the simulated cluster", "dyn-replay"};
  Opts o;
  app.add_option("workload", o.inputs,
                 "Workload: Mooncake JSONL (with session extensions) or Dynamo trace files; - or none = stdin")
      ->type_name("FILE");
  app.add_option("--input-file", o.input_files, "The workload file (AIPerf's spelling of the positional FILE)")
      ->type_name("FILE");
  app.add_option("--custom-dataset-type", o.dataset_type,
                 "AIPerf's dataset type; mooncake_trace (Mooncake JSONL, the format read here) is the one accepted")
      ->check(CLI::IsMember({"mooncake_trace"}));
  app.add_option("--summary", o.summary_path,
                 "Also write the run summary as JSON to FILE: the configuration (version, flags and the environment "
                 "variables that set them, inputs with SHA-256) and the counts and timing printed on stderr")
      ->type_name("FILE");
  app.add_option(
         "--artifact-dir", o.artifact_dir,
         "Write requests.jsonl (unless -o), summary.json and AIPerf's profile_export files into DIR (AIPerf's spelling)")
      ->type_name("DIR");
  app.add_option("--url,-u", o.url, "Endpoint base URL, e.g. http://127.0.0.1:8000 (required unless --sim)");
  app.add_option("--endpoint-type", o.endpoint_type, "API of the endpoint")
      ->check(CLI::IsMember({"chat", "completions"}))
      ->capture_default_str();
  app.add_option("--endpoint", o.endpoint,
                 "Request path instead of the endpoint type's default (/v1/chat/completions)");
  app.add_flag("--streaming,!--no-streaming", o.streaming, "Stream responses (SSE; default on: TTFT and ITL need it)");
  app.add_option("--model,-m", o.model, "Model name sent in every request (default: the first of GET /v1/models)");
  app.add_option("--session-headers", o.session_headers,
                 "How session identity is sent, as the named client does (SPEC 1.1, 6.3): " +
                     dyn::session::describe_client_styles())
      ->check(CLI::IsMember(dyn::session::client_style_names()))
      ->capture_default_str();
  app.add_option(
         "--history", o.history,
         "cumulative: a row is the whole prompt; delta: rows are new input, earlier turns and live replies are threaded in")
      ->check(CLI::IsMember({"cumulative", "delta"}))
      ->capture_default_str();
  app.add_flag("--fixed-schedule", o.fixed_schedule,
               "Send each request at its timestamp (default when the first row has a timestamp)");
  app.add_flag("--fixed-schedule-auto-offset", o.auto_offset,
               "Shift the schedule so the first kept timestamp is time 0");
  app.add_option("--fixed-schedule-start-offset", o.start_offset,
                 "Skip rows before this timestamp (ms, inclusive); it becomes time 0")
      ->type_name("MS");
  app.add_option("--fixed-schedule-end-offset", o.end_offset, "Skip rows after this timestamp (ms, inclusive)")
      ->type_name("MS");
  app.add_option("--speedup", o.speedup, "Divide every timestamp gap and delay by this factor")
      ->check(dyn::cli::positive())
      ->capture_default_str();
  app.add_option("--request-rate", o.request_rate,
                 "Start sessions / requests at this rate (req/s) instead of the schedule")
      ->check(dyn::cli::positive());
  app.add_option("--request-rate-mode", o.rate_mode, "Arrival process of --request-rate")
      ->check(CLI::IsMember({"constant", "poisson", "gamma"}))
      ->capture_default_str();
  app.add_option("--request-rate-gamma-shape", o.gamma_shape,
                 "Shape of gamma arrivals (1 = Poisson, larger = smoother)")
      ->check(dyn::cli::positive())
      ->capture_default_str();
  app.add_option("--concurrency", o.concurrency,
                 "Requests in flight at most; alone, it selects closed-loop concurrency mode")
      ->check(dyn::cli::positive());
  app.add_option("--request-count,--num-requests", o.request_count, "Send only the first N requests of the plan")
      ->check(dyn::cli::positive());
  app.add_option("--benchmark-duration", o.duration_s, "Stop sending new requests after this many seconds")
      ->type_name("S")
      ->check(dyn::cli::positive());
  app.add_option("--warmup-request-count", o.warmup, "Warmup requests sent first (rows flagged dyn.warmup)");
  app.add_option("--tokenizer-url", o.tokenizer_url,
                 "Size each synthetic prompt to exactly input_length tokens of the engine's tokenizer at URL "
                 "(OpenAI-compatible POST URL/tokenize, as vLLM and SGLang serve) instead of 4 bytes per token")
      ->type_name("URL");
  app.add_option("--block-size", o.block_size, "Block size of hash_ids (default 512; Dynamo traces carry their own)");
  app.add_flag("--lenient", o.lenient,
               "Warn about hash_ids that do not fit input_length instead of rejecting the workload");
  app.add_option("--seed,--random-seed", o.seed, "Seed for synthetic prompts and random arrivals")
      ->capture_default_str();
  app.add_flag("--ignore-eos", o.ignore_eos,
               "Ask the server for exactly output_length tokens (ignore_eos, min_tokens)");
  app.add_option("--extra-inputs", o.extra_inputs, "Extra body field KEY:VALUE (VALUE parsed as JSON when it is)")
      ->type_name("KEY:VALUE");
  app.add_option("--header,-H", o.headers, "Extra request header 'Name: value'")->type_name("HEADER");
  app.add_option("--request-timeout-seconds", o.request_timeout_s,
                 "Fail a request after this long (also the idle read limit)")
      ->check(dyn::cli::positive())
      ->capture_default_str();
  app.add_option("--connect-timeout-seconds", o.connect_timeout_s, "Fail a connection attempt after this long")
      ->check(dyn::cli::positive())
      ->capture_default_str();
  app.add_option("--max-connections", o.max_connections, "Connections (worker threads) at most")
      ->check(dyn::cli::positive())
      ->capture_default_str();
  app.add_flag_function(
      "--progress,!--no-progress", [&](int64_t n) { o.progress = n > 0; },
      "Progress on stderr (default: only when stderr is a terminal)");
  dyn::cli::add_output_options(app, o.out);
  dyn::cmd::add_sim_flags(app, o.sim, /*add_seed=*/false, /*add_model=*/false);
  return dyn::cli::run_tool(argc, argv, app, [&] { return run(o, app); });
}
