// Request migration (Dynamo's --migration-limit, issue 53): what a stream has sent to its client,
// the continuation request for another worker, and the tap that splices the continuation's
// events into the client's one stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dyn/api/api.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/http/proxy.h"

namespace dyn::serve {

class ResponseTap;

/// What a streamed response has sent to its client so far, kept (by ResponseTap, only when
/// migration is on) so the generation can continue elsewhere from exactly there.
struct StreamLog {
  std::string text;     ///< generated text sent (chat delta.content of choice 0; Anthropic text deltas)
  uint64_t tokens = 0;  ///< content events sent: one engine token each (vLLM and dyn-mocker stream so)
  /// False once something was sent that text cannot continue: a tool call, reasoning, another
  /// choice (n > 1), a non-text content block. `why_not` says what.
  bool continuable = true;
  std::string why_not;
  /// Chat: the first chunk's id, created and model (a continuation's chunks are given them).
  std::string id, model;
  std::optional<uint64_t> created;
  /// Anthropic: content blocks started so far, and the index of the open text block (-1: none).
  int blocks_started = 0;
  int open_block = -1;
  void refuse(std::string why) {
    if (continuable) why_not = std::move(why);
    continuable = false;
  }
};

/// True for the APIs whose streams migrate: OpenAI chat completions and Anthropic messages
/// (completions and Responses streams are cut as without migration; man dyn-route).
bool migrates(api::Api api);

/// The request that continues `upstream_body` (the request as sent to the first worker) after
/// `log`: chat gets an assistant message holding the text sent with vLLM's
/// "continue_final_message": true and "add_generation_prompt": false (appended to the client's
/// own final assistant message when it had one); Anthropic messages gets the text as the final
/// assistant message (its native prefill); the output limit (max_tokens, max_completion_tokens)
/// is lowered by the tokens sent. Errors: a body that is not a JSON object, content that cannot
/// be extended (a final assistant message whose content is not text), no output budget left.
Expected<std::string> continuation_body(api::Api api, const std::string& upstream_body, const StreamLog& log);

/// The tap of a continuation call: reads its SSE events, drops what the client already has (the
/// chat role chunk; Anthropic's message_start, ping and the start of the block being continued),
/// renumbers Anthropic content blocks after the ones the client saw, gives chat chunks the first
/// stream's id, created and model, and makes the final usage count the whole generation (prompt
/// = the continuation's minus the tokens sent, completion = tokens sent + the continuation's);
/// then hands the events, as the client's stream, to the exchange's ResponseTap (its facts and
/// its hiding of the usage chunk the frontend asked for). `on_first_token` runs at the
/// continuation's first content event (the new placement's prefill is done).
class ContinuationTap : public http::StreamTap {
 public:
  ContinuationTap(api::Api api, std::shared_ptr<ResponseTap> client, const StreamLog& log,
                  std::function<void()> on_first_token);
  void on_data(std::string_view data, double arrival_ms, std::string& out) override;
  void on_end(double now_ms, std::string& out) override;

 private:
  /// One complete event of the continuation (`raw` with its blank line), appended to `events` in
  /// the client's shape, or dropped.
  void event(std::string_view raw, std::string_view name, std::string_view data, std::string& events);
  void chat_event(Json& j, std::string& events);
  void messages_event(const std::string& name, Json& j, std::string& events);
  /// The usage object `u` (OpenAI or Anthropic member names) counting the whole generation.
  void fix_usage(Json& u) const;

  api::Api api_;
  std::shared_ptr<ResponseTap> client_;
  const uint64_t sent_tokens_;
  const std::string id_, model_;
  const std::optional<uint64_t> created_;
  const int block_base_;       ///< client index of the continuation's block 0
  const bool continue_block_;  ///< the continuation's block 0 extends the client's open block
  std::function<void()> on_first_token_;
  std::string pending_;
};

}  // namespace dyn::serve
