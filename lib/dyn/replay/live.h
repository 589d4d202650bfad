// Live replay against an OpenAI-compatible endpoint: plan -> timed dispatch over a keep-alive
// connection pool -> one request_end row per request (SPEC 6.3, 7; docs/records.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dyn/api/api.h"
#include "dyn/base/json.h"
#include "dyn/base/named.h"
#include "dyn/http/client.h"
#include "dyn/io/output.h"
#include "dyn/replay/schedule.h"
#include "dyn/replay/session.h"
#include "dyn/records/workload.h"
#include "dyn/toolevents/toolevents.h"

namespace dyn::replay {

/// cumulative: a row is the whole prompt (Mooncake traces). delta: a row is the new input of its
/// turn; earlier prompts and the live replies are threaded in as conversation history.
enum class History { kCumulative, kDelta };
/// Every history mode (--history): the one list of names its choices, --help and parser use.
inline constexpr Named<History> kHistories[] = {
    {History::kCumulative, "cumulative", "a row is the whole prompt"},
    {History::kDelta, "delta", "rows are new input, earlier turns and live replies are threaded in"},
};

struct LiveOptions {
  http::ClientOptions client;
  /// The API of the requests (--endpoint-type): chat or completions, the two whose bodies
  /// build_body writes.
  api::Api api = api::Api::kChat;
  std::string endpoint_path;  ///< override of the request path ("" = the API's, api::api_path)
  bool streaming = true;
  std::string model;  ///< must be set (the tool asks /v1/models when the user gave none)
  /// How session identity is sent (--session-headers; never null).
  const session::ClientStyle* header_style = session::find_client_style("dynamo");
  History history = History::kCumulative;
  ScheduleOptions schedule;
  uint64_t concurrency = 0;            ///< cap on requests in flight (0 = none, except the pool size)
  uint64_t warmup_count = 0;           ///< warmup requests before the run (rows flagged dyn.warmup)
  double duration_s = 0;               ///< send no request after this long (0 = no limit; AIPerf)
  uint64_t prompt_seed = 0;            ///< SPEC 4.3 block text seed
  bool ignore_eos = false;             ///< send ignore_eos and min_tokens = output_length
  Json extra_inputs = Json::object();  ///< merged into every body
  http::HeaderList extra_headers;      ///< sent with every request
  size_t max_connections = 4096;       ///< worker threads / connections at most
  bool progress = false;               ///< progress line on stderr
  double dispatch_lead_ms = 2;         ///< hand a request to its worker this early to build it
  /// --benchmark-grace-period (AIPerf's default 30 s; INFINITY = wait for every response): how
  /// long after duration_s requests in flight may still finish; then they are cancelled, and
  /// their rows say cancelled (LiveStats::cancelled).
  double grace_s = 30;
  /// --tokenizer-url: engine tokenizer base URL (POST URL/tokenize); synthetic prompts are sized
  /// to input_length of its tokens before the run (size_prompt). "" = 4 bytes per token (SPEC 4.3).
  std::string tokenizer_url;
  /// Unit tests' seam: what each connection thread sends with instead of an http::Connection to
  /// client.endpoint (null = the real connection). Lets a test see the exact order in which
  /// requests are handed over (issue 21.6) without a server's arrival order in between.
  http::TransportFactory transport;
  /// Called with each measured (not warmup) request_end row as it is written, under the run's
  /// lock (dyn-replay's summary table); none = not.
  std::function<void(const std::string&)> on_row;
  /// --tool-events-endpoint (issue 49): the harness's tool events for the tool waits replayed
  /// (null = none). A turn that waits `tool_wait_ms` after its session's previous turn is a tool
  /// call: tool_start when that turn's reply ends, tool_end (status succeeded, with
  /// started_at_unix_ms, ended_at_unix_ms, duration_ms) when the wait is over and the turn is
  /// sent; tool_call_id "<previous turn's request id>:tool", tool_class "unknown" (workloads
  /// carry no tool names). Warmup requests send none.
  toolevents::Sender* tool_events = nullptr;
};

/// A synthetic prompt sized with the engine's tokenizer (size_prompt).
struct SizedPrompt {
  std::string text;           ///< the prompt text (a prefix of the SPEC 4.3 synthetic text, or longer)
  std::vector<uint32_t> ids;  ///< the tokenizer's ids of the sized request (its prompt_tokens)
  uint32_t rounds = 0;        ///< /tokenize calls made
  bool exact = false;         ///< ids.size() == the row's input_length
};

/// Rounds of size_prompt at most (one POST /tokenize each).
inline constexpr uint32_t kSizingRounds = 16;

/// Sizes the synthetic prompt of `row` (no text_input) so that the row's own request (build_body
/// with no history: in --history delta the new user turn as a request alone, since the live
/// replies are not known before the run) is exactly row.input_length tokens of the tokenizer at
/// o.tokenizer_url. The text is the SPEC 4.3 synthetic text (seed o.prompt_seed) cut to n bytes,
/// its filler blocks continuing it when n > 4 * input_length, so block-sharing rows still share
/// prefixes; n is searched with the counts (secant steps inside a bracket), at most
/// kSizingRounds calls. When no n gives the exact count (a tokenizer whose count jumps by more
/// than 1 per byte there, or too few rounds), the closest count found is returned with exact =
/// false. A failed /tokenize call is the Error (message naming the URL; kExitIo unreachable or
/// non-200, kExitBadData a malformed answer).
Expected<SizedPrompt> size_prompt(const LiveOptions& o, const records::WorkloadRow& row, uint32_t block_size);

/// Counters of a finished run (stderr summary; exit status).
struct LiveStats {
  uint64_t planned = 0, sent = 0, ok = 0, errors = 0, not_sent = 0, warmup = 0;
  std::map<std::string, uint64_t> errors_by_type;  ///< "code type" -> count
  std::vector<double> lag_ms;                      ///< schedule lag per measured request
  double duration_ms = 0;                          ///< first send to last end, cancelled requests left out
  bool all_transport_errors = false;               ///< every request failed without a response
  uint64_t cancelled = 0;                          ///< sent, then cancelled (interrupt_live, grace period)
  bool interrupted = false;                        ///< interrupt_live() stopped the run
};

/// Builds the JSON body of a request (SPEC 6.3): chat `messages` (history + user prompt) or a
/// completions `prompt`; model, stream (+ stream_options.include_usage), max_tokens and
/// max_completion_tokens (chat) = output_length, ignore_eos/min_tokens when asked, then
/// extra_inputs. `history` is the alternating user/assistant messages before this turn.
Json build_body(const LiveOptions& opts, const std::string& prompt, std::optional<uint64_t> output_length,
                const std::vector<std::pair<std::string, std::string>>& history);

/// A workload row's `priority` into `body` as nvext.agent_hints.priority (SPEC 3.4: where
/// harnesses put it, as --sim reads it), clamped to i32 as the router's resolver clamps; an
/// nvext or agent_hints that --extra-inputs made something other than an object is replaced.
void add_priority(Json& body, int64_t priority);

/// What the record needs besides the HTTP result.
struct RecordContext {
  const PlanItem* item = nullptr;
  const records::WorkloadRow* row = nullptr;
  std::string model;
  uint32_t block_size = records::kMooncakeBlockSize;
  uint64_t input_length = 0;              ///< replay.input_length (tokens of the hashed prompt)
  std::vector<uint64_t> sequence_hashes;  ///< of the prompt (SPEC 4.1, trailing partial block)
  uint64_t input_tokens_estimate = 0;     ///< SPEC 4.2 count of the rendered request (tokenizer count when sized)
  const SizedPrompt* sized = nullptr;     ///< the prompt sized by --tokenizer-url, if any
  double scheduled_ms = 0;                ///< offset from run start
  double lag_ms = 0;
  double unix_at_mono0 = 0, mono0 = 0;  ///< maps clock readings to unix ms
  bool warmup = false;
};

/// The request_end row of one request, event_source "client" (docs/records.md). Metrics per
/// SPEC 7 from the token-chunk stamps: TTFT, TTST, request latency (last token chunk), ITL =
/// (latency - TTFT) / (OSL - 1) when OSL >= 2, inter-chunk gaps. Tokens from usage, else
/// estimated (SPEC 4.2; dyn.output_tokens_estimated). Worker from x-dyn-worker. Errors under
/// dyn.error, and then no latency metrics are written. Times rounded to microseconds.
/// Returns the row's JSON text without newline (records::append_request_end, the one writer).
std::string client_record(const RecordContext& ctx, const http::HttpResult& res);

/// Runs the whole replay and writes rows to `out` as requests end (completion order).
/// Send order (issue 21.6): requests are handed to their connections in order of scheduled
/// time, requests scheduled at the same instant (equal timestamps, also after --speedup, or all
/// at 0 in concurrency mode) in file order, whatever order the connection threads wake in; each
/// one's send time (request_received_ms, dyn.scheduled_ms + dyn.schedule_lag_ms) is stamped in
/// that order. Only a later turn that becomes ready after a request with a later time was
/// already handed over is sent out of that order (it is late by then).
/// Validation errors in the plan are Fatal(kExitBadData) before anything is sent.
/// Thread-safe internally; call once per workload.
LiveStats run_live(const records::Workload& workload, const LiveOptions& options, io::Output& out);

/// Stops the replay in progress, and any later run_live in this process (dyn-replay calls it on
/// SIGINT/SIGTERM, from its signal-watching thread; not async-signal-safe): notes `why` on stderr,
/// then nothing more is sent, requests in flight are cancelled (http::Connection::cancel) and
/// still get their row, with dyn.status "cancelled" and what had arrived, so an interrupted replay
/// loses no row; the unsent rest is counted in LiveStats::not_sent. The note is written under the
/// run's lock: diagnostics flush standard output first, and rows are written to it under that
/// lock by the connection threads (TSan found the race when the watcher noted on its own).
/// Thread-safe, idempotent.
void interrupt_live(const std::string& why);

}  // namespace dyn::replay
