// The facts of a finished exchange: its latencies and its response's error.
#include "dyn/serve/exchange.h"

#include "dyn/tokens/hash.h"

namespace dyn::serve {

Latencies latencies_of(const Exchange& ex, const http::ProxyOutcome* out) {
  Latencies l;
  const ResponseFacts* f = ex.tap ? &ex.tap->facts() : nullptr;
  if (!f) return l;
  if (f->output_tokens) {
    l.output_tokens = *f->output_tokens;
  } else if (f->content_bytes > 0 || out) {
    l.output_tokens = tokens::token_count(f->content_bytes);  // SPEC 4.2 estimate when usage is absent
    l.output_tokens_estimated = true;
  }
  if (f->first_content_ms) {
    l.ttft_ms = *f->first_content_ms - ex.start_ms;
    l.latency_ms = *f->last_content_ms - ex.start_ms;
  }
  uint64_t n = l.output_tokens.value_or(0);
  if (ex.stream && l.ttft_ms && n >= 2) l.avg_itl_ms = (*l.latency_ms - *l.ttft_ms) / static_cast<double>(n - 1);
  return l;
}

std::pair<std::string, std::string> response_error(const Exchange& ex, const http::ProxyOutcome& o) {
  if (o.kind == http::ProxyOutcome::Kind::kStreamCut) return {"stream_cut", o.message};
  if (o.kind == http::ProxyOutcome::Kind::kCancelled) return {"cancelled", "client went away"};
  const ResponseFacts& f = ex.tap->facts();
  if (o.status >= 400) {
    std::string msg = "worker returned HTTP " + std::to_string(o.status);
    if (!f.error_message.empty()) msg += ": " + f.error_message;
    return {"http", msg};
  }
  if (f.error_event) return {f.error_type, f.error_message};
  if (StreamEnd se = stream_end(ex.api, f); !se.complete) return {"stream_incomplete", se.message};
  return {};
}

}  // namespace dyn::serve
