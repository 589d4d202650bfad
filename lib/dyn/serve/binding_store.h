// Shared session bindings for several dyn-route serve replicas (--router-binding-store): the store
// interface, its Redis implementation, and SharedBindings, which keeps a replica's router table in
// step with the store. Without a store the router's in-process table is used alone (the default).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/base/error.h"
#include "dyn/route/router.h"

namespace dyn::serve {

/// redis://HOST:PORT[/DB] (PORT default 6379, DB default 0).
struct StoreUrl {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string text;  ///< as given, for messages and /metrics
  /// Errors (exit 2) name the problem: another scheme, a missing host, a bad port or DB number.
  static Expected<StoreUrl> parse(const std::string& url);
};

/// One binding as the store holds it (GET /v1/bindings with a store).
struct StoredBinding {
  std::string session_id;         ///< set for a session binding
  std::string parent_session_id;  ///< set for a parent group (SPEC 2.4)
  std::string worker_url;         ///< workers are named by URL in the store, not by --worker position
  int64_t ttl_ms = -1;            ///< time left before the store expires it (-1 = no TTL)
};

/// The authoritative binding table shared by replicas. Keys are (session id, parent id) pairs as
/// in SPEC 2.4: `parent` non-empty = the parent group of that parent session, else session `id`.
/// Values are worker URLs. Synchronous calls return an Error (exit 4) when the store cannot be
/// reached; the implementation then reports itself down (up() false) until it is reachable again.
/// Thread-safe.
class BindingStore {
 public:
  virtual ~BindingStore() = default;
  /// The worker URL bound to the key, restarting its TTL when present (a hit); nullopt = none.
  virtual Expected<std::optional<std::string>> get_touch(const std::string& id, const std::string& parent,
                                                         uint64_t ttl_ms) = 0;
  /// First writer wins: binds the key to `url` with `ttl_ms` when it holds nothing, atomically.
  /// Returns the URL bound after the call (`url` when this call won).
  virtual Expected<std::string> claim(const std::string& id, const std::string& parent, const std::string& url,
                                      uint64_t ttl_ms) = 0;
  /// Compare-and-set: binds the key to `url` when it holds `expected` or nothing. Returns the URL
  /// bound after the call (`url` when this call won). Other replicas are told to drop their copy.
  virtual Expected<std::string> replace(const std::string& id, const std::string& parent, const std::string& expected,
                                        const std::string& url, uint64_t ttl_ms) = 0;
  /// Queued, no reply awaited (never blocks a request): restart the key's TTL.
  virtual void touch_async(const std::string& id, const std::string& parent, uint64_t ttl_ms) = 0;
  /// Queued: delete the key if it still holds `url`, and tell other replicas.
  virtual void remove_async(const std::string& id, const std::string& parent, const std::string& url) = 0;
  /// Every binding in the store (a full scan: admin use only).
  virtual Expected<std::vector<StoredBinding>> list() = 0;
  /// False from a failed call until the store answers again (probed in the background).
  virtual bool up() const = 0;
  /// True while a copy of a store value may be trusted without asking again: the store is up and
  /// the change notifications from other replicas are being received.
  virtual bool notifications_live() const = 0;
  /// Called (from a store thread) with the key another replica changed or deleted, or with
  /// id == "" and parent == "" meaning "forget every copy" (notifications were lost, the store
  /// came back). Set before use.
  virtual void on_changed(std::function<void(const std::string& id, const std::string& parent)> cb) = 0;
  /// Keys whose TTL the store should keep refreshing while turns are in flight (called every
  /// TTL/3 from a store thread), so a turn longer than the TTL does not lose its binding.
  virtual void on_leased_keys(std::function<std::vector<std::pair<std::string, std::string>>()> cb) = 0;

  /// Counters for /metrics.
  struct Stats {
    uint64_t errors = 0;         ///< failed calls (each outage counts its first few)
    uint64_t outages = 0;        ///< up -> down transitions
    uint64_t async_dropped = 0;  ///< queued updates dropped while the store was down
    uint64_t notifications = 0;  ///< change notifications received from other replicas
  };
  virtual Stats stats() const = 0;
};

/// Redis through hiredis: keys "dyn:bind:session:<id>" and "dyn:bind:parent:<id>" in database DB
/// holding the worker URL with a PX TTL; claim = SET NX PX, compare-and-set and delete-if-equal
/// as Lua scripts (atomic on the server), changes published on channel "dyn:bind:changed:<DB>".
/// Calls use a small pool of connections (1 s connect and command timeouts); one thread sends
/// queued TTL refreshes and deletes pipelined, another subscribes to the channel and probes the
/// server every 500 ms while it is down. An outage is reported once on stderr (and its end).
/// `ttl_ms` is the affinity TTL (the lease refresher's period is a third of it).
std::unique_ptr<BindingStore> make_redis_store(const StoreUrl& url, uint64_t ttl_ms);

/// Keeps one replica's router in step with a shared BindingStore. place() wraps Router::place():
/// - before placing, the key's store value is read (with its TTL restarted) unless a copy read
///   within TTL/2 may be trusted (BindingStore::notifications_live and no change notification for
///   the key since): a binding made by another replica is adopted into the local table
///   (Router::adopt_binding), so the router follows it as a hit;
/// - a new, expired or rebound placement is then claimed in the store atomically (claim when the
///   store held nothing, compare-and-set over the value seen otherwise); when another replica won,
///   the tentative placement is cancelled and the request placed again on the winner's binding;
/// - a hit on a trusted copy refreshes the store's TTL without a round trip (queued);
/// - lease ends refresh the TTL, dropped bindings (failed first dispatch, hard invalidation) are
///   deleted from the store if they still hold this replica's worker (Router::BindingListener).
/// Workers are named in the store by their canonical URL (http::canonical_worker_url, issue 51.2),
/// and a value is canonicalized before it is compared, so replicas given different spellings of a
/// worker agree. A value naming a worker this replica removed is not followed (the placement is a
/// move, RebindReason::kRemoved); one naming a URL this replica never had is ignored with one
/// warning per URL; both are overwritten by this replica's placement. While the store is down
/// every call goes straight to the router (its local table), so no request fails or waits
/// because of the store.
class SharedBindings : public route::BindingListener {
 public:
  /// `worker_urls[i]` is router worker id i (canonicalized here). The router and clock must
  /// outlive this object; the constructor installs itself as the router's binding listener.
  SharedBindings(route::Router& router, std::unique_ptr<BindingStore> store, std::vector<std::string> worker_urls,
                 const Clock& clock);
  ~SharedBindings() override;

  /// Router::place() with the store consulted as above. Same errors as Router::place().
  Expected<route::Placement> place(const route::RouteRequest& req);

  /// Worker `id` is named `url` (canonicalized) and `present` (false: removed) from now on.
  void set_worker(uint64_t id, const std::string& url, bool present);

  BindingStore& store() { return *store_; }
  const BindingStore& store() const { return *store_; }

  /// Counters for /metrics.
  struct Stats {
    uint64_t round_trips = 0;     ///< places that read the store
    uint64_t cached = 0;          ///< places that trusted a copy (no round trip)
    uint64_t claims = 0;          ///< claims and compare-and-sets sent
    uint64_t conflicts = 0;       ///< claims lost to another replica (request placed again)
    uint64_t bad_values = 0;      ///< store values naming an unknown worker URL
    uint64_t removed_values = 0;  ///< store values naming a worker this replica removed (not followed)
    uint64_t local_only = 0;      ///< places while the store was down
  };
  Stats stats() const;

  void lease_ended(const std::string& key, const std::string& parent, uint64_t worker) override;
  void dropped(const std::string& key, const std::string& parent, uint64_t worker) override;

 private:
  struct Copy {
    uint64_t worker = 0;
    double read_ms = 0;
  };
  /// The present worker named by store value `url`; nullopt for a removed (*removed set) or
  /// unknown one.
  std::optional<uint64_t> worker_of(const std::string& url, const std::string& key, bool* removed);
  std::string url_of(uint64_t worker) const;
  void remember(const std::string& key, uint64_t worker);
  void forget(const std::string& key);
  void changed(const std::string& id, const std::string& parent);

  route::Router& router_;
  std::unique_ptr<BindingStore> store_;
  std::vector<std::string> urls_;  ///< under mu_: canonical URL per worker id
  std::vector<bool> removed_;      ///< under mu_
  const Clock& clock_;
  double ttl_ms_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Copy> copies_;  ///< router key -> trusted store value
  std::unordered_set<std::string> warned_urls_;
  std::atomic<uint64_t> round_trips_{0}, cached_{0}, claims_{0}, conflicts_{0}, bad_values_{0}, local_only_{0},
      removed_values_{0};
};

}  // namespace dyn::serve
