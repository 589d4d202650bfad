// --tokenizer-url for routing: the engine's ids within a time limit, else approximate routing
// with one warning (see tokenizer.h).
#include "dyn/serve/tokenizer.h"

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/http/tokenize.h"

namespace dyn::serve {

EngineTokenizer::EngineTokenizer(std::string url, const Clock& clock, std::atomic<uint64_t>& errors,
                                 TokenizerLimits limits)
    : url_(std::move(url)), clock_(clock), errors_(errors), limits_(limits) {}

std::optional<std::vector<uint32_t>> EngineTokenizer::ids(api::Api api, const Json& body, const std::string& model) {
  auto req = http::tokenize_request(api, body, model);
  const bool chat_form = api != api::Api::kCompletions;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!req) {
      const std::string why = std::string(api::api_path(api)) + ": " + req.error().message;
      if (warned_.insert(why).second)
        diag::warning("tokenizer",
                      "precise routing is unavailable for " + why + "; such requests are routed on approximate tokens");
      return std::nullopt;
    }
    if ((chat_form && chat_refused_) || clock_.now_ms() < retry_at_ms_) return std::nullopt;
  }
  int status = 0;
  auto t = http::tokenize(url_, *req, limits_.timeout_s, &status);
  if (!t) {
    failed(t.error().message, status, chat_form);
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (chat_form) chat_accepted_ = true;
  if (failing_) diag::note("tokenizer at " + url_ + " answers again: routing uses the engine's tokens");
  failing_ = false;
  return std::move(*t);
}

void EngineTokenizer::failed(const std::string& message, int status, bool chat_form) {
  errors_++;
  std::lock_guard<std::mutex> lk(mu_);
  if (chat_form && !chat_accepted_ && status >= 400 && status < 500 && status != 404) {
    chat_refused_ = true;
    diag::warning("tokenizer", fmt::format("{}: {} refused a chat request's messages, so it cannot apply the "
                                           "chat template (SGLang's /tokenize takes a prompt only): precise "
                                           "routing is unavailable for chat, messages and responses requests; "
                                           "they are routed on approximate tokens",
                                           message, url_));
    return;
  }
  retry_at_ms_ = clock_.now_ms() + limits_.backoff_s * 1000;
  if (failing_) return;
  failing_ = true;
  diag::warning("tokenizer", fmt::format("{}; routing is approximate (4-byte tokens) until it answers again "
                                         "(tried again every {:g} s at most)",
                                         message, limits_.backoff_s));
}

}  // namespace dyn::serve
