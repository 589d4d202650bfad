// dyn-replay as one call: flag conflicts, the live or simulated run, its summary and records.
#include "dyn/replay/run.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/http/server.h"
#include "dyn/io/output.h"
#include "dyn/metrics/report.h"
#include "dyn/records/workload.h"
#include "dyn/replay/load.h"
#include "dyn/replay/summary.h"
#include "dyn/session/families.h"

namespace dyn::replay {

namespace {

/// The flags only a live endpoint reads, as errors name them: with --sim each is a usage error
/// (docs/cli.md). A flag with a negation is named with it, as either may have been typed.
constexpr const char* kLiveOnlyFlags[] = {
    "--url",
    "--endpoint-type",
    "--endpoint",
    "--streaming / --no-streaming",
    "--session-headers",
    "--history",
    "--header",
    "--extra-inputs",
    "--ignore-eos",
    "--request-timeout-seconds",
    "--connect-timeout-seconds",
    "--tool-events-endpoint",
    "--max-connections",
    "--progress / --no-progress",
};

bool was_typed(const RunOptions& o, std::string_view flag) {
  return std::find(o.typed.begin(), o.typed.end(), flag) != o.typed.end();
}

/// The load flags as given, for the live replay and --sim alike (load.h chooses the mode).
LoadFlags load_flags(const RunOptions& o) {
  LoadFlags f;
  f.fixed_schedule = o.fixed_schedule;
  f.concurrency = o.concurrency;
  f.rate_mode_given = was_typed(o, "--request-rate-mode");
  f.gamma_shape_given = was_typed(o, "--request-rate-gamma-shape");
  f.schedule = o.schedule;
  f.schedule.seed = o.seed;
  return f;
}

/// How the workload is read (both modes): block size, hash-id strictness, AIPerf's dataset type and,
/// for random_pool, how many requests are drawn with which seed. --conversation-num of another
/// type, or a directory of pools, is a usage error.
records::WorkloadOptions workload_options(const RunOptions& o) {
  records::WorkloadOptions wo;
  wo.block_size = o.block_size;
  wo.strict_hash_ids = !o.lenient;
  wo.dataset_type = o.dataset_type;
  if (o.conversation_num && o.dataset_type != records::DatasetType::kRandomPool)
    throw Fatal(kExitUsage,
                "--conversation-num draws requests from a pool: it needs --custom-dataset-type random_pool");
  if (o.conversation_num) wo.pool_samples = o.conversation_num;
  wo.pool_seed = o.seed;
  if (o.dataset_type == records::DatasetType::kRandomPool)
    for (const auto& p : o.inputs)
      if (std::filesystem::is_directory(p))
        throw Fatal(kExitUsage, p + ": random_pool from a directory (AIPerf merges one entry of each file into a "
                                    "request) is not read by dyn-replay; give one pool file");
  return wo;
}

/// The sink of the rows: stdout or a file (renamed into place by close()).
io::Output& open_rows(const RunOutput& out, std::unique_ptr<io::Output>& file) {
  if (out.rows.empty() || out.rows == "-") {
    if (out.line_buffered) io::set_stdout_line_buffered(true);
    return io::stdout_output();
  }
  file = std::make_unique<io::Output>(out.rows, out.line_buffered);
  return *file;
}

/// The run record {"config", "summary"} as indented JSON (the shape of cli::write_run_record).
void write_record(io::Output& out, const Json& config, const Json& summary) {
  out.line(Json{{"config", config}, {"summary", summary}}.dump(2));
  out.close();
}

/// --artifact-dir: DIR/summary.json plus AIPerf's three export files computed from the rows just
/// written, with the run's configuration as their input_config.
void write_artifacts(const RunOutput& out, const Json& summary) {
  io::Output record(out.artifact_dir + "/summary.json");
  write_record(record, out.config, summary);
  metrics::RequestSet set = metrics::load_requests({out.rows});
  metrics::write_aiperf_export(set, metrics::build_report(set), out.artifact_dir, out.config);
  diag::note("artifacts in " + out.artifact_dir + ": " + out.rows.substr(out.rows.rfind('/') + 1) +
             ", summary.json, profile_export.jsonl, profile_export_aiperf.json, profile_export_aiperf.csv");
}

/// Settings taken from the environment change results as flags do: say so on stderr.
void note_environment(const Json& config) {
  if (!config.contains("sources")) return;
  std::string from_env;
  for (const auto& [name, src] : config["sources"].items())
    if (src.get<std::string>().rfind("env ", 0) == 0)
      from_env += (from_env.empty() ? "" : ", ") + name + " " + config["options"][name].dump() + " (" +
                  src.get<std::string>() + ")";
  if (!from_env.empty()) diag::note("settings from the environment: " + from_env);
}

/// --sim: every live-only flag, and any combination the simulator cannot honour, is a usage error
/// naming the flag; the load mode is chosen as live (fixed schedule unless --request-rate or
/// --concurrency alone say otherwise).
Load check_sim(const RunOptions& o) {
  // The simulated engines count 4-byte tokens (SPEC 4.2) by construction: an engine tokenizer
  // has nothing to size there.
  if (!o.tokenizer_url.empty())
    throw Fatal(kExitUsage, "--tokenizer-url sizes prompts for a live endpoint; it cannot be used with --sim");
  for (std::string_view shown : kLiveOnlyFlags)
    if (was_typed(o, shown.substr(0, shown.find(' '))))
      throw Fatal(kExitUsage, std::string(shown) + " applies to a live endpoint; it has no meaning with --sim");
  if (o.warmup)
    throw Fatal(kExitUsage, "--warmup-request-count cannot be used with --sim: the simulator sends no warmup requests");
  if (o.dataset_type == records::DatasetType::kMultiTurn) throw Fatal(kExitUsage, kMultiTurnSim);
  const LoadFlags lf = load_flags(o);
  refuse_schedule_with_rate(lf);
  refuse_rate_shape_without_rate(lf);
  // The fixed schedule by default: the simulator reads the workload requiring timestamps then. A
  // random pool has none (its entries are drawn, not scheduled): one request at a time, as live.
  return choose_load(lf, /*workload_has_timestamps=*/o.dataset_type != records::DatasetType::kRandomPool);
}

/// The rows a run hands to its summary table (none: no table).
using RowHook = std::function<void(const std::string&)>;

/// AIPerf's console table (SPEC 7: avg, min, max, p99, p90, p50, std) of the rows the run wrote,
/// on stderr after the summary line, titled with where the times were taken.
void print_summary_table(const metrics::RequestSet& set) {
  if (set.requests.empty()) return;
  const metrics::Report rep = metrics::build_report(set);
  std::string text = "\n" + diag::program() + " | LLM Metrics";
  if (const std::string view = metrics::describe_view(set); !view.empty()) text += " | " + view;
  text += "\n" + metrics::report_table(rep, /*per_session=*/false);
  std::fflush(stdout);
  std::fputs(text.c_str(), stderr);
}

/// The simulated run (run_sim_files) with its notes on stderr; `summary` gets its JSON.
int run_simulated(const RunOptions& o, const RunOutput& out, Json& summary, const RowHook& hook) {
  const Load load = check_sim(o);
  SimOptions so = o.cluster;
  if (auto e = so.admission.validate(); !e.empty()) throw Fatal(kExitUsage, e);  // before loading
  so.schedule = o.schedule;
  so.schedule.seed = o.seed;
  so.schedule.mode = load.mode;
  so.concurrency = load.concurrency;
  so.duration_s = o.duration_s;
  so.grace_s = o.grace_period_s;
  so.router.seed = o.seed;
  so.engine.block_size = so.router.block_size;  // one block size: the router's --kv-cache-block-size
  so.on_row = hook;
  if (!o.model.empty()) so.model = o.model;
  records::WorkloadOptions wo = workload_options(o);
  wo.require_timestamps = load.mode == LoadMode::kFixedSchedule;
  std::unique_ptr<io::Output> file;
  io::Output& rows = open_rows(out, file);
  const SimSummary s = run_sim_files(o.inputs, wo, so, rows);
  rows.close();
  diag::note(sim_summary_line(s, so.workers));
  if (std::string skipped = sim_skipped_line(s); !skipped.empty()) diag::note(skipped);
  if (std::string cancelled = sim_cancelled_line(s); !cancelled.empty()) diag::note(cancelled);
  if (std::string refs = sim_reference_line(s); !refs.empty()) diag::note(refs);
  if (std::string streamed = sim_stream_line(s); !streamed.empty()) diag::note(streamed);
  summary = sim_summary_json(s, so.workers);
  return kExitOk;
}

/// The live replay's settings from the options: usage errors for what a live run cannot honour.
LiveOptions live_options(const RunOptions& o) {
  if (o.url.empty()) throw Fatal(kExitUsage, "--url is required (or --sim)");
  if (!o.cluster.references.empty())
    throw Fatal(kExitUsage,
                "--reference needs --sim (for a live run's rows: dyn-bench report --reference NAME "
                "--reference-kv-blocks N)");
  // The simulated cluster's settings mean nothing to a live endpoint: typed, they are usage
  // errors, not silently ignored (an accepted flag works).
  if (!o.cluster_typed.empty())
    throw Fatal(kExitUsage, o.cluster_typed.front() +
                                " configures the simulated cluster (--sim); a live run uses the endpoint's own "
                                "workers, router and engines");
  if (o.model.find(',') != std::string::npos)
    throw Fatal(kExitUsage, "--model " + o.model +
                                ": one model per run (AIPerf's --model-names takes a list; dyn-replay sends one name)");
  LiveOptions lo;
  auto ep = http::Endpoint::parse(o.url);
  if (!ep) throw Fatal(ep.error().exit_code, ep.error().message);
  lo.client.endpoint = *ep;
  lo.client.connect_timeout_s = o.connect_timeout_s;
  lo.client.read_timeout_s = o.request_timeout_s;
  lo.client.request_timeout_s = o.request_timeout_s;
  lo.api = o.api;
  lo.endpoint_path = o.endpoint_path;
  lo.streaming = o.streaming;
  lo.header_style = session::find_client_style(o.session_headers);
  if (!lo.header_style) throw Fatal(kExitUsage, "--session-headers: no client style '" + o.session_headers + "'");
  lo.history = o.history;
  lo.warmup_count = o.warmup;
  lo.duration_s = o.duration_s;
  lo.grace_s = o.grace_period_s;
  lo.prompt_seed = o.seed;
  lo.ignore_eos = o.ignore_eos;
  lo.max_connections = o.max_connections;
  lo.tokenizer_url = o.tokenizer_url;
  for (const auto& kv : o.extra_inputs) {
    auto e = parse_extra_input(kv);
    if (!e) throw Fatal(e.error().exit_code, e.error().message);
    lo.extra_inputs[e->first] = e->second;
  }
  for (const auto& h : o.headers) {
    auto parsed = parse_header(h);
    if (!parsed) throw Fatal(parsed.error().exit_code, parsed.error().message);
    // The style writes its headers from each row's session: a second value of the same header
    // would make every request's identity conflict (the router answers 400).
    for (const auto& w : lo.header_style->writes)
      if (http::header_name_equal(parsed->first, w.name))
        throw Fatal(kExitUsage, "--header " + parsed->first + ": --session-headers " + o.session_headers +
                                    " sends this header from each row's session; use --session-headers none to send "
                                    "your own");
    lo.extra_headers.push_back(std::move(*parsed));
  }
  return lo;
}

/// The live replay: the workload checked and loaded before anything is sent, then run_live with
/// SIGINT/SIGTERM handled; `summary` gets its JSON.
int run_endpoint(const RunOptions& o, const RunOutput& out, Json& summary, const RowHook& hook) {
  LiveOptions lo = live_options(o);
  lo.on_row = hook;
  // What the live replay cannot honour is a usage error, as in --sim, before the workload is read.
  const LoadFlags lf = load_flags(o);
  refuse_schedule_with_rate(lf);
  refuse_rate_shape_without_rate(lf);
  refuse_offsets_off_schedule(lf);
  records::WorkloadOptions wo = workload_options(o);
  require_timestamps(lf, wo);
  records::Workload w = records::load_workload(o.inputs.empty() ? std::vector<std::string>{"-"} : o.inputs, wo);
  if (!w.ok()) throw Fatal(kExitBadData, std::to_string(w.errors.size()) + " workload error(s); nothing was sent");
  if (w.rows.empty()) throw Fatal(kExitBadData, records::no_workload_rows_message(o.inputs));
  const Load load = choose_load(lf, w.has_timestamps);
  if (w.dataset_type == records::DatasetType::kMultiTurn && !was_typed(o, "--history")) {
    // AIPerf's multi_turn turns are new input (deltas_without_responses): the conversation so far
    // and the live replies go before each one.
    lo.history = History::kDelta;
    diag::note("multi_turn: each turn is sent after the conversation so far, live replies included (--history delta)");
  }
  lo.schedule = lf.schedule;
  lo.schedule.mode = load.mode;
  lo.concurrency = load.concurrency;
  if (o.model.empty()) {
    auto m = endpoint_model(lo.client);
    if (!m) throw Fatal(m.error().exit_code, m.error().message);
    lo.model = *m;
  } else {
    lo.model = o.model;
  }
  lo.progress = o.progress.value_or(isatty(STDERR_FILENO) != 0);
  std::unique_ptr<toolevents::Sender> tools;
  if (!o.tool_events_endpoint.empty()) {
    tools = std::make_unique<toolevents::Sender>(o.tool_events_endpoint);
    lo.tool_events = tools.get();
  }

  std::unique_ptr<io::Output> file;
  io::Output& rows = open_rows(out, file);
  LiveStats st;
  {
    // SIGINT/SIGTERM stop the replay without losing a row (interrupt_live); the connection
    // threads inherit the blocked mask. A second signal exits at once.
    http::SignalWatcher watcher(
        [](int sig) {
          interrupt_live(std::string("interrupted (") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                         "): sending nothing more; requests in flight are cancelled and keep their rows "
                         "(again to quit at once)");
        },
        /*exit_on_second=*/true);
    st = run_live(w, lo, rows);
  }
  rows.close();
  if (tools)
    diag::note(fmt::format("tool events: {} sent to {}{}", tools->sent(), o.tool_events_endpoint,
                           tools->dropped() ? fmt::format(", {} dropped (no peer took them)", tools->dropped()) : ""));

  diag::note(live_summary_line(st));
  for (const auto& [k, n] : st.errors_by_type) diag::note("  errors " + k + ": " + std::to_string(n));
  summary = live_summary_json(st, o.url);
  LiveVerdict v = live_verdict(st, o.url);
  if (!v.error.empty()) diag::error("", v.error);
  return v.exit_code;
}

}  // namespace

Expected<std::pair<std::string, std::string>> parse_header(const std::string& h) {
  const size_t c = h.find(':');
  if (c == std::string::npos || c == 0) return Error{"--header " + h + ": expected 'Name: value'", kExitUsage};
  std::string name = h.substr(0, c), value = h.substr(c + 1);
  value.erase(0, value.find_first_not_of(" \t"));
  // RFC 9110 5.1/5.5: a field name is a token (no spaces: "Name : v" or " Name: v" would go
  // out as a malformed or continued line), and a value holds no CR, LF or NUL.
  if (name.find_first_of(" \t\r\n") != std::string::npos ||
      value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
    return Error{"--header '" + h + "': expected 'Name: value' (no spaces in the name, no line breaks)", kExitUsage};
  return std::pair{std::move(name), std::move(value)};
}

Expected<std::pair<std::string, Json>> parse_extra_input(const std::string& kv) {
  const size_t c = kv.find(':');
  if (c == std::string::npos || c == 0) return Error{"--extra-inputs " + kv + ": expected KEY:VALUE", kExitUsage};
  const std::string v = kv.substr(c + 1);
  Json j = Json::parse(v, nullptr, false);
  return std::pair{kv.substr(0, c), j.is_discarded() ? Json(v) : std::move(j)};
}

Expected<std::string> endpoint_model(const http::ClientOptions& client) {
  http::ClientOptions o = client;
  o.read_timeout_s = std::min(o.read_timeout_s, 10.0);
  http::Connection c(o);
  auto [status, body] = c.get("/v1/models");
  if (status == 200) {
    Json j = Json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
        j["data"][0].contains("id") && j["data"][0]["id"].is_string())
      return j["data"][0]["id"].get<std::string>();
  }
  // status 0: nothing answered. That is a network failure (exit 4) saying why, not a usage error.
  if (status == 0) return Error{body, kExitIo};
  return Error{"no --model given and GET " + client.endpoint.join("/v1/models") + " answered HTTP " +
                   std::to_string(status) + " without a model id; pass --model",
               kExitUsage};
}

int run(const RunOptions& options, const RunOutput& output) {
  if (was_typed(options, "--benchmark-grace-period") && !(options.duration_s > 0))
    throw Fatal(kExitUsage, "--benchmark-grace-period applies only with --benchmark-duration (as in AIPerf)");
  RunOutput out = output;
  if (!out.artifact_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out.artifact_dir, ec);
    if (ec) throw Fatal(kExitIo, out.artifact_dir + ": cannot create directory: " + ec.message());
    if (out.rows.empty() || out.rows == "-") out.rows = out.artifact_dir + "/requests.jsonl";
  }
  std::unique_ptr<io::Output> summary_out;  // opened now: a bad --summary path fails before the run
  if (!out.summary_path.empty()) summary_out = std::make_unique<io::Output>(out.summary_path);
  note_environment(out.config);
  Json summary;
  metrics::RequestSet seen;  // the rows, for the summary table
  RowHook hook;
  if (options.summary_table.value_or(!options.sim && isatty(STDERR_FILENO) != 0))
    hook = [&seen, n = uint64_t{0}](const std::string& line) mutable {
      metrics::add_request_row(seen, Json::parse(line), "row " + std::to_string(++n));
    };
  const int rc = options.sim ? run_simulated(options, out, summary, hook) : run_endpoint(options, out, summary, hook);
  if (hook) print_summary_table(seen);
  if (!summary.is_null()) {
    summary["exit_status"] = rc;
    if (summary_out) write_record(*summary_out, out.config, summary);
    if (!out.artifact_dir.empty()) write_artifacts(out, summary);
  }
  return rc;
}

}  // namespace dyn::replay
