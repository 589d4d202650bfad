// KV-event subscriptions (SPEC 3.3 event-fed index): one subscriber per worker, whose events are
// cut into router blocks (kvevents::WorkerFeed) and applied to the router's index.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dyn/kvevents/pubsub.h"
#include "dyn/kvevents/translate.h"
#include "dyn/route/router.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/options.h"

namespace dyn::serve {

/// The event feeds of every worker (worker id = index). Each subscriber thread owns its worker's
/// feed; events of a worker the fleet refused for its block size are skipped (and counted), as
/// are the other kinds kvevents::Skip names. The LoRA adapters the workers store blocks under are
/// learned here and read by the request path (adapters()).
class KvFeeds {
 public:
  /// `sources`: one per worker of `fleet`, in worker order. Errors (Fatal, exit 2): a count that
  /// does not match the fleet, an empty endpoint.
  KvFeeds(const std::vector<KvEventSource>& sources, Fleet& fleet, route::Router& router, uint32_t block_size);
  ~KvFeeds();
  KvFeeds(const KvFeeds&) = delete;
  KvFeeds& operator=(const KvFeeds&) = delete;

  /// Starts the subscriber threads. Fatal(kExitUsage) for an address ZMQ rejects.
  void start();
  /// Stops the subscriber threads (no more index updates).
  void stop();

  /// The adapters seen in BlockStored events (thread-safe), for hashing requests as their blocks.
  const kvevents::Adapters& adapters() const { return adapters_; }
  size_t size() const { return feeds_.size(); }
  /// What worker i's feed received and skipped (dyn_kv_events_* in /metrics).
  const kvevents::FeedCounts& counts(size_t i) const { return feeds_[i]->feed.counts(); }
  /// Times worker i's index was cleared for lost events.
  uint64_t resets(size_t i) const { return feeds_[i]->resets.load(); }
  const kvevents::Subscriber::Stats& subscriber(size_t i) const { return feeds_[i]->sub->stats(); }

 private:
  struct Feed {
    Feed(uint32_t router_block_size, kvevents::Adapters* adapters) : feed(router_block_size, adapters) {}
    kvevents::WorkerFeed feed;
    std::unique_ptr<kvevents::Subscriber> sub;
    std::atomic<uint64_t> resets{0}, problems{0};
  };
  void on_batch(size_t i, const kvevents::EventBatch& b);
  void on_reset(size_t i);

  Fleet& fleet_;
  route::Router& router_;
  kvevents::Adapters adapters_;  ///< before the feeds: they point to it
  std::vector<std::unique_ptr<Feed>> feeds_;
};

}  // namespace dyn::serve
