// BindingStore on Redis through hiredis: a connection pool for the calls a request waits for, a
// pipelining thread for queued TTL refreshes and deletes, and a subscriber thread that receives
// other replicas' change notifications and probes the server while it is down.
#include <poll.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include "dyn/base/diag.h"
#include "dyn/serve/binding_store.h"

namespace dyn::serve {

Expected<StoreUrl> StoreUrl::parse(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return Error{"--router-binding-store '" + url + "': " + why + " (expected redis://HOST:PORT[/DB])", kExitUsage};
  };
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) return bad("only redis:// stores are supported");
  std::string rest = url.substr(scheme.size());
  StoreUrl u;
  u.text = url;
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      if (db.size() > 5 || db.find_first_not_of("0123456789") != std::string::npos) return bad("DB must be a number");
      u.db = std::stoi(db);
    }
  }
  if (rest.find('@') != std::string::npos) return bad("credentials in the URL are not supported");
  std::string port;
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
    auto close = rest.find(']');
    if (close == std::string::npos) return bad("unclosed '['");
    u.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return bad("junk after ']'");
      port = rest.substr(close + 2);
    }
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    u.host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  } else {
    u.host = rest;
  }
  if (u.host.empty()) return bad("no host");
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return bad("bad port");
    u.port = std::stoi(port);
    if (u.port < 1 || u.port > 65535) return bad("port out of range 1..65535");
  }
  return u;
}

namespace {

constexpr const char* kGetTouch =
    "local v = redis.call('GET', KEYS[1]) "
    "if v then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end "
    "return v";
constexpr const char* kClaim =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return ARGV[1] end "
    "return redis.call('GET', KEYS[1])";
// ARGV: expected, url, ttl, channel, message.
constexpr const char* kReplace =
    "local c = redis.call('GET', KEYS[1]) "
    "if c and c ~= ARGV[1] then return c end "
    "redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) "
    "if c and c ~= ARGV[2] then redis.call('PUBLISH', ARGV[4], ARGV[5]) end "
    "return ARGV[2]";
// ARGV: url, channel, message.
constexpr const char* kRemoveIf =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "redis.call('DEL', KEYS[1]) redis.call('PUBLISH', ARGV[2], ARGV[3]) return 1 end "
    "return 0";

constexpr const char* kPrefix = "dyn:bind:";
// A dead Redis is noticed at once (connection refused or closed); the timeout only bounds a hung
// or starved one. 200 ms proved too short on a loaded machine (scheduling delays counted as
// outages, and every outage costs strictness), so a hung Redis costs the calls in flight up to
// 1 s once; after that the store is down and requests skip it until the probe succeeds.
constexpr int kTimeoutMs = 1000;
constexpr int kPollMs = 200;  // the subscriber's wake-up period (stop requests, outage flags)
constexpr int kProbeMs = 500;

struct ReplyFree {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

/// "session:<id>" or "parent:<id>": the key suffix and the notification payload.
std::string key_name(const std::string& id, const std::string& parent) {
  return parent.empty() ? "session:" + id : "parent:" + parent;
}

class RedisStore final : public BindingStore {
 public:
  RedisStore(StoreUrl url, uint64_t ttl_ms) : url_(std::move(url)), ttl_ms_(ttl_ms) {
    channel_ = fmt::format("dyn:bind:changed:{}", url_.db);
    std::random_device rd;
    origin_ = fmt::format("{:08x}{:08x}", rd(), rd());
    // One synchronous probe, so a replica started next to a running Redis shares from its first
    // request; an unreachable store is reported now and probed in the background.
    std::string err;
    if (redisContext* c = connect(&err)) {
      redisFree(c);
      up_ = true;
      diag::note(fmt::format("binding store {}: connected; session bindings are shared", url_.text));
    } else {
      report_down(err);
    }
    sub_thread_ = std::thread([this] { subscriber_loop(); });
    async_thread_ = std::thread([this] { async_loop(); });
  }

  ~RedisStore() override {
    {
      std::lock_guard lk(q_mu_);
      stop_ = true;
    }
    q_cv_.notify_all();
    if (async_thread_.joinable()) async_thread_.join();
    if (sub_thread_.joinable()) sub_thread_.join();
    std::lock_guard lk(pool_mu_);
    for (auto& c : idle_) redisFree(c.ctx);
  }

  Expected<std::optional<std::string>> get_touch(const std::string& id, const std::string& parent,
                                                 uint64_t ttl_ms) override {
    auto r = call({"EVAL", kGetTouch, "1", key(id, parent), std::to_string(ttl_ms)});
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_NIL) return std::optional<std::string>{};
    if ((*r)->type == REDIS_REPLY_STRING) return std::optional<std::string>{std::string((*r)->str, (*r)->len)};
    return unexpected(**r);
  }

  Expected<std::string> claim(const std::string& id, const std::string& parent, const std::string& url,
                              uint64_t ttl_ms) override {
    auto r = call({"EVAL", kClaim, "1", key(id, parent), url, std::to_string(ttl_ms)});
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_STRING) return std::string((*r)->str, (*r)->len);
    return unexpected(**r);
  }

  Expected<std::string> replace(const std::string& id, const std::string& parent, const std::string& expected,
                                const std::string& url, uint64_t ttl_ms) override {
    auto r = call(
        {"EVAL", kReplace, "1", key(id, parent), expected, url, std::to_string(ttl_ms), channel_, message(id, parent)});
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_STRING) return std::string((*r)->str, (*r)->len);
    return unexpected(**r);
  }

  void touch_async(const std::string& id, const std::string& parent, uint64_t ttl_ms) override {
    enqueue({"PEXPIRE", key(id, parent), std::to_string(ttl_ms)});
  }

  void remove_async(const std::string& id, const std::string& parent, const std::string& url) override {
    enqueue({"EVAL", kRemoveIf, "1", key(id, parent), url, channel_, message(id, parent)});
  }

  Expected<std::vector<StoredBinding>> list() override {
    auto conn = acquire();
    if (!conn) return conn.error();
    redisContext* c = conn->ctx;
    std::vector<std::string> keys;
    std::string cursor = "0";
    const std::string match = std::string(kPrefix) + "*";
    do {
      Reply r(static_cast<redisReply*>(
          redisCommand(c, "SCAN %b MATCH %b COUNT 1000", cursor.data(), cursor.size(), match.data(), match.size())));
      if (!r) return lost(*conn);
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return give_back(*conn, unexpected(*r));
      cursor.assign(r->element[0]->str, r->element[0]->len);
      for (size_t i = 0; i < r->element[1]->elements; ++i)
        keys.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
    } while (cursor != "0");
    for (const auto& k : keys) {
      redisAppendCommand(c, "GET %b", k.data(), k.size());
      redisAppendCommand(c, "PTTL %b", k.data(), k.size());
    }
    std::vector<StoredBinding> out;
    for (const auto& k : keys) {
      redisReply* g = nullptr;
      redisReply* t = nullptr;
      if (redisGetReply(c, reinterpret_cast<void**>(&g)) != REDIS_OK) return lost(*conn);
      Reply gg(g);
      if (redisGetReply(c, reinterpret_cast<void**>(&t)) != REDIS_OK) return lost(*conn);
      Reply tt(t);
      if (g->type != REDIS_REPLY_STRING) continue;  // expired between SCAN and GET, or not ours
      StoredBinding b;
      std::string name = k.substr(std::strlen(kPrefix));
      if (name.rfind("session:", 0) == 0) b.session_id = name.substr(8);
      else if (name.rfind("parent:", 0) == 0) b.parent_session_id = name.substr(7);
      else continue;
      b.worker_url.assign(g->str, g->len);
      b.ttl_ms = t->type == REDIS_REPLY_INTEGER ? t->integer : -1;
      out.push_back(std::move(b));
    }
    release(std::move(*conn), true);
    return out;
  }

  bool up() const override { return up_.load(); }
  bool notifications_live() const override { return up_.load() && subscribed_.load(); }
  void on_changed(std::function<void(const std::string&, const std::string&)> cb) override {
    std::lock_guard lk(cb_mu_);
    changed_ = std::move(cb);
  }
  void on_leased_keys(std::function<std::vector<std::pair<std::string, std::string>>()> cb) override {
    std::lock_guard lk(cb_mu_);
    leased_ = std::move(cb);
  }
  Stats stats() const override {
    Stats s;
    s.errors = errors_.load();
    s.outages = outages_.load();
    s.async_dropped = async_dropped_.load();
    s.notifications = notifications_.load();
    return s;
  }

 private:
  struct Conn {
    redisContext* ctx = nullptr;
    uint64_t epoch = 0;
  };

  std::string key(const std::string& id, const std::string& parent) const {
    return std::string(kPrefix) + key_name(id, parent);
  }
  std::string message(const std::string& id, const std::string& parent) const {
    return origin_ + " " + key_name(id, parent);
  }

  Error unexpected(const redisReply& r) {
    std::string what = r.type == REDIS_REPLY_ERROR ? std::string(r.str, r.len) : fmt::format("reply type {}", r.type);
    errors_++;
    return Error{fmt::format("binding store {}: unexpected reply: {}", url_.text, what), kExitIo};
  }

  /// A connected context (timeouts set, DB selected) or nullptr with *err set.
  redisContext* connect(std::string* err) {
    timeval tv{kTimeoutMs / 1000, (kTimeoutMs % 1000) * 1000};  // tv_usec must stay below 1e6
    redisContext* c = redisConnectWithTimeout(url_.host.c_str(), url_.port, tv);
    if (!c) {
      *err = "cannot allocate a connection";
      return nullptr;
    }
    if (c->err) {
      *err = c->errstr;
      redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, tv);
    if (url_.db != 0) {
      Reply r(static_cast<redisReply*>(redisCommand(c, "SELECT %d", url_.db)));
      if (!r || r->type == REDIS_REPLY_ERROR) {
        *err = r ? std::string(r->str, r->len) : std::string(c->errstr);
        redisFree(c);
        return nullptr;
      }
    }
    return c;
  }

  Expected<Conn> acquire() {
    {
      std::lock_guard lk(pool_mu_);
      while (!idle_.empty()) {
        Conn c = idle_.back();
        idle_.pop_back();
        if (c.epoch == epoch_.load()) return c;
        redisFree(c.ctx);
      }
    }
    std::string err;
    uint64_t ep = epoch_.load();
    redisContext* c = connect(&err);
    if (!c) {
      errors_++;
      report_down(err);
      return Error{fmt::format("binding store {}: {}", url_.text, err), kExitIo};
    }
    return Conn{c, ep};
  }

  void release(Conn c, bool ok) {
    std::lock_guard lk(pool_mu_);
    if (ok && !c.ctx->err && c.epoch == epoch_.load() && idle_.size() < 64) idle_.push_back(c);
    else redisFree(c.ctx);
  }

  /// The connection failed mid-call: it is dropped and the store reported down.
  Error lost(Conn& c) {
    std::string err = c.ctx->err ? c.ctx->errstr : "no reply";
    release(c, false);
    errors_++;
    report_down(err);
    return Error{fmt::format("binding store {}: {}", url_.text, err), kExitIo};
  }
  template <class T>
  T give_back(Conn& c, T value) {
    release(c, true);
    return value;
  }

  Expected<Reply> call(const std::vector<std::string>& args) {
    auto conn = acquire();
    if (!conn) return conn.error();
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r(
        static_cast<redisReply*>(redisCommandArgv(conn->ctx, static_cast<int>(args.size()), argv.data(), lens.data())));
    if (!r) return lost(*conn);
    release(*conn, true);
    return Expected<Reply>(std::move(r));
  }

  /// Reports the first failure of an outage once on stderr; every pooled connection is dropped.
  void report_down(const std::string& why) {
    bool was = up_.exchange(false);
    epoch_++;
    std::lock_guard lk(report_mu_);
    if (was || !reported_) {
      reported_ = true;
      outages_++;
      diag::warning("", fmt::format("binding store {} is unreachable ({}); this replica routes on its local "
                                    "binding table until it returns",
                                    url_.text, why));
    }
  }

  void report_up() {
    if (up_.exchange(true)) return;
    std::lock_guard lk(report_mu_);
    if (reported_)
      diag::note(fmt::format("binding store {} is reachable again; session bindings are shared", url_.text));
    reported_ = false;
  }

  void enqueue(std::vector<std::string> cmd) {
    if (!up_.load()) {
      async_dropped_++;
      return;
    }
    {
      std::lock_guard lk(q_mu_);
      if (queue_.size() >= 65536) {
        async_dropped_++;
        return;
      }
      queue_.push_back(std::move(cmd));
    }
    q_cv_.notify_all();  // the subscriber's probe sleep waits on this condition variable too
  }

  bool sleep_or_stop(int ms) {
    std::unique_lock lk(q_mu_);
    return q_cv_.wait_for(lk, std::chrono::milliseconds(ms), [&] { return stop_; });
  }

  void notify_changed(const std::string& id, const std::string& parent) {
    std::lock_guard lk(cb_mu_);
    if (changed_) changed_(id, parent);
  }

  void async_loop() {
    const auto period = std::chrono::milliseconds(std::max<uint64_t>(100, ttl_ms_ / 3));
    auto next_refresh = std::chrono::steady_clock::now() + period;
    for (;;) {
      std::deque<std::vector<std::string>> batch;
      {
        std::unique_lock lk(q_mu_);
        q_cv_.wait_until(lk, next_refresh, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;  // pending refreshes are moot: the replica is going away
        batch.swap(queue_);
      }
      if (std::chrono::steady_clock::now() >= next_refresh) {
        next_refresh = std::chrono::steady_clock::now() + period;
        std::function<std::vector<std::pair<std::string, std::string>>()> leased;
        {
          std::lock_guard lk(cb_mu_);
          leased = leased_;
        }
        if (leased && up_.load())
          for (const auto& [id, parent] : leased())
            batch.push_back({"PEXPIRE", key(id, parent), std::to_string(ttl_ms_)});
      }
      if (batch.empty()) continue;
      if (!up_.load()) {
        async_dropped_ += batch.size();
        continue;
      }
      auto conn = acquire();
      if (!conn) {
        async_dropped_ += batch.size();
        continue;
      }
      for (const auto& cmd : batch) {
        std::vector<const char*> argv;
        std::vector<size_t> lens;
        for (const auto& a : cmd) {
          argv.push_back(a.data());
          lens.push_back(a.size());
        }
        redisAppendCommandArgv(conn->ctx, static_cast<int>(cmd.size()), argv.data(), lens.data());
      }
      bool ok = true;
      for (size_t i = 0; i < batch.size() && ok; ++i) {
        redisReply* r = nullptr;
        if (redisGetReply(conn->ctx, reinterpret_cast<void**>(&r)) != REDIS_OK) {
          ok = false;
          async_dropped_ += batch.size() - i;
          lost(*conn);
          break;
        }
        Reply rr(r);
        if (r->type == REDIS_REPLY_ERROR) unexpected(*r);
      }
      if (ok) release(*conn, true);
    }
  }

  void subscriber_loop() {
    while (!stopping()) {
      std::string err;
      redisContext* c = connect(&err);
      if (!c) {
        report_down(err);
        if (sleep_or_stop(kProbeMs)) return;
        continue;
      }
      Reply r(static_cast<redisReply*>(redisCommand(c, "SUBSCRIBE %b", channel_.data(), channel_.size())));
      if (!r || r->type != REDIS_REPLY_ARRAY) {
        report_down(r ? "SUBSCRIBE refused" : c->errstr);
        redisFree(c);
        if (sleep_or_stop(kProbeMs)) return;
        continue;
      }
      r.reset();
      report_up();
      subscribed_ = true;
      notify_changed("", "");  // notifications sent before this subscription were missed
      while (!stopping() && up_.load()) {
        pollfd p{c->fd, POLLIN, 0};
        int n = ::poll(&p, 1, kPollMs);
        if (n == 0) continue;
        if (n < 0 || redisBufferRead(c) != REDIS_OK) {
          report_down(c->err ? c->errstr : "subscription lost");
          break;
        }
        void* raw = nullptr;
        bool bad = false;
        while (redisGetReplyFromReader(c, &raw) == REDIS_OK && raw) {
          Reply m(static_cast<redisReply*>(raw));
          if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && m->element[2]->type == REDIS_REPLY_STRING)
            handle_message(std::string(m->element[2]->str, m->element[2]->len));
          raw = nullptr;
        }
        if (c->err) bad = true;
        if (bad) {
          report_down(c->errstr);
          break;
        }
      }
      subscribed_ = false;
      redisFree(c);
      notify_changed("", "");
      if (!stopping() && !up_.load() && sleep_or_stop(kProbeMs)) return;
    }
  }

  bool stopping() {
    std::lock_guard lk(q_mu_);
    return stop_;
  }

  void handle_message(const std::string& msg) {
    auto sp = msg.find(' ');
    if (sp == std::string::npos) return;
    if (msg.compare(0, sp, origin_) == 0) return;  // this replica's own change
    notifications_++;
    std::string name = msg.substr(sp + 1);
    if (name.rfind("session:", 0) == 0) notify_changed(name.substr(8), "");
    else if (name.rfind("parent:", 0) == 0) notify_changed("", name.substr(7));
  }

  StoreUrl url_;
  uint64_t ttl_ms_;
  std::string channel_, origin_;
  std::atomic<bool> up_{false}, subscribed_{false};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> errors_{0}, outages_{0}, async_dropped_{0}, notifications_{0};
  std::mutex pool_mu_;
  std::vector<Conn> idle_;
  std::mutex report_mu_;
  bool reported_ = false;  ///< the current outage was reported
  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<std::vector<std::string>> queue_;
  bool stop_ = false;
  std::mutex cb_mu_;
  std::function<void(const std::string&, const std::string&)> changed_;
  std::function<std::vector<std::pair<std::string, std::string>>()> leased_;
  std::thread sub_thread_, async_thread_;
};

}  // namespace

std::unique_ptr<BindingStore> make_redis_store(const StoreUrl& url, uint64_t ttl_ms) {
  return std::make_unique<RedisStore>(url, ttl_ms);
}

}  // namespace dyn::serve
