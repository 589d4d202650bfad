// dyn-replay as one call (SPEC 6.3): the flags' conflicts refused, the workload replayed against a
// live endpoint or through the simulated cluster, the summary said on stderr and the run recorded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dyn/api/api.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/base/named.h"
#include "dyn/http/client.h"
#include "dyn/records/workload.h"
#include "dyn/replay/live.h"
#include "dyn/replay/schedule.h"
#include "dyn/replay/sim.h"

namespace dyn::replay {

/// The APIs a live replay sends (--endpoint-type): the two whose bodies build_body writes, under
/// their names in api::kApis.
inline constexpr Named<api::Api> kEndpointTypes[] = {
    {api::Api::kChat, "chat", ""},
    {api::Api::kCompletions, "completions", ""},
};
static_assert(std::string_view(kEndpointTypes[0].name) == api::kApis[0].name &&
              std::string_view(kEndpointTypes[1].name) == api::kApis[1].name);

/// What dyn-replay is asked to do, in its flags' terms (docs/cli.md); each default is the flag's.
struct RunOptions {
  std::vector<std::string> inputs;  ///< workload files; none or "-" = stdin
  uint32_t block_size = 0;          ///< --block-size of hash_ids (0 = 512, or a Dynamo trace's own)
  bool lenient = false;             ///< --lenient: misfit hash_ids warn instead of rejecting the workload
  /// --custom-dataset-type (records::kDatasetTypes; kAuto: each input's rows say) and, for
  /// random_pool, --conversation-num (0 = not given: AIPerf's 100).
  records::DatasetType dataset_type = records::DatasetType::kAuto;
  uint64_t conversation_num = 0;

  // Load (the same meaning live and with --sim; load.h chooses the mode).
  bool fixed_schedule = false;  ///< --fixed-schedule
  uint64_t concurrency = 0;     ///< --concurrency (0 = not given)
  /// --speedup, the --fixed-schedule-* offsets, --request-rate*, --request-count; its mode is
  /// choose_load's and its seed is `seed`.
  ScheduleOptions schedule;
  double duration_s = 0;  ///< --benchmark-duration (0 = no limit)
  uint64_t seed = 0;      ///< --seed: synthetic prompts, random arrivals, the simulated router
  std::string model;      ///< --model ("" = live: the endpoint's first model; --sim: sim.model)
  bool sim = false;       ///< --sim: the simulated cluster instead of an endpoint
  /// --benchmark-grace-period: AIPerf's default 30 s (INFINITY = wait for every response); typed
  /// without --benchmark-duration it is a usage error, as in AIPerf.
  double grace_period_s = 30;

  // The live endpoint (--url and the flags only it reads).
  std::string url;
  api::Api api = LiveOptions{}.api;          ///< --endpoint-type (kEndpointTypes)
  std::string endpoint_path;                 ///< --endpoint ("" = the API's path)
  bool streaming = LiveOptions{}.streaming;  ///< --streaming / --no-streaming
  /// --session-headers: a client style of session/families.h.
  std::string session_headers = std::string(LiveOptions{}.header_style->name);
  History history = LiveOptions{}.history;                             ///< --history (kHistories)
  std::vector<std::string> headers;                                    ///< --header 'Name: value'
  std::vector<std::string> extra_inputs;                               ///< --extra-inputs KEY:VALUE
  bool ignore_eos = false;                                             ///< --ignore-eos
  uint64_t warmup = 0;                                                 ///< --warmup-request-count
  double request_timeout_s = http::ClientOptions{}.read_timeout_s;     ///< --request-timeout-seconds
  double connect_timeout_s = http::ClientOptions{}.connect_timeout_s;  ///< --connect-timeout-seconds
  uint64_t max_connections = LiveOptions{}.max_connections;            ///< --max-connections
  std::string tokenizer_url;                                           ///< --tokenizer-url
  std::string tool_events_endpoint;  ///< --tool-events-endpoint: PUSH harness tool events there (LiveOptions)
  std::optional<bool> progress;      ///< --progress / --no-progress (unset: when stderr is a terminal)
  /// --summary-table / --no-summary-table: AIPerf's console table of the run's metrics on stderr
  /// at the end (unset: for a live replay when stderr is a terminal; --sim only when asked, as the
  /// table holds every row until the end).
  std::optional<bool> summary_table;

  /// The simulated cluster (--sim): workers, engine, router, admission, epoch, --reference and the
  /// model of its records. Its load controls are set from the fields above, the engine block size
  /// from the router's (--kv-cache-block-size), the router's seed from `seed`, and its model from
  /// `model` when given.
  SimOptions cluster;

  /// The flags typed on the command line by their first long name ("--url"; the CLI layer's
  /// cli::typed_flags), and those among them that configure the simulated cluster (--workers,
  /// --reference, the engine, router and admission flags): a flag only the other mode reads is a
  /// usage error naming it, never silently ignored (docs/cli.md).
  std::vector<std::string> typed, cluster_typed;
};

/// Where a replay's results go.
struct RunOutput {
  std::string rows = "-";      ///< -o: the request_end rows ("-" = stdout)
  bool line_buffered = false;  ///< --line-buffered
  /// --summary FILE: the run record {"config", "summary"} (opened before the run, so a bad path
  /// fails at once). "" = none.
  std::string summary_path;
  /// --artifact-dir DIR (AIPerf's spelling, created when missing): the rows default to
  /// DIR/requests.jsonl, and DIR gets summary.json and AIPerf's profile_export files computed
  /// from them (metrics::write_aiperf_export). "" = none.
  std::string artifact_dir;
  /// The run's configuration (cli::run_config): recorded in both; the options it says an
  /// environment variable set are named on stderr before the run (they change results as flags
  /// do).
  Json config = Json::object();
};

/// --header 'Name: value' as (name, value), the value's leading blanks dropped. A name with
/// blanks, a value with CR, LF or NUL (RFC 9110 5.1, 5.5: they would go out as a malformed or
/// continued line) or no colon: Error (kExitUsage) quoting the flag.
Expected<std::pair<std::string, std::string>> parse_header(const std::string& header);

/// --extra-inputs KEY:VALUE as (key, value): VALUE as JSON when it parses, else as a string. No
/// colon or an empty key: Error (kExitUsage).
Expected<std::pair<std::string, Json>> parse_extra_input(const std::string& kv);

/// The model a live run names when no --model is given: the first id of GET /v1/models at the
/// endpoint (read timeout at most 10 s). Errors: nothing answered -> kExitIo with the connection
/// error; an answer without a model id -> kExitUsage asking for --model.
Expected<std::string> endpoint_model(const http::ClientOptions& client);

/// Runs dyn-replay: refuses what cannot hold (Fatal kExitUsage naming the flag: a flag of the
/// other mode, --reference live, the load-flag conflicts of load.h, a bad --header or
/// --extra-inputs, bad admission thresholds) before the workload is read; loads the workload
/// (Fatal kExitBadData when rejected or empty: nothing is sent); replays it live (run_live,
/// SIGINT/SIGTERM stop it without losing a row) or simulated (run_sim_files); writes the rows to
/// output.rows, the summary line(s) on stderr, the metrics table on stderr (summary_table), and
/// the records `output` asks for. Returns the exit
/// status: live_verdict's live, 0 simulated. I/O errors: Fatal(kExitIo) naming the file.
int run(const RunOptions& options, const RunOutput& output);

}  // namespace dyn::replay
