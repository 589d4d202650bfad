// OpenAI-style response interpretation: streaming chunks (chat and completions) or a whole JSON
// body, turned into token arrival stamps, usage, finish reason and tool calls (SPEC 6.3, 7).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dyn/http/sse.h"

namespace dyn::http {

/// A tool call announced in the response (first delta that names it).
struct ToolCallInfo {
  uint64_t choice_index = 0, tool_call_index = 0;
  std::string id, name;
};

/// What one response carried. Times are the caller's clock readings (ms).
struct ResponseSummary {
  /// Arrival stamps of the chunks that carried output: non-empty `content` or reasoning
  /// (`reasoning_content` / `reasoning`), or tool-call name/argument text (an agent's tool call
  /// is generated tokens too). Role-only, finish-only and usage-only chunks are not here (SPEC 7).
  std::vector<double> token_chunk_ms;
  /// Tokens each of those chunks carried, from per-chunk cumulative usage (vLLM's
  /// stream_options.continuous_usage_stats): same length as token_chunk_ms when every output
  /// chunk had usage, else empty (the per-token ITL is then an estimate; issue 21.4).
  std::vector<uint64_t> chunk_tokens;
  std::string text;         ///< output text (content, reasoning, tool-call text) when kept
  std::string content;      ///< assistant `content` only (for threading history) when kept
  uint64_t text_bytes = 0;  ///< bytes of output text, kept or not
  std::optional<uint64_t> prompt_tokens, completion_tokens, cached_tokens;  ///< from `usage`
  /// usage.dyn.cached_tokens_by_tier {g1, g2, g3, g4} (dyn-mocker with KV tiers, SPEC 8.7): where
  /// cached_tokens came from; absent unless all four are counts.
  std::optional<std::array<uint64_t, 4>> cached_tokens_by_tier;
  std::string finish_reason;  ///< last non-null finish_reason of choice 0 (or any choice)
  std::vector<ToolCallInfo> tool_calls;
  bool done = false;              ///< `[DONE]` seen
  uint64_t events = 0;            ///< SSE events seen (including [DONE])
  uint64_t parse_errors = 0;      ///< data payloads that were not JSON
  std::string first_parse_error;  ///< what the first one was
  bool stream_error = false;      ///< the server sent an error object in the stream / body
  std::string error_type, error_message;
  double last_event_ms = 0;  ///< stamp of the last event (any)
};

/// Consumes SSE events of one OpenAI streaming response (chat.completion.chunk or
/// text_completion chunks). Handles `choices: []` usage chunks, `"usage": null`, an in-stream
/// `{"error": ...}` object, `[DONE]`. Never indexes a missing choice. Not thread-safe.
class OpenAiStream {
 public:
  /// keep_text: store output text (history threading, token estimates need only text_bytes).
  explicit OpenAiStream(bool keep_text) : keep_text_(keep_text) {}
  void on_event(const SseEvent& ev);
  /// Parses a whole non-streaming JSON body (chat.completion or text_completion) received at
  /// `at_ms`: one token chunk stamped `at_ms` when it has output.
  void on_body(std::string_view body, double at_ms);
  ResponseSummary& summary() { return s_; }

 private:
  void on_json_chunk(std::string_view data, double t, bool whole_body);
  bool keep_text_;
  ResponseSummary s_;
  bool chunk_usage_ok_ = true;     ///< every output chunk so far carried usage
  uint64_t chunk_usage_prev_ = 0;  ///< completion_tokens at the previous output chunk
};

}  // namespace dyn::http
