// KV-event subscriptions: each worker's events through its kvevents::WorkerFeed into the router's index.
#include "dyn/serve/kv_feeds.h"

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/base/error.h"

namespace dyn::serve {

KvFeeds::KvFeeds(const std::vector<KvEventSource>& sources, Fleet& fleet, route::Router& router, uint32_t block_size)
    : fleet_(fleet), router_(router) {
  if (sources.size() != fleet.size())
    throw Fatal(kExitUsage, fmt::format("--router-kv-events needs the KV event endpoint of every worker "
                                        "(--worker-kv-events URL=ENDPOINT[,REPLAY]); {} of {} given",
                                        sources.size(), fleet.size()));
  for (size_t i = 0; i < sources.size(); ++i) {
    const KvEventSource& src = sources[i];
    if (src.endpoint.empty())
      throw Fatal(kExitUsage, fmt::format("worker {} ({}) has no KV event endpoint", i, fleet.at(i).url));
    auto f = std::make_unique<Feed>(block_size, &adapters_);
    kvevents::Subscriber::Handler h;
    h.batch = [this, i](uint64_t, const kvevents::EventBatch& b, bool) { on_batch(i, b); };
    h.reset = [this, i](const std::string&) { on_reset(i); };
    f->sub = std::make_unique<kvevents::Subscriber>(
        kvevents::SubscriberOptions{src.endpoint, src.replay_endpoint, "",
                                    fmt::format("worker {} ({})", i, src.endpoint), 2000},
        std::move(h));
    feeds_.push_back(std::move(f));
  }
}

KvFeeds::~KvFeeds() { stop(); }

void KvFeeds::start() {
  for (auto& f : feeds_) f->sub->start();
}

void KvFeeds::stop() {
  for (auto& f : feeds_) f->sub->stop();
}

void KvFeeds::on_batch(size_t i, const kvevents::EventBatch& b) {
  Feed& f = *feeds_[i];
  f.feed.apply(
      b, [&](const route::KvEvent& e) { router_.apply_kv_event(i, e); },
      [&](uint32_t bs) { return fleet_.check_block_size(i, bs, "a BlockStored event"); },
      [&](const std::string& why) {
        if (f.problems++ % 100 == 0) diag::warning(fmt::format("worker {} KV events", i), why + " (event skipped)");
      });
}

void KvFeeds::on_reset(size_t i) {
  Feed& f = *feeds_[i];
  f.feed.reset([&](const route::KvEvent& e) { router_.apply_kv_event(i, e); });
  f.resets++;
}

}  // namespace dyn::serve
