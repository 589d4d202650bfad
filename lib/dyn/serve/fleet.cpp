// The worker list: URLs parsed into connection pools, health changes, the block size rule.
#include "dyn/serve/fleet.h"

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/base/error.h"

namespace dyn::serve {

Fleet::Fleet(const std::vector<std::string>& urls, http::EventLoop& loop, const http::UpstreamTimeouts& timeouts,
             uint32_t block_size, bool allow_block_size_mismatch)
    : block_size_(block_size), allow_mismatch_(allow_block_size_mismatch) {
  for (const auto& w : urls) {
    auto u = http::UpstreamUrl::parse(w);
    if (!u) throw Fatal(kExitUsage, u.error().message);
    workers_.push_back(std::make_unique<Worker>(w, *u, loop, timeouts));
  }
}

std::optional<size_t> Fleet::first_healthy() const {
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i]->healthy) return i;
  return std::nullopt;
}

void Fleet::set_health(size_t i, bool ok, const std::string& why) {
  Worker& w = *workers_[i];
  if (w.healthy.exchange(ok) == ok) return;
  if (on_change_) on_change_(i, ok);
  diag::note(fmt::format("worker {} ({}) is {}: {}", i, w.url, ok ? "healthy" : "unhealthy", why));
}

bool Fleet::check_block_size(size_t i, uint32_t bs, const char* source) {
  Worker& w = *workers_[i];
  w.block_size = bs;
  if (bs == block_size_) {
    if (w.refused.exchange(false))
      diag::note(fmt::format("worker {} ({}) now reports block size {}: accepted again", i, w.url, bs));
    return true;
  }
  std::string what =
      fmt::format("worker {} ({}) has KV block size {} ({}) but the router's --kv-cache-block-size is {}", i, w.url, bs,
                  source, block_size_);
  if (allow_mismatch_) {
    if (!w.mismatch_warned.exchange(true))
      diag::warning("", what + "; routing to it stays approximate (--allow-block-size-mismatch)");
    return true;
  }
  if (!w.refused.exchange(true)) {
    diag::error("", what + ": the worker is refused (not routed to, its KV events ignored); start it with block size " +
                        std::to_string(block_size_) + " or pass --allow-block-size-mismatch");
    set_health(i, false, "refused: block size mismatch");
  }
  return false;
}

}  // namespace dyn::serve
