// Reading an API request before it is placed: identity headers, the JSON body, the request to
// send upstream and the prompt's hashes. Each step says what is wrong instead of answering.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/http/proxy.h"
#include "dyn/route/priority.h"
#include "dyn/serve/exchange.h"
#include "dyn/serve/options.h"
#include "dyn/serve/tokenizer.h"

namespace dyn::serve {

/// HTTP status for a router or identity error: Error::exit_code holds the status when it is one
/// (400 … 599); an I/O-class error (no worker) is 503; other codes are the caller's fault (400).
int http_status(const Error& e);

/// `p` as a route pattern that also matches the absolute form "http://authority" + p.
std::string absolute_or_origin(const std::string& p);
/// The origin form of a request target: "http://host:1/v1/x?q" -> "/v1/x?q" (RFC 9112 3.2.2: a
/// proxy forwards the path and query; the authority was for this hop).
std::string origin_form(const std::string& target);

/// The content types a JSON API cannot take: form and multipart bodies get 415 (the server
/// answered 413 over --max-request-bytes and 400 for an unreadable body already). False = the
/// response is set.
bool check_content_type(const http::ServerRequest& req, http::ServerResponse& res);

/// What the dispatch stage takes from the earlier stages of a request, besides the exchange.
struct Dispatch {
  http::ProxyRequest request;             ///< to the worker (build_upstream)
  bool hide_usage = false;                ///< the frontend asked for the usage chunk: not relayed
  std::optional<uint64_t> pinned_worker;  ///< x-dynamo-worker-instance-id: wins, never retried
  route::PriorityHints header_hints;      ///< x-dynamo-request-priority, -strict-priority, -meta-policy-class
};

/// A request body as the router reads it (read_body). simdjson reads it and the SPEC 4.2 text is
/// rendered from that reading; a Json tree is built only where a step needs one (a tokenizer,
/// a stream_options to edit, a body simdjson refuses or reads ambiguously). Issue 16: parsing
/// every body into a Json tree and printing it again was half the router's instructions.
struct Body {
  /// The top-level stream_options, for the include_usage rewrite (build_upstream).
  enum class Usage { kAbsent, kIncluded, kOther } usage = Usage::kAbsent;
  std::optional<std::string> rendered;  ///< render_request's text, when simdjson read the body (no hashing)
  /// The rendered text's length and its SPEC 4.1 block hashes (the partial block included), when
  /// read_body hashed it as it rendered it (PromptHashing): the text itself is never held.
  struct Hashed {
    uint64_t bytes = 0;
    std::vector<uint64_t> blocks;
  };
  std::optional<Hashed> hashed;
  std::shared_ptr<Json> json;    ///< the Json tree, when a step needed one
  route::PriorityHints hints;    ///< nvext.agent_hints.priority / strict_priority (SPEC 3.4)
  bool engine_priority = false;  ///< the client set the engine's top-level `priority` itself
};

/// Identity (SPEC 1): the session headers normalized (`opts`: SPEC 1.1's aliases) into the
/// exchange's agent_context and
/// x-request-id, and the client's worker pin into `d`. An error whose exit_code is the HTTP
/// status for conflicting or over-long session headers (session::normalize), 400 for session ids
/// or x-request-id that are not valid UTF-8 (they end up in trace rows and /v1/bindings, which
/// must stay printable JSON).
std::optional<Error> read_identity(Exchange& ex, const http::ServerRequest& req, const session::NormalizeOptions& opts,
                                   Dispatch& d);
/// How read_body hashes a prompt while it renders it: hash_prompt's block size and the seed of a
/// model's blocks (kvevents::Adapters::seed_for; null = tokens::kHashSeed).
struct PromptHashing {
  uint32_t block_size = 0;
  std::function<uint64_t(std::string_view model)> seed;
};

/// The JSON body (`need_tree`: a Json tree is wanted, for the tokenizer). With `hashing`, a body
/// simdjson reads is rendered straight into its block hashes (Body::hashed), where the simdjson
/// reading lies, instead of into a text (Body::rendered). An error (400) when
/// empty, nested deeper than kMaxJsonDepth, malformed (the byte offset only: the parser's
/// message quotes body bytes), not an object, or when nvext.agent_hints.priority is not a
/// 32-bit integer or strict_priority not a 32-bit unsigned one (Dynamo rejects them too). Notes the request's model and
/// whether it streams in the exchange.
Expected<Body> read_body(Exchange& ex, const std::string& body, bool need_tree, const PromptHashing* hashing = nullptr);
/// The request to the worker, into `d`: the origin-form target (RFC 9112 3.2.2), the client's
/// headers and its body (shared with `req`, never copied); a chat/completions stream that does not ask for usage gets
/// stream_options.include_usage added to `body` (for the trace's token counts) and the usage
/// chunk hidden from the client.
void build_upstream(const Exchange& ex, Body& body, const std::shared_ptr<const http::ServerRequest>& req, Dispatch& d);
/// The resolved `priority` (SPEC 3.4, Dynamo's scale) into the body sent to the worker as its
/// top-level `priority`, negated for a lower-first engine (clamped to i32, the engines' type), spliced
/// in beside build_upstream's stream_options (the body is not copied). Nothing for kOff, a priority
/// of 0 (every engine's default), or a body whose client set `priority` itself (it spoke to the
/// engine directly; two values would be ambiguous).
void forward_priority(const Body& body, int32_t priority, WorkerPriority polarity, Dispatch& d);
/// Prompt hashing: the engine's token ids from `tokenizer` (--tokenizer-url; null = none, or
/// when it has none for this body: SPEC 4.2 tokens of the rendered request) and SPEC 4.1
/// sequence hashes at `block_size` from `seed` (kvevents::Adapters::seed_for the model: a LoRA
/// adapter's blocks hash apart), the trailing partial block included (routing uses the complete
/// blocks only); read_body's hashes (Body::hashed) when it made them. With a tokenizer, `body`
/// holds a Json tree (read_body's need_tree).
void hash_prompt(Exchange& ex, const Body& body, EngineTokenizer* tokenizer, uint32_t block_size, uint64_t seed);

}  // namespace dyn::serve
