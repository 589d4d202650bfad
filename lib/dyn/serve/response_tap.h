// Observes a proxied response (SSE or JSON) for tracing: token timings, usage, finish reason and
// tool calls for the four APIs the frontend serves, and hides the usage chunk it asked for.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dyn/api/api.h"
#include "dyn/base/json.h"
#include "dyn/http/proxy.h"
#include "dyn/serve/migration.h"

namespace dyn::serve {

// The API of a request and its path and name: the one API table (dyn/api).
using api::Api;
using api::api_for_path;
using api::api_name;

/// One tool call of the response (SPEC 5.1 finish_reason_metadata.tool_calls).
struct ToolCall {
  uint64_t choice_index = 0;
  uint64_t tool_call_index = 0;
  std::string id;
  std::string name;
};

/// What the tap learned about a response. Times are Clock::now_ms() readings; optional values
/// are unset when the response did not say.
struct ResponseFacts {
  int status = 0;
  bool event_stream = false;
  std::optional<double> first_content_ms, second_content_ms, last_content_ms;
  std::vector<double> inter_chunk_ms;  ///< gaps between consecutive content chunks
  /// Tokens per content chunk from per-chunk cumulative usage (chat/completions with vLLM's
  /// continuous_usage_stats); one per content chunk, or empty when any chunk lacked usage.
  std::vector<uint64_t> chunk_tokens;
  uint64_t content_chunks = 0;
  uint64_t content_bytes = 0;  ///< UTF-8 bytes of generated text (for the estimate)
  std::optional<uint64_t> input_tokens, output_tokens, cached_tokens;  ///< from `usage`
  std::optional<std::string> finish_reason;
  std::vector<ToolCall> tool_calls;
  std::string model;                      ///< the response's model, "" when absent
  bool error_event = false;               ///< the stream (or 2xx body) carried an error
  std::string error_type, error_message;  ///< the upstream's own type and message of that error
  bool terminal_event = false;            ///< the API's end event: OpenAI `[DONE]`, Anthropic
                                          ///< `message_stop`, Responses `response.completed`
                                          ///< (or `.incomplete` / `.failed`)
  uint64_t events = 0;                    ///< SSE events seen
  uint64_t dropped_events = 0;            ///< usage-only chunks hidden from the client
};

/// How a 2xx event stream ended, by the rule of issue 21 item 2 (the same as dyn-replay's):
/// complete when the API's terminal event came; a finish reason without the terminal event is
/// still a success but carries a warning; neither is an incomplete stream (an error of type
/// "stream_incomplete", never counted as a success).
struct StreamEnd {
  bool complete = true;
  std::string warning;  ///< "" or why the success is doubtful
  std::string message;  ///< for an incomplete stream: what was missing
};
/// Applies that rule to `f` (a non-stream or non-2xx response is always "complete").
StreamEnd stream_end(Api api, const ResponseFacts& f);

/// StreamTap for the frontend. SSE bodies are split into events across arbitrary read
/// boundaries (an event cut mid-JSON or mid-UTF-8 is held until complete, case 01) and relayed
/// event by event; JSON bodies are relayed unchanged and parsed at the end.
/// Content chunks (SPEC 7): chat `delta.content`, `delta.reasoning_content`/`reasoning`,
/// `delta.tool_calls`; completions `text`; Anthropic `content_block_delta` text/thinking/
/// partial_json; Responses `*.delta` events of output text, reasoning and function-call arguments.
/// Role-only, usage-only (`choices: []`) and `[DONE]` events are not tokens (case 03).
/// With `hide_usage_chunk` (the frontend added stream_options.include_usage for its own
/// accounting) a chat/completions event with empty `choices` and a usage object is not relayed.
/// `"usage": null` counts as absent. Usage counts are cumulative and never go down: a later
/// `message_delta` with `input_tokens: 0` (or none) keeps `message_start`'s count (case 27). An
/// error inside a 200 stream (Anthropic `event: error`, an OpenAI `{"error": ...}` chunk, a
/// Responses `error` / `response.failed`) keeps the upstream's type and message. Not thread-safe (cpp-httplib calls it
/// from one thread).
class ResponseTap : public http::StreamTap {
 public:
  ResponseTap(Api api, bool hide_usage_chunk) : api_(api), hide_usage_(hide_usage_chunk) {}
  /// Called once, on the relaying thread, at the first content chunk (e.g. to tell the router
  /// that prefill is done).
  void set_on_first_token(std::function<void()> f) { on_first_token_ = std::move(f); }
  /// Keeps in `log` what the relayed events give the client (request migration; null = nothing
  /// kept, the default: no cost per chunk beyond one test).
  void set_log(StreamLog* log) { log_ = log; }
  /// Forgets the bytes of an event cut midway (a migrated stream: the client never sees them).
  void drop_partial() { pending_.clear(); }

  void on_response(int status, const httplib::Headers& headers, double arrival_ms) override;
  void on_data(std::string_view data, double arrival_ms, std::string& out) override;
  void on_end(double now_ms, std::string& out) override;

  const ResponseFacts& facts() const { return facts_; }

  /// Feeds one complete JSON response body (non-streaming) to the fact collector; public for tests.
  void observe_body(const Json& body);

 private:
  /// Handles one complete SSE event; returns false to drop it from the relayed bytes.
  bool on_event(std::string_view event_name, std::string_view data, double t);
  /// The Anthropic messages and OpenAI Responses readings of an event's JSON object `j` (a
  /// simdjson::dom::element), apart from the chat/completions reading that most streams take.
  template <class V>
  void on_messages_event(const V& j, double t);
  template <class V>
  void on_responses_event(const V& j, double t);
  void content(double t, uint64_t bytes);
  /// `V` is Json (whole bodies) or simdjson::dom::element (each SSE event, parsed without a
  /// tree of allocations: issue 16 found per-chunk nlohmann parsing among the proxy's top costs).
  template <class V>
  void usage(const V& u);
  /// Records the first upstream error: an error object ({type|code, message}) or a string.
  template <class V>
  void note_error(const V& e);
  ToolCall& tool_call(uint64_t choice, uint64_t index);
  /// The StreamLog side of a chat event that carried content (choices: its `choices` array).
  template <class V>
  void log_chat(const V& j, const V& choices);

  Api api_;
  bool hide_usage_;
  std::function<void()> on_first_token_;
  StreamLog* log_ = nullptr;
  ResponseFacts facts_;
  std::string pending_;            ///< bytes of an incomplete SSE event, or the JSON body so far
  bool chunk_usage_ok_ = true;     ///< every content chunk so far carried usage
  uint64_t chunk_usage_prev_ = 0;  ///< completion_tokens at the previous content chunk
};

}  // namespace dyn::serve
