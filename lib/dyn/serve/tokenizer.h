// The engine's tokenizer behind --tokenizer-url as routing uses it: the ids of what the engine
// will tokenize, or nothing (the router then hashes its approximate tokens), never a failed request.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dyn/api/api.h"
#include "dyn/base/clock.h"
#include "dyn/base/json.h"

namespace dyn::serve {

/// How long a call to the engine's tokenizer may take, and how long calls are skipped after one
/// failed (a tokenizer that is down or slow then costs one request per back-off that long, not
/// every request).
struct TokenizerLimits {
  double timeout_s = 1;
  double backoff_s = 5;
};

/// --tokenizer-url for routing (issue 51.3). ids() asks the engine's POST /tokenize for what the
/// engine will tokenize (http::tokenize_request: the chat template's form with tools and template
/// options; Anthropic Messages and Responses in the chat form the engine's frontend converts them
/// to). When it cannot, routing is approximate and a request never fails for it:
/// - a body whose precise form is unavailable (a completions prompt of token ids, a Responses
///   request continuing a stored response, ...): one warning per reason;
/// - a tokenizer that refuses the first chat-form request with a 4xx (SGLang's /tokenize takes a
///   prompt only, so it cannot apply the chat template): one warning, and chat-form requests are
///   not sent to it again;
/// - unreachable, slower than the timeout, a non-200 answer or an answer of the wrong shape: one
///   warning when it starts failing (and a note when it answers again), each failure counted in
///   `errors`, and no call for limits.backoff_s after a failure.
/// Thread-safe (the relay calls it from the handler pool); the call itself holds no lock.
class EngineTokenizer {
 public:
  EngineTokenizer(std::string url, const Clock& clock, std::atomic<uint64_t>& errors, TokenizerLimits limits = {});
  /// The engine's token ids for `body` of `api` (`model` named in the call when not empty), or
  /// nullopt: hash the SPEC 4.2 tokens instead.
  std::optional<std::vector<uint32_t>> ids(api::Api api, const Json& body, const std::string& model);

 private:
  /// A call failed with `message` (HTTP `status`, 0 when none came) for a request `chat_form` or not.
  void failed(const std::string& message, int status, bool chat_form);

  const std::string url_;
  const Clock& clock_;
  std::atomic<uint64_t>& errors_;
  const TokenizerLimits limits_;
  std::mutex mu_;
  bool failing_ = false;          ///< the last call failed (warned once)
  double retry_at_ms_ = 0;        ///< no call before this (back-off)
  bool chat_accepted_ = false;    ///< a chat-form request was answered once
  bool chat_refused_ = false;     ///< the tokenizer cannot take the chat form
  std::set<std::string> warned_;  ///< reasons precise routing is unavailable, said once each
};

}  // namespace dyn::serve
