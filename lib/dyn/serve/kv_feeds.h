// KV-event subscriptions (SPEC 3.3 event-fed index): one subscriber per worker, whose events are
// cut into router blocks (kvevents::WorkerFeed) and applied to the router's index.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dyn/kvevents/pubsub.h"
#include "dyn/kvevents/translate.h"
#include "dyn/route/router.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/options.h"

namespace dyn::serve {

/// The event feeds of the fleet's workers (by worker id). Each subscriber thread owns its
/// worker's feed; events of a worker the fleet refused for its block size are skipped (and
/// counted), as are the other kinds kvevents::Skip names. The LoRA adapters the workers store
/// blocks under are learned here and read by the request path (adapters()). Workers join and
/// leave at run time (add, remove); a feed's counters stay readable after its worker left.
class KvFeeds {
 public:
  KvFeeds(Fleet& fleet, route::Router& router, uint32_t block_size);
  ~KvFeeds();
  KvFeeds(const KvFeeds&) = delete;
  KvFeeds& operator=(const KvFeeds&) = delete;

  /// Worker i publishes at `source`: a feed for it (replacing a feed it had before, whose
  /// translator state is freed), started at once when start() was called. Errors (exit 2): an
  /// empty endpoint, an address ZMQ rejects.
  std::optional<Error> add(size_t i, const KvEventSource& source);
  /// Worker i left: its subscriber stops and its feed's translator state is freed (the router's
  /// index entries go with Router::remove_worker).
  void remove(size_t i);
  /// Starts the subscriber threads of the feeds added so far (later ones start as they come).
  /// Fatal(kExitUsage) for an address ZMQ rejects.
  void start();
  /// Stops the subscriber threads (no more index updates).
  void stop();

  /// The adapters seen in BlockStored events (thread-safe), for hashing requests as their blocks.
  const kvevents::Adapters& adapters() const { return adapters_; }
  /// True when worker i has (or had) a feed.
  bool has(size_t i) const { return i < Fleet::kMaxWorkers && slots_[i].load() != nullptr; }
  /// Where worker i publishes (has(i)).
  const KvEventSource& source(size_t i) const { return slots_[i].load()->source; }
  /// What worker i's feed received and skipped (dyn_kv_events_* in /metrics; has(i)).
  const kvevents::FeedCounts& counts(size_t i) const { return slots_[i].load()->feed.counts(); }
  /// Times worker i's index was cleared for lost events.
  uint64_t resets(size_t i) const { return slots_[i].load()->resets.load(); }
  const kvevents::Subscriber::Stats& subscriber(size_t i) const { return slots_[i].load()->sub->stats(); }

 private:
  struct Feed {
    Feed(uint32_t router_block_size, kvevents::Adapters* adapters, KvEventSource s)
        : feed(router_block_size, adapters), source(std::move(s)) {}
    size_t worker = 0;
    kvevents::WorkerFeed feed;
    KvEventSource source;
    std::unique_ptr<kvevents::Subscriber> sub;
    std::atomic<uint64_t> resets{0}, problems{0};
  };
  void on_batch(Feed& f, const kvevents::EventBatch& b);
  void on_reset(Feed& f);

  Fleet& fleet_;
  route::Router& router_;
  uint32_t block_size_;
  kvevents::Adapters adapters_;  ///< before the feeds: they point to it
  std::unique_ptr<std::atomic<Feed*>[]> slots_;
  std::vector<std::unique_ptr<Feed>> feeds_;  ///< every feed made (under mu_): a replaced one stays readable
  std::mutex mu_;
  bool started_ = false;  ///< under mu_
};

}  // namespace dyn::serve
