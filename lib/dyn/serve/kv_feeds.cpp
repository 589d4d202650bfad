// KV-event subscriptions: each worker's events through its kvevents::WorkerFeed into the router's index.
#include "dyn/serve/kv_feeds.h"

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/base/error.h"

namespace dyn::serve {

KvFeeds::KvFeeds(Fleet& fleet, route::Router& router, uint32_t block_size)
    : fleet_(fleet),
      router_(router),
      block_size_(block_size),
      slots_(std::make_unique<std::atomic<Feed*>[]>(Fleet::kMaxWorkers)) {}

KvFeeds::~KvFeeds() { stop(); }

std::optional<Error> KvFeeds::add(size_t i, const KvEventSource& src) {
  if (src.endpoint.empty())
    return Error{fmt::format("worker {} ({}) has no KV event endpoint", i, fleet_.at(i).url), kExitUsage};
  auto f = std::make_unique<Feed>(block_size_, &adapters_, src);
  f->worker = i;
  Feed* fp = f.get();
  kvevents::Subscriber::Handler h;
  h.batch = [this, fp](uint64_t, const kvevents::EventBatch& b, bool) { on_batch(*fp, b); };
  h.reset = [this, fp](const std::string&) { on_reset(*fp); };
  f->sub = std::make_unique<kvevents::Subscriber>(
      kvevents::SubscriberOptions{src.endpoint, src.replay_endpoint, "", fmt::format("worker {} ({})", i, src.endpoint),
                                  2000},
      std::move(h));
  std::lock_guard lk(mu_);
  if (started_) {
    try {
      f->sub->start();
    } catch (const Fatal& e) {
      return Error{e.what(), kExitUsage};
    }
  }
  if (Feed* old = slots_[i].load()) {
    old->sub->stop();
    old->feed.reset([](std::span<const route::KvEvent>) {});
  }
  slots_[i].store(fp);
  feeds_.push_back(std::move(f));
  return std::nullopt;
}

void KvFeeds::remove(size_t i) {
  std::lock_guard lk(mu_);
  Feed* f = slots_[i].load();
  if (!f) return;
  f->sub->stop();
  // The router dropped the worker's index entries; the translator's engine-block map goes here.
  f->feed.reset([](std::span<const route::KvEvent>) {});
}

void KvFeeds::start() {
  std::lock_guard lk(mu_);
  started_ = true;
  for (size_t i = 0, n = fleet_.size(); i < n; ++i)
    if (Feed* f = slots_[i].load(); f && fleet_.at(i).present()) f->sub->start();
}

void KvFeeds::stop() {
  std::lock_guard lk(mu_);
  for (auto& f : feeds_) f->sub->stop();
}

void KvFeeds::on_batch(Feed& f, const kvevents::EventBatch& b) {
  const size_t i = f.worker;
  f.feed.apply(
      b, [&](std::span<const route::KvEvent> es) { router_.apply_kv_events(i, es); },
      [&](uint32_t bs) { return fleet_.check_block_size(i, bs, "a BlockStored event"); },
      [&](const std::string& why) {
        if (f.problems++ % 100 == 0) diag::warning(fmt::format("worker {} KV events", i), why + " (event skipped)");
      });
}

void KvFeeds::on_reset(Feed& f) {
  const size_t i = f.worker;
  f.feed.reset([&](std::span<const route::KvEvent> es) { router_.apply_kv_events(i, es); });
  f.resets++;
}

}  // namespace dyn::serve
