// The wire shapes of the mock engine (dyn-mocker): parsing OpenAI chat/completions, Anthropic
// messages and OpenAI Responses requests into engine requests, scripted replies, and the
// streaming and non-streaming response bodies real clients and agent CLIs accept.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dyn/api/api.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"

namespace dyn::engine {

using api::Api;  // the one API table (dyn/api)

/// A parsed request. Token counts follow SPEC 4.2 (render_request, 4 bytes per token).
struct MockRequest {
  Api api = Api::kChat;
  std::string model;
  bool stream = false;
  bool include_usage = false;  ///< chat/completions stream_options.include_usage
  uint64_t prompt_tokens = 0;
  std::vector<uint64_t> block_hashes;  ///< sequence hashes of full blocks at the engine size
  std::vector<uint32_t> tokens;        ///< the prompt's token ids (SPEC 4.2), for KV events
  uint64_t max_tokens = 0;             ///< output limit (request, else the server default)
  uint64_t min_tokens = 0;
  bool ignore_eos = false;
  int64_t priority = 0;        ///< the body's `priority` (vLLM's and SGLang's request field; SPEC 8)
  std::string last_user_text;  ///< for --replies matching
  Json tools;                  ///< the request's tools (Responses namespaces)
  // Conversation facts for --replies conditions (ReplyScript::choose):
  std::vector<std::string> tool_names;  ///< offered tools; Responses namespaces and their functions
  bool first_turn = true;               ///< no assistant turn (message, tool call) in the history yet
  std::string after_tool;               ///< the request ends with the result of a call to this tool
  std::string last_tool_output;         ///< that result's text ("" when after_tool is empty)
  /// Output tokens the request continues (a migrated stream, Dynamo --migration-limit): the
  /// pieces of the final assistant message's text when the request continues it (chat with
  /// vLLM's "continue_final_message": true; Anthropic messages, whose final assistant message
  /// is a prefill). The unscripted filler goes on from that position, so a generation moved to
  /// another worker reads as one (issue 53).
  uint64_t continued_tokens = 0;
};

/// Parses and validates a request body. Limits: max_completion_tokens > max_tokens >
/// max_output_tokens (Responses) > `default_max_tokens`. Errors (400 with an OpenAI-style
/// body): not an object, missing/empty messages, input or prompt, non-integer or zero token
/// limits, min_tokens > max_tokens, bad stream flag, a `priority` that is not a 32-bit integer.
Expected<MockRequest> parse_mock_request(Api api, const Json& body, uint32_t block_size, uint64_t default_max_tokens);

/// A scripted assistant reply: text, or a tool call (name + JSON arguments as a string), with
/// the conditions that select it (all optional; a row with none is an unconditioned row).
struct Reply {
  bool tool_call = false;
  std::string text;                ///< text reply
  std::string name;                ///< tool name
  std::string arguments;           ///< compact JSON; may hold "${result.PATH}" placeholders
  std::string match;               ///< chosen when this is a substring of the last user message
  std::string offered;             ///< ... and the request offers a tool of this name
  std::optional<bool> first_turn;  ///< ... and the history has (false) / has no (true) assistant turn
  std::string after_tool;          ///< ... and the request ends with the result of this tool
  bool conditioned() const { return !match.empty() || !offered.empty() || first_turn || !after_tool.empty(); }
  bool holds(const MockRequest& req) const;
};

/// --replies FILE: JSONL rows `{"text": "..."}` or `{"tool_call": {"name": N, "arguments":
/// {...}}}`, optionally with conditions: `"match": "substring"` (of the last user message or
/// tool output), `"offered": "tool"` (the request offers that tool), `"first_turn": bool`
/// (whether the history has no assistant turn yet), `"after_tool": "tool"` (the request ends
/// with the result of a call to that tool). These script an agent CLI's subagent flow: the
/// root's first turn (offered spawn tool, first_turn) calls the spawn tool, the subagent (not
/// offered it) and the root after the tool result get text.
/// choose(): the first not-yet-used conditioned row whose conditions all hold; else the next
/// unconditioned row in file order; once those are used up the last unconditioned row repeats
/// (so an agent loop ends on text). A tool call's argument string values of the form
/// "${result.PATH}" are replaced by the value at dotted PATH in the JSON of the last tool output
/// (Codex's wait_agent needs the agent_id spawn_agent returned); unresolvable ones stay as they
/// are. Thread-safe.
class ReplyScript {
 public:
  /// Errors name file:line (bad JSON, neither text nor tool_call, arguments not an object,
  /// conditions of the wrong type).
  static Expected<ReplyScript> load(const std::string& path);
  static Expected<Reply> parse_row(const Json& row);
  std::optional<Reply> choose(const MockRequest& req);
  /// Matching on the last user text alone (a request with no other facts).
  std::optional<Reply> choose(const std::string& last_user_text);
  size_t size() const { return rows_.size(); }
  ReplyScript() = default;
  ReplyScript(ReplyScript&& o) noexcept : rows_(std::move(o.rows_)), used_(std::move(o.used_)) {}

 private:
  std::vector<Reply> rows_;
  std::vector<bool> used_;
  size_t next_unmatched_ = 0;
  std::mutex mu_;
};

/// What the response will say, fixed before the engine runs: `pieces` are the output tokens'
/// text (at most 4 bytes each, cut at UTF-8 boundaries), one per engine token.
struct ReplyPlan {
  bool tool_call = false;
  std::string name;
  std::vector<std::string> pieces;
  /// Chat/completions terms: stop, length (the output reached max_tokens), tool_calls. Anthropic
  /// says end_turn / max_tokens / tool_use; Responses says status completed, or incomplete with
  /// incomplete_details.reason max_output_tokens.
  std::string finish_reason = "stop";
  uint64_t tokens() const { return pieces.size(); }
};

/// Output length: scripted text = its tokens, at least min_tokens (padded with filler text),
/// max_tokens when ignore_eos, and never above max_tokens; without a script the deterministic
/// filler text runs to max_tokens. A tool call's arguments are never padded. At least one token.
/// Finish reason (SPEC 8, as vLLM decides it): "length" when the output reaches max_tokens (the
/// limit cut the reply: unscripted filler, ignore_eos, a longer script), else "tool_calls" for a
/// tool call and "stop" for text.
ReplyPlan plan_reply(const MockRequest& req, const std::optional<Reply>& scripted);

/// Deterministic filler text of `tokens` pieces (4 bytes each).
std::vector<std::string> filler_pieces(uint64_t tokens, uint64_t offset = 0);

/// Builds the bytes of one response. `id_seq` makes ids unique and deterministic per server;
/// `created` is the unix time in seconds.
class ResponseWriter {
 public:
  ResponseWriter(const MockRequest& req, const ReplyPlan& plan, uint64_t id_seq, uint64_t created);
  /// SSE events sent as soon as the request is accepted: the chat role chunk, Anthropic's
  /// message_start, Responses' response.created and response.in_progress. Nothing that names
  /// the reply's content (a tool call's name, an output item) goes here: an engine knows it only
  /// once prefill has produced the first token, and clients time the first token from it.
  std::string stream_start();
  /// SSE events carrying output tokens [from, to) (one event per token). The first call with
  /// tokens first opens the output item: the chat tool-call header (id, name), Anthropic's
  /// content_block_start, Responses' output_item.added (and content_part.added for text), so
  /// a tool call's first token comes after prefill like any other (issue 18).
  std::string stream_tokens(uint64_t from, uint64_t to);
  /// Closing events: finish, usage (chat/completions when include_usage), [DONE] or
  /// message_stop / response.completed (response.incomplete when max_output_tokens cut it).
  std::string stream_end(uint64_t cached_tokens);
  /// Whole non-streaming body.
  Json full_body(uint64_t cached_tokens) const;
  /// With KV tiers (SPEC 8.7): the usage object also says where the cached tokens came from,
  /// usage.dyn.cached_tokens_by_tier {g1, g2, g3, g4} (g1 = cached_tokens minus the others).
  void set_tier_tokens(uint64_t g2, uint64_t g3, uint64_t g4) { tiers_ = {g2, g3, g4}; }

 private:
  Json usage_json(uint64_t cached_tokens) const;
  Json chat_chunk(Json delta, const Json& finish) const;
  std::string text() const;
  std::string event(const char* name, const Json& data);
  std::string namespace_of(const std::string& name) const;
  std::string open_item();  // the output item's opening events, once

  const MockRequest& req_;
  const ReplyPlan& plan_;
  std::string id_, item_id_, call_id_;
  uint64_t created_;
  uint64_t seq_ = 0;                              // Responses sequence_number
  bool opened_ = false;                           // open_item() done
  std::optional<std::array<uint64_t, 3>> tiers_;  // set_tier_tokens()
};

}  // namespace dyn::engine
