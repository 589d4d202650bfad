// SharedBindings: one replica's router table kept in step with the shared binding store.
#include <iterator>

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/http/url.h"
#include "dyn/serve/binding_store.h"
#include "dyn/session/normalize.h"

namespace dyn::serve {

SharedBindings::SharedBindings(route::Router& router, std::unique_ptr<BindingStore> store,
                               std::vector<std::string> worker_urls, const Clock& clock)
    : router_(router), store_(std::move(store)), clock_(clock) {
  for (size_t i = 0; i < worker_urls.size(); ++i) set_worker(i, worker_urls[i], true);
  ttl_ms_ = static_cast<double>(router_.config().affinity_ttl_secs) * 1000.0;
  store_->on_changed([this](const std::string& id, const std::string& parent) { changed(id, parent); });
  store_->on_leased_keys([this] {
    std::vector<std::pair<std::string, std::string>> keys;
    for (const auto& b : router_.bindings())
      if (b.active_leases > 0 || b.initializing) keys.emplace_back(b.key, b.parent_session_id);
    return keys;
  });
  router_.set_binding_listener(this);
}

SharedBindings::~SharedBindings() {
  router_.set_binding_listener(nullptr);
  store_->on_changed(nullptr);
  store_->on_leased_keys(nullptr);
  store_.reset();  // joins the store's threads before the members they call back into go
}

SharedBindings::Stats SharedBindings::stats() const {
  Stats s;
  s.round_trips = round_trips_.load();
  s.cached = cached_.load();
  s.claims = claims_.load();
  s.conflicts = conflicts_.load();
  s.bad_values = bad_values_.load();
  s.local_only = local_only_.load();
  s.removed_values = removed_values_.load();
  return s;
}

void SharedBindings::set_worker(uint64_t id, const std::string& url, bool present) {
  auto canonical = http::canonical_worker_url(url);
  std::lock_guard lk(mu_);
  if (urls_.size() <= id) {
    urls_.resize(id + 1);
    removed_.resize(id + 1, true);
  }
  urls_[id] = canonical ? *canonical : url;
  removed_[id] = !present;
}

std::string SharedBindings::url_of(uint64_t worker) const {
  std::lock_guard lk(mu_);
  return worker < urls_.size() ? urls_[worker] : std::string();
}

std::optional<uint64_t> SharedBindings::worker_of(const std::string& url, const std::string& key, bool* removed) {
  // Another replica (or an older version) may spell the worker differently: compare canonically.
  auto canonical = http::canonical_worker_url(url);
  const std::string& name = canonical ? *canonical : url;
  std::lock_guard lk(mu_);
  for (size_t i = 0; i < urls_.size(); ++i) {
    if (urls_[i] != name) continue;
    if (!removed_[i]) return i;
    removed_values_++;
    if (removed) *removed = true;
    return std::nullopt;
  }
  bad_values_++;
  if (warned_urls_.size() < 64 && warned_urls_.insert(url).second)
    diag::warning("", fmt::format("binding store: a binding names worker '{}', which is not one of this replica's "
                                  "--worker URLs; ignored (this replica binds the session itself)",
                                  url));
  return std::nullopt;
}

void SharedBindings::remember(const std::string& key, uint64_t worker) {
  std::lock_guard lk(mu_);
  if (copies_.size() >= router_.config().max_bindings) {
    // Bounded like the router table: drop copies too old to be trusted anyway.
    double now = clock_.now_ms();
    for (auto it = copies_.begin(); it != copies_.end();)
      it = now - it->second.read_ms >= ttl_ms_ / 2 ? copies_.erase(it) : std::next(it);
    if (copies_.size() >= router_.config().max_bindings) return;
  }
  copies_[key] = Copy{worker, clock_.now_ms()};
}

void SharedBindings::forget(const std::string& key) {
  std::lock_guard lk(mu_);
  copies_.erase(key);
}

void SharedBindings::changed(const std::string& id, const std::string& parent) {
  if (id.empty() && parent.empty()) {
    std::lock_guard lk(mu_);
    copies_.clear();
    return;
  }
  forget(parent.empty() ? id : session::parent_group_key(parent));
}

void SharedBindings::lease_ended(const std::string& key, const std::string& parent, uint64_t worker) {
  // A lease end restarts the idle deadline everywhere (SPEC 2.2.3).
  store_->touch_async(parent.empty() ? key : "", parent, static_cast<uint64_t>(ttl_ms_));
}

void SharedBindings::dropped(const std::string& key, const std::string& parent, uint64_t worker) {
  forget(key);
  std::string url = url_of(worker);
  if (!url.empty()) store_->remove_async(parent.empty() ? key : "", parent, url);
}

Expected<route::Placement> SharedBindings::place(const route::RouteRequest& req) {
  if (!router_.config().affinity_enabled() || req.session_id.empty() || req.worker ||
      router_.config().mode == route::Mode::kDirect)
    return router_.place(req);
  if (!store_->up()) {
    local_only_++;
    return router_.place(req);
  }
  const std::string& parent = req.parent_session_id;
  const std::string id = parent.empty() ? req.session_id : "";
  const std::string key = parent.empty() ? req.session_id : session::parent_group_key(parent);
  const auto ttl = static_cast<uint64_t>(ttl_ms_);

  // What the store holds: a trusted copy, or one round trip (which also restarts its TTL).
  std::optional<std::string> held;  // the store's value as last seen (nullopt = nothing bound)
  bool trusted = false;
  {
    std::lock_guard lk(mu_);
    auto it = copies_.find(key);
    if (it != copies_.end() && store_->notifications_live() && clock_.now_ms() - it->second.read_ms < ttl_ms_ / 2 &&
        it->second.worker < urls_.size() && !removed_[it->second.worker]) {
      held = urls_[it->second.worker];
      trusted = true;
    }
  }
  if (trusted) {
    cached_++;
  } else {
    auto got = store_->get_touch(id, parent, ttl);
    if (!got) {
      local_only_++;
      return router_.place(req);
    }
    round_trips_++;
    held = *got;
    if (held) {
      bool removed = false;
      if (auto w = worker_of(*held, key, &removed)) {
        if (router_.adopt_binding(key, parent, *w)) remember(key, *w);
      } else if (removed) {
        router_.note_moved(key, route::RebindReason::kRemoved);  // never followed, reported as a move
      }
    } else {
      forget(key);
    }
  }

  auto placed = router_.place(req);
  for (int round = 0; placed && round < 2; ++round) {
    const route::BindingOutcome outcome = placed->binding();
    const std::string mine = url_of(placed->worker());
    if (outcome == route::BindingOutcome::kNone) return placed;
    if (outcome == route::BindingOutcome::kHit && held && *held == mine) {
      if (trusted) store_->touch_async(id, parent, ttl);  // the round trip restarted it already
      return placed;
    }
    // New, expired or rebound here, or a hit on a local binding the store does not hold (made
    // while the store was down, or dropped by another replica): claim it; first writer wins.
    claims_++;
    auto won = held ? store_->replace(id, parent, *held, mine, ttl) : store_->claim(id, parent, mine, ttl);
    if (!won) {
      local_only_++;
      return placed;
    }
    if (*won == mine) {
      if (outcome != route::BindingOutcome::kRebound) remember(key, placed->worker());
      else forget(key);  // a rebind commits later (SPEC 2.3); read it again next time
      return placed;
    }
    // Another replica holds the key: follow it. The tentative placement is cancelled (its load
    // and, for a first dispatch, its initializing entry go) and the request is placed again.
    conflicts_++;
    held = *won;
    trusted = false;
    auto w = worker_of(*won, key, nullptr);
    if (!w) continue;               // bad data: the next round's compare-and-set overwrites it
    if (round == 1) return placed;  // lost twice in a row: keep this placement rather than loop
    placed->fail(/*client_cancelled=*/true);
    if (router_.adopt_binding(key, parent, *w)) remember(key, *w);
    placed = router_.place(req);
  }
  return placed;
}

}  // namespace dyn::serve
