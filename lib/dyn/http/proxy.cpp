// Streaming reverse proxy: one upstream thread per exchange feeding the server's chunked provider.
#include "dyn/http/proxy.h"

#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "dyn/base/json.h"
#include "dyn/http/server.h"

namespace dyn::http {

Expected<UpstreamUrl> UpstreamUrl::parse(std::string_view url) {
  UpstreamUrl u;
  u.text = std::string(url);
  auto bad = [&] { return Error{"bad upstream url '" + std::string(url) + "' (want http://HOST:PORT)", kExitUsage}; };
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return bad();
  std::string_view scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return bad();
  size_t host_start = scheme_end + 3;
  size_t path_start = url.find('/', host_start);
  std::string_view host =
      url.substr(host_start, path_start == std::string_view::npos ? std::string_view::npos : path_start - host_start);
  if (host.empty()) return bad();
  u.scheme_host_port = std::string(url.substr(0, host_start)) + std::string(host);
  std::string prefix = path_start == std::string_view::npos ? "" : std::string(url.substr(path_start));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0) prefix.resize(prefix.size() - 3);
  u.path_prefix = prefix;
  return u;
}

UpstreamPool::UpstreamPool(UpstreamUrl url, UpstreamTimeouts timeouts) : url_(std::move(url)), timeouts_(timeouts) {}

std::unique_ptr<httplib::Client> UpstreamPool::acquire() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<httplib::Client>(url_.scheme_host_port);
  auto secs = [](double s) { return std::chrono::microseconds(static_cast<int64_t>(s * 1e6)); };
  c->set_connection_timeout(secs(timeouts_.connect_s));
  c->set_read_timeout(secs(timeouts_.read_s));
  c->set_write_timeout(secs(timeouts_.read_s));
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  return c;
}

void UpstreamPool::release(std::unique_ptr<httplib::Client> client, bool reusable) {
  if (!reusable || !client) return;
  std::lock_guard<std::mutex> lk(mu_);
  // Enough idle connections for a burst of concurrent streams; beyond that close them.
  if (idle_.size() < 4096) idle_.push_back(std::move(client));
}

const char* outcome_name(ProxyOutcome::Kind k) {
  switch (k) {
    case ProxyOutcome::Kind::kOk: return "ok";
    case ProxyOutcome::Kind::kTransport: return "connection";
    case ProxyOutcome::Kind::kStreamCut: return "stream_cut";
    case ProxyOutcome::Kind::kCancelled: return "cancelled";
  }
  return "?";
}

bool forwardable_header(std::string_view n) {
  static const char* const kDrop[] = {"connection",
                                      "keep-alive",
                                      "te",
                                      "trailer",
                                      "transfer-encoding",
                                      "upgrade",
                                      "host",
                                      "content-length",
                                      "accept-encoding",
                                      "proxy-connection",
                                      "proxy-authorization",
                                      "proxy-authenticate",
                                      "remote_addr",
                                      "remote_port",
                                      "local_addr",
                                      "local_port",
                                      "expect"};
  for (const char* d : kDrop) {
    if (header_name_equal(n, d)) return false;
  }
  return true;
}

std::vector<std::string> connection_nominated(const httplib::Headers& headers) {
  std::vector<std::string> out;
  for (const auto& [k, v] : headers) {
    if (!header_name_equal(k, "connection") && !header_name_equal(k, "proxy-connection")) continue;
    size_t p = 0;
    while (p <= v.size()) {
      size_t comma = v.find(',', p);
      std::string_view tok = std::string_view(v).substr(p, comma == std::string::npos ? std::string::npos : comma - p);
      while (!tok.empty() && (tok.front() == ' ' || tok.front() == '\t')) tok.remove_prefix(1);
      while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\t')) tok.remove_suffix(1);
      if (!tok.empty()) out.emplace_back(tok);
      if (comma == std::string::npos) break;
      p = comma + 1;
    }
  }
  return out;
}

bool forwardable_header(std::string_view name, const std::vector<std::string>& nominated) {
  if (!forwardable_header(name)) return false;
  for (const auto& n : nominated)
    if (header_name_equal(name, n)) return false;
  return true;
}

namespace {
/// Response headers not copied from the upstream: hop-by-hop ones (RFC 9110 7.6.1, including
/// Proxy-Authenticate/-Authorization), the framing cpp-httplib sets itself, and Content-Type
/// (set with the body).
bool response_header_copyable(std::string_view n) {
  static const char* const kDrop[] = {"connection",
                                      "keep-alive",
                                      "transfer-encoding",
                                      "content-length",
                                      "content-type",
                                      "content-encoding",
                                      "trailer",
                                      "upgrade",
                                      "te",
                                      "proxy-connection",
                                      "proxy-authenticate",
                                      "proxy-authorization"};
  for (const char* d : kDrop) {
    if (header_name_equal(n, d)) return false;
  }
  return true;
}

std::string cut_event(const std::string& message) {
  Json err = openai_error_body("upstream stream ended early: " + message, "stream_cut", 502);
  Json ev = Json::object();
  ev["type"] = "error";
  ev["error"] = err["error"];
  return "event: error\ndata: " + ev.dump() + "\n\n";
}
}  // namespace

ProxyCall::ProxyCall(UpstreamPool& pool, std::shared_ptr<StreamTap> tap, const Clock& clock)
    : pool_(pool), tap_(std::move(tap)), clock_(clock) {}

std::shared_ptr<ProxyCall> ProxyCall::start(UpstreamPool& pool, ProxyRequest request, std::shared_ptr<StreamTap> tap,
                                            const Clock& clock) {
  std::shared_ptr<ProxyCall> call(new ProxyCall(pool, std::move(tap), clock));
  // The thread holds a raw pointer: the destructor stops and joins it, so it never outlives the call.
  call->thread_ = std::thread([p = call.get(), r = std::move(request)]() mutable { p->run(std::move(r)); });
  return call;
}

ProxyCall::~ProxyCall() {
  stop_upstream();
  join();
}

void ProxyCall::run(ProxyRequest request) {
  httplib::Request r;
  r.method = request.method;
  r.path = pool_.url().path_prefix + request.path;
  bool have_ct = false;
  const std::vector<std::string> nominated = connection_nominated(request.headers);
  for (const auto& [k, v] : request.headers) {
    if (!forwardable_header(k, nominated)) continue;
    // Never forward a CR/LF/NUL byte (header injection upstream); callers reject such requests.
    if (k.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos ||
        v.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
      continue;
    if (header_name_equal(k, "content-type")) have_ct = true;
    r.headers.emplace(k, v);
  }
  if (!have_ct && !request.body.empty()) r.headers.emplace("Content-Type", request.content_type);
  r.headers.emplace("Accept-Encoding", "identity");
  r.body = std::move(request.body);
  r.response_handler = [this](const httplib::Response& res) {
    double t = clock_.now_ms();
    if (tap_) tap_->on_response(res.status, res.headers, t);
    std::lock_guard<std::mutex> lk(mu_);
    status_ = res.status;
    headers_ = res.headers;
    have_response_ = true;
    cv_.notify_all();
    return !client_gone_ && !stopped_;
  };
  r.content_receiver = [this](const char* d, size_t n, uint64_t, uint64_t) {
    double t = clock_.now_ms();
    std::lock_guard<std::mutex> lk(mu_);
    if (client_gone_ || stopped_) return false;
    queue_.emplace_back(t, std::string(d, n));
    cv_.notify_all();
    return true;
  };

  bool ok = false;
  std::string err;
  // A pooled keep-alive connection may have been closed by the upstream just now; when such a
  // connection fails before any response byte, try once more on a fresh connection.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto cli = pool_.acquire();
    bool fresh = !cli->is_socket_open();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopped_) break;
      active_ = cli.get();
    }
    httplib::Response res;
    httplib::Error e = httplib::Error::Success;
    const auto sent_at = std::chrono::steady_clock::now();
    ok = cli->send(r, res, e);
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent_at).count();
    bool got_response;
    {
      std::lock_guard<std::mutex> lk(mu_);
      active_ = nullptr;
      got_response = have_response_;
    }
    // cpp-httplib reports a read timeout and a reset alike (Error::Read); the time spent tells
    // them apart. A timed-out request may be running upstream, so it is never sent again.
    bool timed_out = !ok && !got_response && e == httplib::Error::Read && waited_s >= pool_.timeouts().read_s * 0.9;
    if (!ok) {
      err = timed_out ? fmt::format("no response headers within {:g} s (read timeout)", pool_.timeouts().read_s)
                      : httplib::to_string(e);
    }
    pool_.release(std::move(cli), ok && !stopped_);
    if (timed_out) {
      std::lock_guard<std::mutex> lk(mu_);
      timed_out_ = true;
    }
    if (ok || got_response || fresh || timed_out) break;
  }
  std::lock_guard<std::mutex> lk(mu_);
  done_ = true;
  body_complete_ = ok;
  if (!ok) error_ = stopped_ || client_gone_ ? "cancelled" : err;
  cv_.notify_all();
}

bool ProxyCall::wait_response() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return have_response_ || done_; });
  return have_response_;
}

std::string ProxyCall::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

std::string ProxyCall::content_type() const {
  auto it = headers_.find("Content-Type");
  return it == headers_.end() ? std::string() : it->second;
}

bool ProxyCall::is_event_stream() const { return content_type().rfind("text/event-stream", 0) == 0; }

void ProxyCall::stop_upstream() {
  std::lock_guard<std::mutex> lk(mu_);
  stopped_ = true;
  if (active_ && !done_) active_->stop();
  cv_.notify_all();
}

void ProxyCall::join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void ProxyCall::cancel() {
  stop_upstream();
  join();
}

bool ProxyCall::drain(std::string& out, bool block) {
  std::vector<std::pair<double, std::string>> q;
  bool done;
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (block) cv_.wait(lk, [&] { return !queue_.empty() || done_; });
    q.swap(queue_);
    done = done_;
  }
  for (auto& [t, s] : q) {
    if (tap_) {
      tap_->on_data(s, t, out);
    } else {
      out.append(s);
    }
  }
  return done;
}

void ProxyCall::finish_once(ProxyOutcome::Kind kind) {
  ProxyOutcome o;
  std::function<void(const ProxyOutcome&)> cb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (ended_) return;
    ended_ = true;
    o.kind = kind;
    o.status = status_;
    o.message = kind == ProxyOutcome::Kind::kOk ? "" : error_;
    cb = std::move(on_end_);
  }
  o.end_ms = clock_.now_ms();
  if (cb) cb(o);
}

void ProxyCall::relay(const httplib::Request& req, httplib::Response& res,
                      const std::vector<std::pair<std::string, std::string>>& extra_headers,
                      std::function<void(const ProxyOutcome&)> on_end) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    on_end_ = std::move(on_end);
  }
  res.status = status_;
  const std::vector<std::string> nominated = connection_nominated(headers_);
  for (const auto& [k, v] : headers_) {
    if (!response_header_copyable(k)) continue;
    bool hop = false;  // named in the upstream's Connection header: this hop only (RFC 9110 7.6.1)
    for (const auto& n : nominated) hop = hop || header_name_equal(k, n);
    if (hop) continue;
    if (v.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) continue;
    bool replaced = false;  // the proxy's own value wins (e.g. a worker's x-dyn-worker)
    for (const auto& e : extra_headers) replaced = replaced || header_name_equal(k, e.first);
    if (!replaced) res.headers.emplace(k, v);
  }
  for (const auto& [k, v] : extra_headers) res.headers.emplace(k, v);
  std::string ct = content_type();
  if (ct.empty()) ct = "application/octet-stream";

  if (!is_event_stream()) {
    std::string body;
    while (!drain(body, true)) {
    }
    drain(body, false);
    if (tap_) tap_->on_end(clock_.now_ms(), body);
    join();
    bool complete;
    std::string err;
    {
      std::lock_guard<std::mutex> lk(mu_);
      complete = body_complete_;
      err = error_;
    }
    if (complete) {
      res.set_content(body, ct);
      finish_once(ProxyOutcome::Kind::kOk);
    } else {
      res.headers.clear();
      for (const auto& [k, v] : extra_headers) res.headers.emplace(k, v);
      set_error(res, 502, "stream_cut", "upstream response ended early: " + err);
      finish_once(ProxyOutcome::Kind::kStreamCut);
    }
    return;
  }

  // SSE must reach the client byte for byte and unbuffered: cpp-httplib would gzip a
  // "text/event-stream; charset=..." body for a client that accepts gzip, so drop that wish.
  const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
  auto self = shared_from_this();
  auto result = std::make_shared<std::optional<ProxyOutcome::Kind>>();
  res.set_chunked_content_provider(
      ct,
      [self, result](size_t, httplib::DataSink& sink) {
        std::string out;
        bool done = self->drain(out, true);
        if (done) self->drain(out, false);
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          {
            std::lock_guard<std::mutex> lk(self->mu_);
            self->client_gone_ = true;
          }
          *result = ProxyOutcome::Kind::kCancelled;
          self->stop_upstream();
          return false;
        }
        if (!done) return true;
        std::string tail;
        if (self->tap_) self->tap_->on_end(self->clock_.now_ms(), tail);
        bool complete;
        std::string err;
        {
          std::lock_guard<std::mutex> lk(self->mu_);
          complete = self->body_complete_;
          err = self->error_;
        }
        if (complete) {
          if (!tail.empty() && !sink.write(tail.data(), tail.size())) {
            *result = ProxyOutcome::Kind::kCancelled;
            return false;
          }
          // End the exchange (lease, trace row) before the terminating chunk, so a client that
          // sends its next turn at once finds the previous lease released.
          *result = ProxyOutcome::Kind::kOk;
          self->finish_once(ProxyOutcome::Kind::kOk);
          sink.done();
          return true;
        }
        // Record the cut before the client can see it, so a client that retries at once meets
        // a router that already knows the worker failed.
        *result = ProxyOutcome::Kind::kStreamCut;
        self->finish_once(ProxyOutcome::Kind::kStreamCut);
        tail += cut_event(err);
        sink.write(tail.data(), tail.size());
        return false;  // abort the chunked body: the client sees an incomplete response
      },
      [self, result](bool success) {
        if (!result->has_value()) {
          // The client went away before the body was relayed (or the server is stopping).
          {
            std::lock_guard<std::mutex> lk(self->mu_);
            self->client_gone_ = true;
          }
          self->stop_upstream();
          // Even with success (cpp-httplib ends a chunked body early when its server stops) the
          // client never got the whole response: never record it as ok.
          (void)success;
          *result = ProxyOutcome::Kind::kCancelled;
        }
        self->join();
        self->finish_once(**result);
      });
}

}  // namespace dyn::http
