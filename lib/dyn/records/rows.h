// The rows the tools write (docs/records.md): one type and one serializer per record type, used
// by every producer, so the key order and number forms live in one place.
//   request_end:    dyn-route serve / dyn-trace capture (serve::Frontend), dyn-replay
//                   (replay::client_record), dyn-replay --sim (replay::run_sim)
//   route_decision: dyn-route decide (offline::decide), dyn-route serve --router-decision-log
//                   (serve::DecisionLog)
//   tool_start | tool_end | tool_error: dyn-route serve --tool-events-endpoint (harness events)
// A new field is one member here, one line in rows.cpp, and the producer that fills it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "dyn/base/json.h"
#include "dyn/session/normalize.h"

namespace dyn::records {

/// A row's agent_context (SPEC 1.2) as views; omitted from the row when session_id is empty.
struct ContextRef {
  std::string_view session_id, parent_session_id;  ///< parent "" = omitted
  std::optional<bool> session_final;
  const Json* compaction = nullptr;
  std::optional<int32_t> priority;  ///< SPEC 3.4, written when set
  std::optional<uint32_t> strict_priority;
  /// Views into `c`, which must outlive the row's serialization.
  static ContextRef of(const session::AgentContext& c) {
    return {c.session_id, c.parent_session_id, c.session_final, c.compaction ? &*c.compaction : nullptr,
            c.priority,   c.strict_priority};
  }
};

/// One request_end row (SPEC 5.1, docs/records.md), as views into the producer's own data: the
/// struct is filled and serialized at once, so nothing is copied. Absent optionals (and empty
/// views where noted) are omitted from the row.
struct RequestEnd {
  uint64_t event_time_unix_ms = 0;
  std::string_view event_source;  ///< "router", "client", "simulator"

  ContextRef agent_context;

  // request
  std::string_view request_id;
  std::optional<std::string_view> x_request_id;
  std::optional<std::string_view> model;
  uint64_t input_tokens = 0;
  std::optional<uint64_t> output_tokens, cached_tokens;
  uint64_t request_received_ms = 0;
  std::optional<double> ttft_ms, total_time_ms, avg_itl_ms, kv_hit_rate;
  /// Router queue depth when the request entered it (Dynamo's request.queue_depth; written for
  /// requests the router queue held).
  std::optional<uint64_t> queue_depth;
  /// request.worker.decode_worker_id: a number, or (client rows whose x-dyn-worker header was not
  /// a non-negative integer) the header's text.
  std::optional<int64_t> worker;
  std::optional<std::string_view> worker_text;
  /// request.replay {trace_block_size, input_length, input_sequence_hashes}; omitted when unset.
  struct Replay {
    uint64_t trace_block_size = 0;
    uint64_t input_length = 0;
    std::span<const uint64_t> input_sequence_hashes;
  };
  std::optional<Replay> replay;
  /// request.finish_reason_metadata: written when finish_reason is set or tool_calls is non-empty.
  struct ToolCall {
    uint64_t choice_index = 0, tool_call_index = 0;
    std::string_view id, name;  ///< "" = omitted
  };
  std::optional<std::string_view> finish_reason;
  std::span<const ToolCall> tool_calls;

  // dyn (toolkit extras)
  std::string_view status = "ok";  ///< "ok", "error", "cancelled"
  struct Failure {
    int64_t code = 0;  ///< HTTP status, 0 for transport errors
    std::string_view type, message;
  };
  std::optional<Failure> error;
  std::optional<std::string_view> warning;
  std::optional<double> ttst_ms;
  std::optional<std::span<const double>> inter_chunk_ms;
  std::optional<std::span<const uint64_t>> chunk_tokens;
  std::optional<double> request_latency_ms, schedule_lag_ms, scheduled_ms;
  std::optional<std::span<const uint64_t>> hash_ids;
  std::optional<uint64_t> block_size, turn;
  std::optional<std::string_view> binding;
  std::optional<std::string_view> rebind_reason;  ///< why a "rebound" binding moved (route::kRebindReasons)
  /// dyn.retries, dyn.migrations and dyn.attempts (router rows, issue 53): dispatches retried
  /// before the first byte, moves mid-stream, and each failed attempt. Omitted when zero/empty.
  uint64_t retries = 0, migrations = 0;
  struct Attempt {
    int64_t worker = 0;
    std::string_view stage, error;  ///< "dispatch" | "stream"; connection, timeout, http, stream_cut
    int64_t status = 0;             ///< the worker's HTTP status (0: none)
    std::string_view circuit;       ///< the worker's circuit breaker after the failure
    uint64_t tokens_sent = 0;
  };
  std::span<const Attempt> attempts;
  std::optional<double> pause_ms, queue_ms;
  /// The router queue (SPEC 3.4): time held (ms), the request's policy class, and where its
  /// priority came from ("header", "body", "session"; omitted for defaults).
  std::optional<double> router_queue_ms;
  std::optional<std::string_view> policy_class, priority_source;
  bool warmup = false;
  bool input_tokens_estimated = false, output_tokens_estimated = false;
  struct PromptSizing {
    uint64_t input_length = 0, tokenizer_tokens = 0;
  };
  std::optional<PromptSizing> prompt_sizing;
  /// Decision quality (issue 55, router and simulator rows): the cached tokens the router
  /// predicted on the chosen worker, prefill a higher-overlap eligible worker would have saved,
  /// and why the pick was not the max-overlap one ("" = it was: kv-optimal).
  struct Quality {
    uint64_t predicted_cached_tokens = 0, avoidable_prefill_tokens = 0;
    std::string_view non_max_cause;
  };
  std::optional<Quality> quality;
  /// dyn.cached_tokens_by_tier {g1, g2, g3, g4}: where request.cached_tokens came from, with KV
  /// tiers (SPEC 8.7; the simulator's and dyn-mocker's engine).
  std::optional<std::array<uint64_t, 4>> cached_tokens_by_tier;
  /// dyn.kv_hints (router rows, SPEC 6.4): each KV hint the router's --kv-policy sent for this
  /// request: its policy, action type, how it went ("request": in the body forwarded, taking
  /// effect at the request's completion; "endpoint": POST /v1/kv_hints) and the worker it went
  /// to. Omitted when empty.
  struct KvHint {
    std::string_view policy, action_type, via;
    int64_t worker = 0;
  };
  std::span<const KvHint> kv_hints;
};

/// Appends `r` as one JSON object (no newline), byte for byte what building it as an (ordered)
/// Json and dump(-1, ' ', false, replace) writes. Key order (docs/records.md, "key order is
/// fixed"): schema, event_type, event_time_unix_ms, event_source, agent_context, request {
/// request_id, x_request_id, model, input_tokens, output_tokens, cached_tokens,
/// request_received_ms, ttft_ms, total_time_ms, avg_itl_ms, kv_hit_rate, queue_depth, worker,
/// replay, finish_reason_metadata }, dyn { status, error, warning, ttst_ms, inter_chunk_ms,
/// chunk_tokens, request_latency_ms, schedule_lag_ms, scheduled_ms, hash_ids, block_size, turn,
/// binding, rebind_reason, retries, migrations, attempts, pause_ms, queue_ms, router_queue_ms,
/// policy_class, priority_source, warmup,
/// input_tokens_estimated, output_tokens_estimated, prompt_sizing, predicted_cached_tokens,
/// stale_cached_tokens (predicted - request.cached_tokens, when both are known),
/// avoidable_prefill_tokens, kv_optimal, non_max_cause, cached_tokens_by_tier, kv_hints }.
/// Strings that may carry invalid UTF-8 (headers, upstream messages) get U+FFFD, as dump's
/// replace handler does. Thread-safe.
void append_request_end(std::string& out, const RequestEnd& r);

/// One route_decision row of dyn-route decide (docs/records.md): the router's choice for a
/// request on the virtual clock, or its refusal (error set).
struct RouteDecision {
  uint64_t event_time_unix_ms = 0;  ///< arrival
  ContextRef agent_context;
  std::string_view request_id;
  std::string_view x_request_id;  ///< "" = omitted
  uint64_t input_tokens = 0;
  std::optional<uint64_t> output_tokens;
  // Placed (error unset):
  uint64_t cached_tokens = 0;
  double kv_hit_rate = 0;
  int64_t worker = 0;
  std::string_view binding;
  std::string_view rebind_reason;  ///< "" = omitted (no move)
  uint64_t request_blocks = 0;
  /// dyn.explain (--explain): one entry per worker.
  struct Candidate {
    uint64_t worker = 0;
    uint64_t overlap_blocks = 0;
    double prefill_blocks = 0, decode_blocks = 0;  ///< route::WorkerScore's (written as doubles)
    double cost = 0;
    bool eligible = true;
    uint64_t host_blocks = 0, disk_blocks = 0;  ///< lower-tier overlaps; written when not 0
    uint64_t shared_blocks = 0;                 ///< shared-pool blocks past the GPU run; likewise
  };
  bool explain = false;
  std::span<const Candidate> candidates;
  /// The decision's quality and context (issue 55; serve's decision log, decide --explain),
  /// written when set: router block size, margin to the runner-up, ties, avoidable prefill,
  /// non-max-overlap cause ("" = kv-optimal), the request's waits before placement (router queue,
  /// admission) and which attempt of the request this placement was (0 = the first).
  struct Quality {
    uint32_t block_size = 0;
    std::optional<double> margin;
    uint32_t ties = 0;
    uint64_t avoidable_prefill_tokens = 0;
    std::string_view non_max_cause;
    std::optional<double> router_queue_ms, pause_ms;
    uint64_t attempt = 0;
  };
  std::optional<Quality> quality;
  // Refused: dyn {binding "none", error {code, message}}.
  struct Refusal {
    int64_t code = 0;  ///< the Error's exit code
    std::string_view message;
  };
  std::optional<Refusal> error;
};

/// Appends `d` as one JSON object (no newline), byte for byte Json::dump() of the same row:
/// schema, event_type, event_time_unix_ms, event_source "router", agent_context, request {
/// request_id, x_request_id, input_tokens, output_tokens, [cached_tokens, kv_hit_rate, worker] },
/// dyn { binding, rebind_reason, request_blocks, [block_size, margin, ties, avoidable_prefill_tokens,
/// kv_optimal, non_max_cause, router_queue_ms, pause_ms, attempt,] explain {request_blocks,
/// workers [{worker, overlap_blocks,
/// host_blocks?, disk_blocks?, shared_blocks?, prefill_blocks, decode_blocks, cost, eligible}]} } or dyn {
/// binding "none", error {code, message} }. Thread-safe.
void append_route_decision(std::string& out, const RouteDecision& d);

/// One harness tool event (SPEC 5.1, docs/records.md): Dynamo's RequestTraceToolEventIngress
/// (lib/llm request_trace: {schema, event_type, event_time_unix_ms, session_id,
/// parent_session_id?, tool {tool_call_id, tool_class, ...}}) as the tools hold it, owning its
/// strings (it is decoded from the wire and joined before it is written).
struct ToolEvent {
  std::string event_type;  ///< event::kToolStart | kToolEnd | kToolError
  uint64_t event_time_unix_ms = 0;
  std::string session_id, parent_session_id;  ///< parent "" = omitted
  std::string tool_call_id, tool_class;       ///< tool_class: the tool's name ("Bash", "web_search")
  std::optional<std::string> status;          ///< running | succeeded | error | cancelled
  std::optional<uint64_t> started_at_unix_ms, ended_at_unix_ms;
  std::optional<double> duration_ms;
  std::optional<uint64_t> output_tokens, output_bytes;
  std::optional<std::string> tool_name_hash, error_type;
};

/// What the router joined to a harness tool event (the row's dyn object; omitted when empty).
struct ToolEventJoin {
  std::string_view request_id;  ///< the request whose response called this tool_call_id ("" = none)
  bool known_session = false;   ///< the session had sent a request through this router
};

/// Appends `e` as one row (no newline), byte for byte Json::dump() of: schema, event_type,
/// event_time_unix_ms, event_source "harness", agent_context {session_id, parent_session_id?},
/// tool {tool_call_id, tool_class, status?, started_at_unix_ms?, ended_at_unix_ms?, duration_ms?,
/// output_tokens?, output_bytes?, tool_name_hash?, error_type?}, dyn {request_id?,
/// known_session} (only with `join`). Strings from the wire get U+FFFD for invalid UTF-8.
/// Thread-safe.
void append_tool_event(std::string& out, const ToolEvent& e, const ToolEventJoin* join = nullptr);

}  // namespace dyn::records
