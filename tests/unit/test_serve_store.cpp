// Unit tests for the shared binding store logic (lib/dyn/serve/binding_store.h): SharedBindings
// over two in-process "replicas" (two routers) and one in-memory store that behaves like the Redis
// one (atomic claim, compare-and-set, delete-if-equal, change notifications to the other
// replicas), plus Router::adopt_binding, the binding listener and the store URL parser. The Redis
// store itself is exercised against a real redis-server by e2e.serve-replicas-redis.
#include <doctest/doctest.h>

#include <map>

#include "dyn/base/clock.h"
#include "dyn/route/router.h"
#include "dyn/serve/binding_store.h"
#include "dyn/session/normalize.h"

using namespace dyn;
using namespace dyn::serve;
using namespace dyn::route;

namespace {

const std::vector<std::string> kUrls = {"http://w0", "http://w1"};

struct Hub;

class FakeStore final : public BindingStore {
 public:
  explicit FakeStore(Hub& hub);
  ~FakeStore() override;
  Expected<std::optional<std::string>> get_touch(const std::string& id, const std::string& parent,
                                                 uint64_t ttl) override;
  Expected<std::string> claim(const std::string& id, const std::string& parent, const std::string& url,
                              uint64_t ttl) override;
  Expected<std::string> replace(const std::string& id, const std::string& parent, const std::string& expected,
                                const std::string& url, uint64_t ttl) override;
  void touch_async(const std::string& id, const std::string& parent, uint64_t ttl) override;
  void remove_async(const std::string& id, const std::string& parent, const std::string& url) override;
  Expected<std::vector<StoredBinding>> list() override { return std::vector<StoredBinding>{}; }
  bool up() const override;
  bool notifications_live() const override { return up(); }
  void on_changed(std::function<void(const std::string&, const std::string&)> cb) override { changed = std::move(cb); }
  void on_leased_keys(std::function<std::vector<std::pair<std::string, std::string>>()>) override {}
  Stats stats() const override { return {}; }

  Hub& hub;
  std::function<void(const std::string&, const std::string&)> changed;
};

struct Hub {
  std::map<std::string, std::string> kv;
  std::map<std::string, int> touches;
  int reads = 0;
  bool down = false;
  std::function<void()> after_read;  ///< runs once after a read (another replica's racing claim)
  std::vector<FakeStore*> stores;
  static std::string k(const std::string& id, const std::string& parent) {
    return parent.empty() ? "session:" + id : "parent:" + parent;
  }
  void publish(FakeStore* from, const std::string& id, const std::string& parent) {
    for (auto* s : stores)
      if (s != from && s->changed) s->changed(id, parent);
  }
  Error outage() const { return Error{"store down", kExitIo}; }
};

FakeStore::FakeStore(Hub& h) : hub(h) { hub.stores.push_back(this); }
FakeStore::~FakeStore() { std::erase(hub.stores, this); }
bool FakeStore::up() const { return !hub.down; }
Expected<std::optional<std::string>> FakeStore::get_touch(const std::string& id, const std::string& parent, uint64_t) {
  if (hub.down) return hub.outage();
  hub.reads++;
  auto it = hub.kv.find(Hub::k(id, parent));
  if (it == hub.kv.end()) {
    if (hub.after_read) hub.after_read();
    return std::optional<std::string>{};
  }
  hub.touches[it->first]++;
  return std::optional<std::string>{it->second};
}
Expected<std::string> FakeStore::claim(const std::string& id, const std::string& parent, const std::string& url,
                                       uint64_t) {
  if (hub.down) return hub.outage();
  auto [it, inserted] = hub.kv.emplace(Hub::k(id, parent), url);
  return it->second;
}
Expected<std::string> FakeStore::replace(const std::string& id, const std::string& parent, const std::string& expected,
                                         const std::string& url, uint64_t) {
  if (hub.down) return hub.outage();
  auto& v = hub.kv[Hub::k(id, parent)];
  if (!v.empty() && v != expected) return v;
  bool changed_value = !v.empty() && v != url;
  v = url;
  if (changed_value) hub.publish(this, id, parent);
  return url;
}
void FakeStore::touch_async(const std::string& id, const std::string& parent, uint64_t) {
  if (!hub.down) hub.touches[Hub::k(id, parent)]++;
}
void FakeStore::remove_async(const std::string& id, const std::string& parent, const std::string& url) {
  if (hub.down) return;
  auto it = hub.kv.find(Hub::k(id, parent));
  if (it != hub.kv.end() && it->second == url) {
    hub.kv.erase(it);
    hub.publish(this, id, parent);
  }
}

RouterConfig affinity_cfg(AffinityMode mode = AffinityMode::kHard) {
  RouterConfig c;
  c.mode = Mode::kRoundRobin;
  c.affinity_ttl_secs = 300;
  c.affinity_mode = mode;
  return c;
}

/// One router replica with its SharedBindings over the hub.
struct Replica {
  Router router;
  SharedBindings shared;
  Replica(Hub& hub, const Clock& clock, AffinityMode mode = AffinityMode::kHard,
          const std::vector<std::string>& urls = kUrls)
      : router(affinity_cfg(mode), clock), shared(router, std::make_unique<FakeStore>(hub), urls, clock) {
    for (uint64_t i = 0; i < urls.size(); ++i) REQUIRE_FALSE(router.add_worker(WorkerSpec{i, 0, 0}));
  }
  /// One whole turn: placed, committed, finished. Returns the worker.
  uint64_t turn(const std::string& session, const std::string& parent = "") {
    RouteRequest q;
    q.session_id = session;
    q.parent_session_id = parent;
    q.tokens = 10;
    auto p = shared.place(q);
    REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
    p->commit();
    uint64_t w = p->worker();
    p->finish();
    return w;
  }
};

}  // namespace

TEST_CASE("store URL: redis://HOST:PORT[/DB] only") {
  auto u = StoreUrl::parse("redis://127.0.0.1:6380/3");
  REQUIRE(u);
  CHECK(u->host == "127.0.0.1");
  CHECK(u->port == 6380);
  CHECK(u->db == 3);
  auto d = StoreUrl::parse("redis://cache.local");
  REQUIRE(d);
  CHECK(d->port == 6379);
  CHECK(d->db == 0);
  auto v6 = StoreUrl::parse("redis://[::1]:7000");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->port == 7000);
  for (const char* bad : {"http://x:1", "redis://", "redis://:6379", "redis://h:0", "redis://h:99999", "redis://h:x",
                          "redis://h:1/db", "redis://user:pw@h:1", "redis://[::1"}) {
    auto e = StoreUrl::parse(bad);
    CHECK_MESSAGE(!e, bad);
    if (!e) CHECK(e.error().exit_code == kExitUsage);
  }
}

TEST_CASE("adopt_binding: a binding made elsewhere becomes a hit; versions; unknown worker refused") {
  FakeClock clock;
  Router r(affinity_cfg(), clock);
  REQUIRE_FALSE(r.add_worker(WorkerSpec{0, 0, 0}));
  REQUIRE_FALSE(r.add_worker(WorkerSpec{1, 0, 0}));
  CHECK_FALSE(r.adopt_binding("s", "", 7));  // no worker 7
  CHECK(r.adopt_binding("s", "", 1));
  RouteRequest q;
  q.session_id = "s";
  q.tokens = 10;
  {
    auto p = r.place(q);
    REQUIRE(p);
    CHECK(p->worker() == 1);
    CHECK(p->binding() == BindingOutcome::kHit);
  }
  auto b = r.bindings();
  REQUIRE(b.size() == 1);
  CHECK(b[0].version == 1);
  CHECK(r.adopt_binding("s", "", 0));  // another replica rebound it
  b = r.bindings();
  CHECK(b[0].worker == 0);
  CHECK(b[0].version == 2);
  // A parent group keeps its parent id.
  CHECK(r.adopt_binding(session::parent_group_key("p"), "p", 1));
  b = r.bindings();
  REQUIRE(b.size() == 2);
  CHECK(b[0].parent_session_id == "p");
}

TEST_CASE("two replicas with different round-robin state keep every session on one worker") {
  FakeClock clock;
  Hub hub;
  Replica a(hub, clock), b(hub, clock);
  // Without the store, b's round-robin would put s2 on worker 0 while a put it on worker 1.
  CHECK(a.turn("s1") == 0);
  CHECK(a.turn("s2") == 1);
  CHECK(b.turn("s2") == 1);
  CHECK(b.turn("s1") == 0);
  CHECK(a.turn("s2") == 1);
  CHECK(hub.kv.at("session:s1") == "http://w0");
  CHECK(hub.kv.at("session:s2") == "http://w1");
  // Parent groups are shared the same way.
  uint64_t g = a.turn("child-1", "root");
  CHECK(b.turn("child-2", "root") == g);
  CHECK(hub.kv.count("parent:root") == 1);
  auto sa = a.shared.stats(), sb = b.shared.stats();
  CHECK(sa.conflicts + sb.conflicts == 0);
  // a trusted its copies of s1 and s2 (no round trip) for its later hits; the TTL was refreshed.
  CHECK(sa.cached >= 1);
  CHECK(hub.touches["session:s2"] >= 2);
}

TEST_CASE("a lost claim follows the winner: the tentative placement is cancelled") {
  FakeClock clock;
  Hub hub;
  Replica a(hub, clock);
  // Another replica claimed s between a's read and a's claim: simulate by a value a never read.
  hub.kv["session:s"] = "http://w1";
  CHECK(a.turn("s") == 1);  // read finds it: adopted, a hit
  // Another replica claims t right after a's read: a places t itself (round-robin -> worker 0),
  // claims, loses to w1 and follows it.
  hub.after_read = [&] {
    hub.kv["session:t"] = "http://w1";
    hub.after_read = nullptr;
  };
  RouteRequest q;
  q.session_id = "t";
  q.tokens = 10;
  auto p = a.shared.place(q);
  REQUIRE(p);
  CHECK(p->worker() == 1);
  p->commit();
  p->finish();
  auto loads = a.router.loads();
  CHECK(loads[0].active_requests == 0);  // the cancelled tentative placement left no load behind
  CHECK(loads[1].active_requests == 0);
  CHECK(a.shared.stats().conflicts == 1);
}

TEST_CASE("bad data is ignored with a warning and overwritten; a down store falls back to the local table") {
  FakeClock clock;
  Hub hub;
  Replica a(hub, clock);
  hub.kv["session:x"] = "http://gone:1";
  uint64_t w = a.turn("x");
  CHECK(hub.kv.at("session:x") == kUrls[w]);
  CHECK(a.shared.stats().bad_values >= 1);
  hub.down = true;
  CHECK(a.turn("y") <= 1);  // served on the local table
  CHECK(a.turn("y") == a.turn("y"));
  CHECK(a.shared.stats().local_only >= 3);
  CHECK(hub.kv.count("session:y") == 0);
  hub.down = false;
  // Back: the local binding of y is claimed on its next hit, so other replicas follow it.
  uint64_t wy = a.turn("y");
  CHECK(hub.kv.at("session:y") == kUrls[wy]);
}

TEST_CASE("hard invalidation and soft rebinds are visible to the other replica") {
  FakeClock clock;
  Hub hub;
  SUBCASE("hard: a failed dispatch deletes the binding; the retry's new binding is shared") {
    Replica a(hub, clock), b(hub, clock);
    CHECK(a.turn("s") == 0);
    CHECK(b.turn("s") == 0);
    RouteRequest q;
    q.session_id = "s";
    q.tokens = 10;
    auto p = a.shared.place(q);
    REQUIRE(p);
    a.router.set_healthy(0, false);
    RetryAdvice adv = p->fail(false);
    CHECK(adv.retry);
    CHECK(hub.kv.count("session:s") == 0);  // deleted in the store, b told
    q.retry = adv;
    auto p2 = a.shared.place(q);
    REQUIRE(p2);
    CHECK(p2->worker() == 1);
    p2->commit();
    p2->finish();
    CHECK(hub.kv.at("session:s") == "http://w1");
    CHECK(b.turn("s") == 1);  // b drops its copy and follows
  }
  SUBCASE("soft: a rebind is a compare-and-set the other replica follows") {
    Replica a(hub, clock, AffinityMode::kSoft), b(hub, clock, AffinityMode::kSoft);
    CHECK(a.turn("s") == 0);
    b.router.set_healthy(0, false);
    CHECK(b.turn("s") == 1);  // rebound on b
    CHECK(hub.kv.at("session:s") == "http://w1");
    CHECK(a.turn("s") == 1);  // a's copy was dropped by the notification
  }
}

TEST_CASE("workers are named by URL: replicas may list them in different orders") {
  FakeClock clock;
  Hub hub;
  Replica a(hub, clock), b(hub, clock, AffinityMode::kHard, {"http://w1", "http://w0"});
  CHECK(a.turn("s") == 0);  // http://w0 is a's worker 0 ...
  CHECK(hub.kv.at("session:s") == "http://w0");
  CHECK(b.turn("s") == 1);  // ... and b's worker 1
  CHECK(b.turn("t") == 0);  // b's worker 0 is http://w1
  CHECK(a.turn("t") == 1);
}
