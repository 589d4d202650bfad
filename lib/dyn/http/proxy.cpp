// Streaming reverse proxy on the event loop: Boost.Beast reads the upstream, a coroutine per call
// relays it through the tap to the client connection.
#include "dyn/http/proxy.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <future>
#include <optional>
#include <string_view>
#include <utility>

// <utility> first: Boost 1.74's Asio uses std::exchange without including it.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <fmt/format.h>

#include "dyn/api/api.h"
#include "dyn/base/json.h"
#include "dyn/http/server.h"

namespace dyn::http {

std::string ProxyRequest::bytes() const {
  if (!body) return insert;
  std::string out(*body);
  out.insert(std::min(insert_at, out.size()), insert);
  return out;
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
  Json err = api::error_body(api::Api::kChat, "upstream stream ended early: " + message, "stream_cut", 502);
  Json ev = Json::object();
  ev["type"] = "error";
  ev["error"] = err["error"];
  return "event: error\ndata: " + ev.dump() + "\n\n";
}
}  // namespace

namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

/// A Beast body (BodyWriter concept) that sends a ProxyRequest's body where it lies, with its
/// `insert` spliced in: three buffers in one write, nothing copied (issue 54).
struct SplicedBody {
  struct value_type {
    std::string_view head, insert, tail;
  };
  static std::uint64_t size(const value_type& v) { return v.head.size() + v.insert.size() + v.tail.size(); }
  class writer {
   public:
    using const_buffers_type = std::array<asio::const_buffer, 3>;
    template <bool isRequest, class Fields>
    writer(const bhttp::header<isRequest, Fields>&, const value_type& v) : v_(v) {}
    void init(beast::error_code& ec) { ec = {}; }
    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
      ec = {};
      if (done_) return boost::none;
      done_ = true;
      return {{const_buffers_type{asio::buffer(v_.head.data(), v_.head.size()),
                                  asio::buffer(v_.insert.data(), v_.insert.size()),
                                  asio::buffer(v_.tail.data(), v_.tail.size())},
               false}};
    }

   private:
    const value_type& v_;
    bool done_ = false;
  };
};

using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::redirect_error;
using asio::use_awaitable;

/// One TLS context for all https upstreams: the system's CA certificates, peer verification.
asio::ssl::context& tls_context() {
  static asio::ssl::context* ctx = [] {
    auto* c = new asio::ssl::context(asio::ssl::context::tls_client);
    c->set_default_verify_paths();
    c->set_verify_mode(asio::ssl::verify_peer);
    return c;
  }();
  return *ctx;
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}
}  // namespace

struct UpstreamPool::Idle {
  explicit Idle(tcp::socket s) : sock(std::move(s)) {}
  tcp::socket sock;
  bool taken = false;  // a call has it again: its idle wait's completion means nothing now
  bool dead = false;   // readable while idle: closed by the upstream
};

UpstreamPool::UpstreamPool(UpstreamUrl url, EventLoop& loop, UpstreamTimeouts timeouts)
    : url_(std::move(url)), timeouts_(timeouts), loop_(loop) {}

UpstreamPool::~UpstreamPool() {
  std::lock_guard<std::mutex> lk(mu_);
  beast::error_code ignored;
  for (auto& [ctx, list] : idle_)
    for (auto& i : list) {
      i->taken = true;
      i->sock.close(ignored);
    }
}

void UpstreamPool::close_idle() {
  std::vector<std::pair<const void*, std::vector<std::shared_ptr<Idle>>>> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
    all.swap(idle_);
  }
  for (auto& [ctx, list] : all)
    for (auto& i : list)
      asio::post(i->sock.get_executor(), [i] {
        i->taken = true;
        beast::error_code ignored;
        i->sock.close(ignored);
      });
}

std::shared_ptr<UpstreamPool::Idle> UpstreamPool::take_idle(const asio::any_io_executor& executor) {
  const void* ctx = &asio::query(executor, asio::execution::context);
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [c, list] : idle_) {
    if (c != ctx) continue;
    while (!list.empty()) {
      std::shared_ptr<Idle> i = std::move(list.back());
      list.pop_back();
      if (i->dead) continue;  // closed when its wait completed
      i->taken = true;
      beast::error_code ignored;
      i->sock.cancel(ignored);  // the idle wait; no system call (the reactor keeps the socket)
      return i;
    }
    break;
  }
  return nullptr;
}

void UpstreamPool::put_idle(std::shared_ptr<Idle> idle) {
  const void* ctx = &asio::query(idle->sock.get_executor(), asio::execution::context);
  idle->taken = false;
  // An idle connection is readable only when the upstream closed it (or sent bytes nobody asked
  // for): such a one is dropped before any call sends on it, as curl and cpp-httplib do, so a
  // server's keep-alive timeout does not cost the next request its one retry. Queuing the wait
  // re-registers the socket with epoll, which reports a close that came before it as well.
  idle->sock.async_wait(tcp::socket::wait_read, [i = idle](beast::error_code) {
    if (i->taken) return;
    i->dead = true;
    beast::error_code ignored;
    i->sock.close(ignored);
  });
  std::lock_guard<std::mutex> lk(mu_);
  if (closed_) {  // the server is stopping: a kept connection's wait would hold its loop again
    idle->taken = true;
    beast::error_code ignored;
    idle->sock.close(ignored);
    return;
  }
  for (auto& [c, list] : idle_) {
    if (c != ctx) continue;
    // Enough idle connections for a burst of concurrent streams; beyond that close them.
    std::erase_if(list, [](const std::shared_ptr<Idle>& i) { return i->dead; });
    if (list.size() < 4096) list.push_back(std::move(idle));
    else {
      idle->taken = true;
      beast::error_code ignored;
      idle->sock.close(ignored);
    }
    return;
  }
  idle_.emplace_back(ctx, std::vector<std::shared_ptr<Idle>>{std::move(idle)});
}

/// The upstream connection of one call. Every operation on it runs on `ex`, one loop thread's (a
/// call's I/O never runs on two threads at once; a handler thread only waits for results).
/// A plain upstream's read timeout is a lazy deadline: one timer per call, moved only when it
/// fires before the deadline, instead of a timer re-armed on every read (issue 16).
struct ProxyCall::Io {
  static constexpr size_t kReadSize = 16384;
  Io(EventLoop& loop, asio::any_io_executor e) : ex(e ? std::move(e) : loop.next_executor()), deadline(ex) {}
  asio::any_io_executor ex;
  std::weak_ptr<ProxyCall> owner;  // a deadline that finds the call gone does nothing
  ProxyRequest request;
  bhttp::request<SplicedBody> req;       // request.body's bytes where they lie, request.insert spliced in
  std::optional<beast::tcp_stream> tcp;  // plain upstreams
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;  // https upstreams
  beast::flat_buffer buf;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser;
  std::array<char, 16384> piece;  // not zeroed (16 KiB a call): only the bytes a read put there are read

  asio::steady_timer deadline;
  bool deadline_armed = false;
  bool reading = false;  // a read of a plain upstream is in flight
  bool read_timed_out = false;
  beast::error_code read_ec;                        // the error of the read_op in flight
  std::chrono::steady_clock::time_point last_read;  // the upstream's last bytes (or the request sent)

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *tcp; }
  /// Closes the socket from outside the coroutine that uses it (its pending operation ends with
  /// an error); the stream objects stay until that coroutine closes them (close), since a TLS
  /// stream must outlive its pending operation.
  void abort_io() {
    beast::error_code ignored;
    if (tcp || tls) lowest().socket().close(ignored);
    deadline.cancel();
    deadline_armed = false;
  }
  void close() {
    beast::error_code ignored;
    if (tcp || tls) lowest().socket().close(ignored);
    tls.reset();
    tcp.reset();
    deadline.cancel();
    deadline_armed = read_timed_out = false;
  }
  /// The read timeout: fires at the last read + read_s; when bytes came since it was set, it is
  /// moved to the new deadline; when none came and a read is in flight, the read is cancelled
  /// and fails with beast::error::timeout.
  void arm_deadline(double read_s) {
    if (deadline_armed) return;
    deadline_armed = true;
    deadline.expires_at(last_read + seconds(read_s));
    deadline.async_wait([this, w = owner, read_s](beast::error_code ec) {
      const auto alive = w.lock();
      if (!alive || ec) return;  // the call is gone, or the timer was cancelled or moved
      deadline_armed = false;
      if (!reading || !tcp) return;  // no read now: the next read sets it again
      if (std::chrono::steady_clock::now() < last_read + seconds(read_s)) return arm_deadline(read_s);
      read_timed_out = true;
      beast::error_code ignored;
      tcp->socket().cancel(ignored);
    });
  }
  /// Starts appending what a plain upstream sends next (up to kReadSize bytes) to `buf`: co_await
  /// it and hand the byte count to read_done. (Awaited in place rather than through a coroutine
  /// of its own: one frame fewer per streamed chunk, issue 16.)
  auto read_op(double read_s) {
    arm_deadline(read_s);
    reading = true;
    return tcp->socket().async_read_some(buf.prepare(kReadSize), redirect_error(use_awaitable, read_ec));
  }
  /// Ends a read_op of `n` bytes. When the upstream closed the connection, the parser is told
  /// (see on_eof). Errors: the socket's, the parser's, beast::error::timeout.
  beast::error_code read_done(size_t n) {
    reading = false;
    if (read_timed_out) return beast::error::timeout;
    buf.commit(n);
    if (n > 0) last_read = std::chrono::steady_clock::now();
    beast::error_code ec = read_ec;
    if (ec == asio::error::eof) on_eof(ec);
    return ec;
  }
  /// The upstream closed the connection: the end of a body that runs to the close, or (as Beast
  /// reports it) a message cut short.
  void on_eof(beast::error_code& ec) {
    ec = {};
    if (parser->got_some()) parser->put_eof(ec);
    else ec = bhttp::error::end_of_stream;
  }
  /// Reads the response's status line and headers (a plain upstream; the request was just sent).
  awaitable<beast::error_code> read_header(double read_s) {
    last_read = std::chrono::steady_clock::now();
    for (;;) {
      beast::error_code ec = read_done(co_await read_op(read_s));
      if (!ec) {
        buf.consume(parser->put(buf.data(), ec));
        if (ec == bhttp::error::need_more) continue;
      }
      if (!ec && !parser->is_header_done()) continue;
      co_return ec;
    }
  }
  /// A piece of the body in `piece`: its size, and the error (need_buffer is not one: the piece
  /// is full).
  using Piece = std::pair<size_t, beast::error_code>;
  /// Starts the next piece and parses into it what `buf` already holds: the piece when that is
  /// enough (or the body has ended), else nullopt: read_op, then next_piece, until there is one.
  std::optional<Piece> begin_piece() {
    if (parser->is_done()) return Piece{0, {}};
    parser->get().body().data = piece.data();
    parser->get().body().size = piece.size();
    return next_piece({});
  }
  /// After a read that ended with `ec`: the piece once it has bytes, or the body ended or failed.
  std::optional<Piece> next_piece(beast::error_code ec) {
    if (!ec) parse_buffered(ec);
    const size_t got = piece.size() - parser->get().body().size;
    if (ec || parser->is_done() || got > 0) return Piece{got, ec};
    return std::nullopt;
  }
  /// Reads the next piece of the body (a TLS upstream's read may yield an empty one).
  awaitable<Piece> read_piece(double read_s) {
    std::optional<Piece> r = begin_piece();
    if (!r && tls) {
      beast::error_code ec;
      lowest().expires_after(seconds(read_s));
      co_await bhttp::async_read_some(*tls, buf, *parser, redirect_error(use_awaitable, ec));
      if (ec == bhttp::error::need_buffer) ec = {};
      co_return next_piece(ec).value_or(Piece{0, {}});
    }
    while (!r) r = next_piece(read_done(co_await read_op(read_s)));
    co_return *r;
  }
  /// Parses what `buf` already holds into the rest of `piece`, without I/O. Beast's read yields
  /// one chunk at a time, so without this every chunk that came with one read cost the client a
  /// write of its own (nginx relays what a read returned in one write).
  void parse_buffered(beast::error_code& ec) {
    auto& p = *parser;
    while (buf.size() > 0 && !p.is_done() && p.get().body().size > 0) {
      const size_t used = p.put(buf.data(), ec);
      buf.consume(used);
      if (ec == bhttp::error::need_more) ec = {};
      if (ec || used == 0) return;
    }
  }
};

ProxyCall::ProxyCall(UpstreamPool& pool, ProxyRequest request, std::shared_ptr<StreamTap> tap, const Clock& clock,
                     asio::any_io_executor executor)
    : pool_(pool), tap_(std::move(tap)), clock_(clock), io_(std::make_unique<Io>(pool.loop(), executor)) {
  io_->request = std::move(request);
}

std::shared_ptr<ProxyCall> ProxyCall::start(UpstreamPool& pool, ProxyRequest request, std::shared_ptr<StreamTap> tap,
                                            const Clock& clock, asio::any_io_executor executor) {
  auto call =
      std::shared_ptr<ProxyCall>(new ProxyCall(pool, std::move(request), std::move(tap), clock, std::move(executor)));
  call->io_->owner = call;
  return call;
}

// No operation is running when the last reference goes (each holds one).
ProxyCall::~ProxyCall() { stop_upstream(); }

void ProxyCall::start_async(std::function<void(bool)> on_headers) {
  auto self = shared_from_this();
  asio::co_spawn(
      io_->ex, [self]() { return self->exchange(); },
      [self, cb = std::move(on_headers)](std::exception_ptr) { cb(self->have_response_); });
}

namespace {
/// Waits on the calling thread (never a loop thread: the loop does the work) until `start(done)`
/// has called done.
template <class Start>
void wait_for(Start start) {
  auto p = std::make_shared<std::promise<void>>();
  std::future<void> f = p->get_future();
  start([p] { p->set_value(); });
  f.wait();
}
}  // namespace

bool ProxyCall::wait_response() {
  wait_for([&](auto done) { start_async([done](bool) { done(); }); });
  return have_response_;
}

awaitable<void> ProxyCall::exchange() {
  Io& x = *io_;
  ProxyRequest& request = x.request;
  auto& r = x.req;
  r.version(11);
  r.method_string(request.method);
  r.target(pool_.url().path_prefix + request.path);
  bool have_ct = false;
  const std::vector<std::string> nominated = connection_nominated(request.headers);
  for (const auto& [k, v] : request.headers) {
    if (!forwardable_header(k, nominated)) continue;
    // Never forward a CR/LF/NUL byte (header injection upstream); callers reject such requests.
    if (k.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos ||
        v.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
      continue;
    if (header_name_equal(k, "content-type")) have_ct = true;
    r.insert(k, v);
  }
  // The URL's canonical authority: "host:port", "[v6]:port", or the host alone on the default port.
  const std::string& shp = pool_.url().scheme_host_port;
  r.set(bhttp::field::host, shp.substr(shp.find("://") + 3));
  const std::string_view body = request.body ? std::string_view(*request.body) : std::string_view();
  const size_t at = std::min(request.insert_at, body.size());
  r.body() = {body.substr(0, at), request.insert, body.substr(at)};
  if (!have_ct && SplicedBody::size(r.body()) > 0) r.set(bhttp::field::content_type, request.content_type);
  r.set(bhttp::field::accept_encoding, "identity");
  r.keep_alive(true);
  r.prepare_payload();
  const UpstreamTimeouts& to = pool_.timeouts();
  const UpstreamUrl& url = pool_.url();

  std::string err;
  // A pooled keep-alive connection may have been closed by the upstream just now; when such a
  // connection fails before any response byte, try once more on a fresh connection.
  for (int attempt = 0; attempt < 2 && !client_gone_; ++attempt) {
    x.close();
    x.buf.clear();
    std::shared_ptr<UpstreamPool::Idle> idle = url.tls || attempt > 0 ? nullptr : pool_.take_idle(x.ex);
    const bool fresh = !idle;
    beast::error_code ec;
    if (!fresh) {
      x.tcp.emplace(std::move(idle->sock));
    } else {
      tcp::resolver resolver(x.ex);
      auto endpoints = co_await resolver.async_resolve(url.host, url.port, redirect_error(use_awaitable, ec));
      if (!ec && client_gone_) ec = asio::error::operation_aborted;  // never connect for nobody
      if (!ec) {
        if (url.tls) x.tls.emplace(x.ex, tls_context());
        else x.tcp.emplace(x.ex);
        x.lowest().expires_after(seconds(to.connect_s));
        co_await x.lowest().async_connect(endpoints, redirect_error(use_awaitable, ec));
      }
      if (!ec) x.lowest().socket().set_option(tcp::no_delay(true), ec);
      if (!ec && x.tls) {
        // SNI and the certificate's host name, as any HTTPS client checks them.
        SSL_set_tlsext_host_name(x.tls->native_handle(), url.host.c_str());
        x.tls->set_verify_callback(asio::ssl::host_name_verification(url.host));
        x.lowest().expires_after(seconds(to.connect_s));
        co_await x.tls->async_handshake(asio::ssl::stream_base::client, redirect_error(use_awaitable, ec));
      }
      if (ec) {
        err = fmt::format("cannot connect to {}: {}", url.scheme_host_port, ec.message());
        break;
      }
    }
    if (!ec && client_gone_) ec = asio::error::operation_aborted;  // never send a request for nobody
    if (!ec) {
      x.lowest().expires_after(seconds(to.read_s));
      if (x.tls) co_await bhttp::async_write(*x.tls, r, redirect_error(use_awaitable, ec));
      else co_await bhttp::async_write(*x.tcp, r, redirect_error(use_awaitable, ec));
      x.lowest().expires_never();
    }
    if (!ec) {
      x.parser.emplace();
      // A proxy relays any length. Not boost::none: Beast 1.74 compares a Content-Length with the
      // empty optional as if it were a limit below every value and fails every sized body.
      x.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      x.parser->header_limit(256 * 1024);  // Beast's default 8 KiB is below what servers send
      if (x.tls) {
        x.lowest().expires_after(seconds(to.read_s));
        co_await bhttp::async_read_header(*x.tls, x.buf, *x.parser, redirect_error(use_awaitable, ec));
      } else {
        ec = co_await x.read_header(to.read_s);
      }
    }
    if (!ec) {
      const double t = clock_.now_ms();
      const auto& msg = x.parser->get();
      status_ = static_cast<int>(msg.result_int());
      for (const auto& f : msg) headers_.emplace(std::string(f.name_string()), std::string(f.value()));
      if (tap_) tap_->on_response(status_, headers_, t);
      have_response_ = true;
      co_return;
    }
    // A timed-out request may be running upstream, so it is never sent again.
    if (ec == beast::error::timeout) {
      timed_out_ = true;
      err = fmt::format("no response headers within {:g} s (read timeout)", to.read_s);
      break;
    }
    err = ec.message();
    if (fresh) break;
  }
  x.close();
  done_ = true;
  if (client_gone_) err = "client went away";  // whatever the socket said, the close was ours
  error_ = err;
}

std::string ProxyCall::error() const { return error_; }

std::string ProxyCall::content_type() const {
  auto it = headers_.find("Content-Type");
  return it == headers_.end() ? std::string() : it->second;
}

bool ProxyCall::is_event_stream() const { return content_type().rfind("text/event-stream", 0) == 0; }

void ProxyCall::stop_upstream() {
  if (done_) return;
  done_ = true;
  if (error_.empty() && !body_complete_) error_ = "cancelled";
  io_->abort_io();
}

void ProxyCall::cancel() {
  auto self = shared_from_this();
  asio::dispatch(io_->ex, [self] { self->stop_upstream(); });
}

void ProxyCall::cancel_for_client() {
  client_gone_ = true;
  auto self = shared_from_this();
  asio::dispatch(io_->ex, [self] {
    if (self->error_.empty() && !self->body_complete_) self->error_ = "client went away";
    self->stop_upstream();
  });
}

bool ProxyCall::take_piece(size_t n, boost::system::error_code ec, std::string& out) {
  Io& x = *io_;
  if (n > 0) {
    const std::string_view data(x.piece.data(), n);
    if (tap_) tap_->on_data(data, clock_.now_ms(), out);
    else out.append(data);
  }
  if (ec) {
    done_ = true;
    if (error_.empty())
      error_ = ec == beast::error::timeout
                   ? fmt::format("no data within {:g} s (read timeout)", pool_.timeouts().read_s)
                   : ec.message();
    x.close();
    return true;
  }
  if (!x.parser->is_done()) return false;
  done_ = true;
  body_complete_ = true;
  // Back to the pool only when both sides keep the connection and nothing unread is left.
  if (!x.tls && x.parser->keep_alive() && x.buf.size() == 0) {
    pool_.put_idle(std::make_shared<UpstreamPool::Idle>(x.tcp->release_socket()));
  }
  x.close();
  return true;
}

void ProxyCall::finish_once(ProxyOutcome::Kind kind) {
  if (ended_) return;
  ended_ = true;
  ProxyOutcome o;
  o.kind = kind;
  o.status = status_;
  o.message = kind == ProxyOutcome::Kind::kOk ? "" : error_;
  o.end_ms = clock_.now_ms();
  if (auto cb = std::move(on_end_)) cb(o);
}

void ProxyCall::relay(ServerResponse& res, const std::vector<std::pair<std::string, std::string>>& extra_headers,
                      std::function<void(const ProxyOutcome&)> on_end, std::function<void()> ready) {
  on_end_ = std::move(on_end);
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
  auto self = shared_from_this();

  if (!is_event_stream()) {
    // A whole body (JSON answers, model lists): read on the loop, then answered with a length.
    auto body = std::make_shared<std::string>();
    asio::co_spawn(
        io_->ex,
        [self, body]() -> awaitable<void> {
          while (!self->done_) {
            auto [n, ec] = co_await self->io_->read_piece(self->pool_.timeouts().read_s);
            self->take_piece(n, ec, *body);
          }
        },
        [self, body, &res, ct, extra_headers, ready = std::move(ready)](std::exception_ptr) {
          if (self->tap_) self->tap_->on_end(self->clock_.now_ms(), *body);
          if (self->body_complete_) {
            res.set_content(std::move(*body), ct);
            self->finish_once(ProxyOutcome::Kind::kOk);
          } else if (self->client_gone_) {
            // Nobody reads the answer; the worker saw its request dropped.
            set_error(res, 499, "cancelled", "client went away");
            self->finish_once(ProxyOutcome::Kind::kCancelled);
          } else {
            res.headers.clear();
            for (const auto& [k, v] : extra_headers) res.headers.emplace(k, v);
            set_error(res, 502, "stream_cut", "upstream response ended early: " + self->error_);
            self->finish_once(ProxyOutcome::Kind::kStreamCut);
          }
          ready();
        });
    return;
  }
  // SSE: relayed on the loop piece by piece as it arrives, byte for byte (the server never
  // compresses it).
  res.headers.emplace("Content-Type", ct);
  res.stream = [self](std::shared_ptr<BodyStream> out) {
    // The server closing the connection (stop) ends the upstream read at once.
    out->on_close([self] {
      asio::dispatch(self->io_->ex, [self] {
        self->client_gone_ = true;
        self->stop_upstream();
      });
    });
    asio::co_spawn(self->io_->ex, self->pump(out), asio::detached);
  };
  ready();
}

void ProxyCall::continue_stream(std::shared_ptr<BodyStream> out, std::function<void(const ProxyOutcome&)> on_end) {
  on_end_ = std::move(on_end);
  auto self = shared_from_this();
  out->on_close([self] {
    asio::dispatch(self->io_->ex, [self] {
      self->client_gone_ = true;
      self->stop_upstream();
    });
  });
  asio::co_spawn(io_->ex, pump(std::move(out)), asio::detached);
}

void ProxyCall::cut_stream(std::shared_ptr<BodyStream> out, const std::string& error) {
  out->write(cut_event(error), [out](bool) { out->abort(); });
}

void ProxyCall::relay_blocking(ServerResponse& res,
                               const std::vector<std::pair<std::string, std::string>>& extra_headers,
                               std::function<void(const ProxyOutcome&)> on_end) {
  wait_for([&](auto done) { relay(res, extra_headers, std::move(on_end), done); });
}

awaitable<void> ProxyCall::pump(std::shared_ptr<BodyStream> out) {
  auto self = shared_from_this();
  // Resumes on this call's loop thread once the client side has taken a chunk.
  asio::use_awaitable_t<> token;
  auto send = [&](std::string data) {
    return asio::async_initiate<asio::use_awaitable_t<>, void(bool)>(
        [out, data = std::move(data)](auto handler) mutable {
          auto h = std::make_shared<decltype(handler)>(std::move(handler));
          out->write(std::move(data), [h](bool ok) {
            auto ex = asio::get_associated_executor(*h);
            asio::dispatch(ex, [h, ok] { (*h)(ok); });
          });
        },
        token);
  };
  // Most chunks are written from this turn (the client's socket takes them at once); only the
  // others suspend the relay until written.
  using TryWrite = BodyStream::TryWrite;
  auto write_now = [&](std::string& data) { return data.empty() ? TryWrite::kTaken : out->try_write(data); };
  const double read_s = pool_.timeouts().read_s;
  for (;;) {
    std::string chunk;
    bool done = done_;
    if (!done) {
      // A plain upstream's reads are awaited here rather than through read_piece: one coroutine
      // frame fewer per chunk.
      std::optional<Io::Piece> r;
      if (io_->tls) r = co_await io_->read_piece(read_s);
      else r = io_->begin_piece();
      while (!r) r = io_->next_piece(io_->read_done(co_await io_->read_op(read_s)));
      done = take_piece(r->first, r->second, chunk);
    }
    if (client_gone_) break;
    if (done) {
      if (!body_complete_ && continuation_ && continuation_->may_continue(error_)) {
        // Migration: the complete events go out, the partial one is dropped (never the client's),
        // and the client's stream passes to the continuation, which ends the exchange.
        if (auto w = write_now(chunk);
            w == TryWrite::kClosed || (w == TryWrite::kNotNow && !co_await send(std::move(chunk))))
          break;
        out->on_close([] {});  // the continuation's call watches the client from now on
        continuation_->take(std::move(out));
        continuation_.reset();
        co_return;
      }
      if (tap_) tap_->on_end(clock_.now_ms(), chunk);
      if (!body_complete_) {
        // Record the cut before the client can see it, so a client that retries at once meets
        // a router that already knows the worker failed.
        finish_once(ProxyOutcome::Kind::kStreamCut);
        chunk += cut_event(error_);
        co_await send(std::move(chunk));
        out->abort();  // the client sees an incomplete response
        co_return;
      }
      if (auto w = write_now(chunk);
          w == TryWrite::kClosed || (w == TryWrite::kNotNow && !co_await send(std::move(chunk))))
        break;
      // End the exchange (lease, trace row) before the terminating chunk, so a client that sends
      // its next turn at once finds the previous lease released.
      finish_once(ProxyOutcome::Kind::kOk);
      out->end();
      co_return;
    }
    if (auto w = write_now(chunk);
        w == TryWrite::kClosed || (w == TryWrite::kNotNow && !co_await send(std::move(chunk))))
      break;
  }
  // The client went away (or the server is closing): the upstream request is stopped.
  stop_upstream();
  finish_once(ProxyOutcome::Kind::kCancelled);
}

}  // namespace dyn::http
