// The event-loop HTTP/1.1 server: Beast's request parser, responses written by hand (status line,
// headers, Content-Length or chunked framing), handlers on an elastic pool.
#include "dyn/http/event_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <limits>
#include <optional>
#include <unordered_map>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/base/json.h"

namespace dyn::http {

namespace {  // the same aliases as proxy.cpp's, so a unity build sees one declaration twice
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
}  // namespace

// ---- HandlerPool -------------------------------------------------------------------------------

HandlerPool::HandlerPool(size_t max_threads, double idle_s) : max_(max_threads ? max_threads : 1), idle_s_(idle_s) {}

HandlerPool::~HandlerPool() { join(); }

void HandlerPool::post(std::function<void()> task) {
  std::lock_guard lk(mu_);
  if (stopping_) return;
  queue_.push_back(std::move(task));
  // A new thread only when every idle one already has a task waiting for it.
  if (queue_.size() <= idle_) {
    cv_.notify_one();
  } else if (alive_ < max_) {
    ++alive_;
    std::thread([this] { worker(); }).detach();
  }
}

void HandlerPool::worker() {
  std::unique_lock lk(mu_);
  const auto idle_for = std::chrono::duration<double>(idle_s_);
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) break;
      ++idle_;
      bool woke = cv_.wait_for(lk, idle_for, [&] { return !queue_.empty() || stopping_; });
      --idle_;
      if (!woke) break;  // idle too long: the pool shrinks back
      continue;
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    task();
    task = nullptr;  // its captures go before the lock is taken again
    lk.lock();
  }
  --alive_;
  cv_.notify_all();  // join() waits for alive_ == 0
}

void HandlerPool::join() {
  std::unique_lock lk(mu_);
  stopping_ = true;
  cv_.notify_all();
  cv_.wait(lk, [&] { return alive_ == 0; });
}

// ---- EventLoop ---------------------------------------------------------------------------------

namespace {
thread_local const EventLoop* tl_loop = nullptr;
}

EventLoop::EventLoop(size_t loop_threads, size_t handler_threads) : handlers_(handler_threads) {
  for (size_t i = 0; i < std::max<size_t>(1, loop_threads); ++i) {
    // Concurrency hint 1: one thread runs each context (other threads only post to it).
    contexts_.push_back(std::make_unique<asio::io_context>(1));
    guards_.push_back(asio::make_work_guard(*contexts_.back()));
  }
}

EventLoop::~EventLoop() { shutdown(); }

asio::any_io_executor EventLoop::next_executor() {
  return contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()]->get_executor();
}

void EventLoop::start() {
  if (started_.exchange(true)) return;
  for (auto& c : contexts_) {
    threads_.emplace_back([this, ctx = c.get()] {
      tl_loop = this;
      // A handler that throws loses its own request (its connection is closed when the session
      // goes), never the loop thread that serves every other one.
      for (;;) {
        try {
          ctx->run();
          return;
        } catch (const std::exception& e) {
          diag::error("event loop", std::string("a handler failed: ") + e.what());
        }
      }
    });
  }
}

void EventLoop::shutdown() {
  if (shut_.exchange(true)) return;
  // Handlers first: they may wait on upstream operations that only the running loop completes.
  handlers_.join();
  guards_.clear();
  if (!started_) return;
  // Each loop ends when its last operations (streams told to stop, closing sockets) are done; an
  // operation that would outlive 10 s (a peer that never answers) is abandoned.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto all_stopped = [&] {
    for (auto& c : contexts_)
      if (!c->stopped()) return false;
    return true;
  };
  while (!all_stopped() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (auto& c : contexts_) c->stop();
  for (auto& t : threads_) t.join();
}

bool EventLoop::in_loop_thread() const { return tl_loop == this; }

// ---- requests and responses --------------------------------------------------------------------

void ClientWatch::on_gone(std::function<void()> fn) {
  std::unique_lock lk(mu_);
  if (!gone_) {
    fn_ = std::move(fn);
    return;
  }
  lk.unlock();
  fn();
}

bool ClientWatch::gone() const {
  std::lock_guard lk(mu_);
  return gone_;
}

void ClientWatch::fire() {
  std::function<void()> fn;
  {
    std::lock_guard lk(mu_);
    if (gone_) return;
    gone_ = true;
    fn = std::move(fn_);
  }
  if (fn) fn();
}

std::string ServerRequest::get_header_value(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

void ServerResponse::set_header(const std::string& name, const std::string& value) {
  headers.erase(name);
  headers.emplace(name, value);
}

void ServerResponse::set_content(std::string b, const std::string& content_type) {
  body = std::move(b);
  set_header("Content-Type", content_type);
}

void set_error(ServerResponse& res, int status, std::string_view type, std::string_view message) {
  res.status = status;
  res.set_content(openai_error_text(message, type, status), "application/json");
}

// ---- EventServer -------------------------------------------------------------------------------

namespace {
constexpr size_t kMaxHeaderLine = 8192;  // as cpp-httplib and nginx's default buffers
constexpr size_t kMaxTarget = 8192;
constexpr auto kBodyReadTimeout = std::chrono::seconds(60);
// Beast reads max(512, the buffer's free room) bytes at a time, up to 64 KiB. A body read through
// the room the header left took one recv, timer update and handler per 512 bytes to 1 KiB: 640
// reads for a 160k-token prompt, most of dyn-route's CPU on agent prompts (issue 54's profile).
// The buffer gets room for 64 KiB reads before a chunked body (one of known length is read
// straight into its string), and gives it back after (an idle keep-alive connection keeps 8 KiB
// at most).
constexpr size_t kBodyReadRoom = 64 << 10;
constexpr size_t kIdleBufferRoom = 8 << 10;
// Room past a body's end for a JSON parser that reads ahead: simdjson reads up to 64 bytes past
// it (SIMDJSON_PADDING) and copies a body that lacks them before parsing it.
constexpr size_t kBodyPadding = 64;
constexpr auto kWriteTimeout = std::chrono::seconds(60);

const char* const kMalformed = "malformed request (a header line over 8 KiB, or a bad request line or header)";

/// A chunked request body, read into a std::string by appending what each read brought (a body
/// of known length bypasses the parser: ServerSession::read_known_body). Beast's string_body
/// grows the string with resize() and then copies into it: every body byte was zeroed before it
/// was copied, a memset as large as the prompt (issue 54: 11.5 % of the router's instructions on a
/// 150k-token prompt).
struct AppendBody {
  using value_type = std::string;
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(bhttp::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>&, beast::error_code& ec) { ec = {}; }
    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      const size_t n = beast::buffer_bytes(buffers);
      if (n > body_.max_size() - body_.size()) {
        ec = bhttp::error::buffer_overflow;
        return 0;
      }
      ec = {};
      for (auto b : beast::buffers_range_ref(buffers)) body_.append(static_cast<const char*>(b.data()), b.size());
      return n;
    }
    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

struct ServerSession;
}  // namespace

struct EventServer::Impl : std::enable_shared_from_this<EventServer::Impl> {
  struct Route {
    std::string method;
    std::regex re;
    Handler handler;  // or
    AsyncHandler async_handler;
  };
  EventLoop& loop;
  size_t max_body;
  ListenOptions opt;
  std::vector<Route> routes;
  std::optional<tcp::acceptor> acceptor;
  std::mutex mu;  // sessions, closing
  std::unordered_map<ServerSession*, std::weak_ptr<ServerSession>> sessions;
  bool closing = false;

  Impl(EventLoop& l, size_t mb) : loop(l), max_body(mb) {}
  void do_accept();
  const Route* find(const std::string& method, const std::string& path) const {
    const bool head = method == "HEAD";
    for (const Route& r : routes) {
      if ((r.method == method || (head && r.method == "GET")) && std::regex_match(path, r.re)) return &r;
    }
    return nullptr;
  }
};

namespace {

/// One client connection: reads a request, runs its handler on the pool, writes the response,
/// then waits for the next request (keep-alive). Everything runs on the connection's loop thread.
struct ServerSession : std::enable_shared_from_this<ServerSession> {
  std::shared_ptr<EventServer::Impl> srv;
  beast::tcp_stream stream;
  beast::flat_buffer buf;
  std::optional<bhttp::request_parser<AppendBody>> parser;
  std::string remote;
  std::string out;               // the head or whole response being written
  std::string head;              // a stream's head not sent yet (it goes with the first chunk)
  std::string data;              // a streamed chunk being written
  bool writing = false;          // a stream write finishes asynchronously
  std::function<void()> queued;  // a stream write asked for meanwhile
  std::array<char, 24> size_line{};
  bool keep_alive = true;
  bool head_only = false;
  bool streaming = false;
  bool closed = false;
  size_t served = 0;
  std::function<void()> on_close;
  std::shared_ptr<ClientWatch> client;  // the request being answered (null between requests)
  uint64_t watch_id = 0;                // its watch (0: none); a wait of an earlier one does nothing
  uint64_t watch_seq = 0;

  ServerSession(std::shared_ptr<EventServer::Impl> s, tcp::socket sock) : srv(std::move(s)), stream(std::move(sock)) {
    beast::error_code ec;
    auto ep = stream.socket().remote_endpoint(ec);
    if (!ec) remote = ep.address().to_string();
  }

  void start() {
    bool closing;
    {
      std::lock_guard lk(srv->mu);
      closing = srv->closing;
      if (!closing) srv->sessions.emplace(this, weak_from_this());
    }
    // Not under the lock: close_now() takes it again (forget). A connection accepted just after
    // close() began deadlocked the acceptor's loop thread here, and close(), waiting for that
    // thread to close the acceptor, hung SIGTERM (seen under TSan in e2e serve-sigterm-under-load).
    if (closing) return close_now();
    read_next();
  }

  void forget() {
    std::lock_guard lk(srv->mu);
    srv->sessions.erase(this);
  }

  void close_now() {
    if (closed) return;
    closed = true;
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
    forget();
    if (auto fn = std::move(on_close)) fn();
    if (auto c = std::exchange(client, nullptr)) c->fire();
  }

  /// Watches the connection for the client's hang-up while its request is answered, as nginx
  /// does (ngx_http_upstream_check_broken_connection): a readable socket is peeked; EOF or an
  /// error is a hang-up (the connection is closed, which tells the stream and the handler), bytes
  /// are a pipelined request and end the watch, unread. The peek first: an EOF that came while
  /// no read was queued gives the edge-triggered reactor no new event. Per request: one recv and
  /// one queued wait, nothing per relayed chunk.
  void watch_client() {
    const uint64_t id = watch_id = ++watch_seq;
    if (peer_closed()) return close_now();
    stream.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), id](beast::error_code ec) {
      if (ec || self->closed || self->watch_id != id) return;
      if (self->peer_closed()) self->close_now();
    });
  }
  /// The client closed or reset the connection (a non-blocking peek: no byte waiting is false).
  bool peer_closed() {
    char c;
    const ssize_t n = ::recv(stream.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  /// The response has ended: the request's watch stops.
  void end_watch() {
    watch_id = 0;
    client = nullptr;
  }

  /// Closes after the response without resetting the peer: the send side first, then unread
  /// request bytes (a refused body) are read and dropped for up to 2 s, so the client reads
  /// the error instead of a connection reset.
  void linger_close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream.expires_after(std::chrono::seconds(2));
    drain();
  }
  void drain() {
    auto self = shared_from_this();
    stream.async_read_some(asio::buffer(size_line), [self](beast::error_code ec, size_t) {
      if (ec) return self->close_now();
      self->drain();
    });
  }

  void read_next() {
    if (closed) return;
    parser.emplace();
    parser->header_limit(64 * 1024);
    parser->body_limit(srv->max_body ? srv->max_body : std::numeric_limits<std::uint64_t>::max());
    stream.expires_after(std::chrono::seconds(std::max<time_t>(1, srv->opt.keep_alive_timeout_s)));
    auto self = shared_from_this();
    bhttp::async_read_header(stream, buf, *parser, [self](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void fail(int status, const std::string& msg) {
    keep_alive = false;
    ServerResponse res;
    set_error(res, status, error_type_for_status(status), msg);
    respond(std::move(res));
  }

  void on_read_error(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      return fail(413, fmt::format("request body over {} bytes (--max-request-bytes)", srv->max_body));
    }
    // The peer left or went quiet between requests, or the server is closing: nothing to answer.
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset || ec == asio::error::eof || closed)
      return close_now();
    const bool in_body = parser && parser->is_header_done();
    fail(400, in_body ? "the request body could not be read" : kMalformed);
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    auto& m = parser->get();
    if (m.target().size() > kMaxTarget) return fail(414, "request target over 8 KiB");
    for (const auto& f : m) {
      if (f.name_string().size() + f.value().size() + 2 > kMaxHeaderLine) return fail(400, kMalformed);
    }
    if (!parser->is_done() && beast::iequals(m[bhttp::field::expect], "100-continue")) {
      out = "HTTP/1.1 100 Continue\r\n\r\n";
      auto self = shared_from_this();
      stream.expires_after(kWriteTimeout);
      asio::async_write(stream, asio::buffer(out), [self](beast::error_code ec, size_t) {
        if (ec) return self->close_now();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser->is_done()) return dispatch();
    if (const auto length = parser->content_length(); length && !parser->chunked()) return read_known_body(*length);
    buf.reserve(buf.size() + kBodyReadRoom);  // a chunked body: its length is not known
    stream.expires_after(kBodyReadTimeout);
    auto self = shared_from_this();
    bhttp::async_read(stream, buf, *parser, [self](beast::error_code ec, size_t) {
      if (ec) return self->on_read_error(ec);
      self->dispatch();
    });
  }

  /// A body of a known length (within the body limit: Beast checked it with the header) is read
  /// straight into its string, what `buf` already holds first, not through `buf` and the parser's
  /// copy (issue 54: that copy was ~3 % of the router's CPU on agent prompts). The parser is left
  /// at the body's start; dispatch() takes the body from it and resets it.
  void read_known_body(uint64_t length) {
    if (length > std::string().max_size() - kBodyPadding) return fail(413, "request body too large");
    const auto n = static_cast<size_t>(length);
    std::string& body = parser->get().body();
    body.reserve(n + kBodyPadding);
    const size_t have = std::min(buf.size(), n);
    // The string takes its length without zeroing the bytes the socket is about to write (resize()
    // zeroed them all first: a memset as large as the prompt); they are read only once it has.
    body.resize_and_overwrite(n, [&](char* p, size_t) {
      std::memcpy(p, buf.data().data(), have);
      return n;
    });
    buf.consume(have);
    if (have == n) return dispatch();
    stream.expires_after(kBodyReadTimeout);
    auto self = shared_from_this();
    asio::async_read(stream, asio::buffer(body.data() + have, n - have), [self](beast::error_code ec, size_t) {
      if (ec) return self->on_read_error(ec);
      self->dispatch();
    });
  }

  void dispatch() {
    stream.expires_never();
    auto& m = parser->get();
    auto req = std::make_shared<ServerRequest>();
    req->method = std::string(m.method_string());
    req->target = std::string(m.target());
    const std::string raw_path = req->target.substr(0, req->target.find('?'));
    req->path = httplib::detail::decode_url(raw_path, false);
    for (const auto& f : m) req->headers.emplace(std::string(f.name_string()), std::string(f.value()));
    req->body = std::move(m.body());
    req->remote_addr = remote;
    keep_alive = m.keep_alive() && ++served < srv->opt.keep_alive_max_count;
    head_only = req->method == "HEAD";
    parser.reset();
    if (buf.capacity() > kIdleBufferRoom) buf.shrink_to_fit();
    std::string bad = header_with_control_bytes(req->headers);
    if (!bad.empty()) return fail(400, "header '" + bad.substr(0, 64) + "' contains CR, LF or NUL");
    req->executor = stream.get_executor();
    const EventServer::Impl::Route* r = srv->find(req->method, req->path);
    if (!r) {
      ServerResponse res;
      set_error(res, 404, "not_found_error", "unknown route " + req->method + " " + req->path);
      return respond(std::move(res));
    }
    req->client = client = std::make_shared<ClientWatch>();
    watch_client();
    auto self = shared_from_this();
    auto res = std::make_shared<ServerResponse>();
    auto send = [self, res] {
      asio::dispatch(self->stream.get_executor(), [self, res] { self->respond(std::move(*res)); });
    };
    // A handler that throws before it answered gets a 500 (an async one reports later failures
    // through its own response).
    auto failed = [res](const std::exception& e) {
      *res = ServerResponse{};
      set_error(*res, 500, "internal_server_error", std::string("handler failed: ") + e.what());
    };
    if (r->async_handler) {
      try {
        r->async_handler(req, res, send);
      } catch (const std::exception& e) {
        failed(e);
        send();
      }
      return;
    }
    srv->loop.handlers().post([req, r, res, send, failed] {
      try {
        r->handler(*req, *res);
      } catch (const std::exception& e) {
        failed(e);
      }
      send();
    });
  }

  void respond(ServerResponse res) {
    if (closed) {
      // The client is gone: a stream is still started, so its producer ends the exchange.
      if (res.stream) res.stream(make_stream());
      return;
    }
    bool close_after = !keep_alive;
    {
      std::lock_guard lk(srv->mu);
      close_after = close_after || srv->closing;
    }
    const int st = res.status;
    std::string reason(bhttp::obsolete_reason(static_cast<bhttp::status>(st)));
    out.clear();
    out += fmt::format("HTTP/1.1 {} {}\r\n", st, reason == "<unknown-status>" ? "Unknown" : reason);
    for (const auto& [k, v] : res.headers) {
      if (beast::iequals(k, "connection")) {
        if (v.find("close") != std::string::npos) close_after = true;
        continue;
      }
      if (beast::iequals(k, "content-length") || beast::iequals(k, "transfer-encoding")) continue;
      out += k;
      out += ": ";
      out += v;
      out += "\r\n";
    }
    const bool bodiless = st == 204 || st == 304 || (st >= 100 && st < 200);
    if (res.stream) {
      out += "Transfer-Encoding: chunked\r\n";
    } else if (!bodiless) {
      out += fmt::format("Content-Length: {}\r\n", res.body.size());
    }
    if (close_after) out += "Connection: close\r\n";
    out += "\r\n";
    keep_alive = !close_after;
    auto self = shared_from_this();
    if (!res.stream) {
      if (!head_only && !bodiless) out += res.body;
      stream.expires_after(kWriteTimeout);
      asio::async_write(stream, asio::buffer(out), [self](beast::error_code ec, size_t) {
        if (ec) return self->close_now();
        self->next_or_close();
      });
      return;
    }
    // A stream's head goes out with the first chunk when the producer writes one in this turn (a
    // proxied SSE body usually came with its upstream's headers): one send and one wake-up of the
    // client fewer per response, and the first token is not queued behind the head's completion
    // (issue 16). Otherwise the posted flush sends the head alone on the next turn.
    streaming = true;
    head = std::move(out);
    res.stream(make_stream());
    asio::post(stream.get_executor(), [self] { self->flush_head(); });
  }

  void next_or_close() {
    end_watch();
    if (keep_alive) return read_next();
    linger_close();
  }

  std::shared_ptr<BodyStream> make_stream();

  // ---- the BodyStream side (each call hops onto the connection's loop thread) ----
  /// Sends the pending head (if any) and, when `d` is not empty, `d` as one chunk; `done(ok)`
  /// is posted once written. A write that the socket did not take at once finishes
  /// asynchronously; a write asked for meanwhile (only the head's flush races the producer)
  /// waits for it.
  void write_chunk(std::string d, std::function<void(bool)> done) {
    if (closed) return done(false);
    if (writing) {
      queued = [self = shared_from_this(), d = std::move(d), done = std::move(done)]() mutable {
        self->write_chunk(std::move(d), std::move(done));
      };
      return;
    }
    // An empty chunk would end the body; HEAD sends no body.
    if ((d.empty() || head_only) && head.empty()) return done(true);
    const Sent r = send_now(std::move(d), done);
    // Completions are posted, never run inline, as async_write's are.
    if (r != Sent::kRest)
      asio::post(stream.get_executor(), [done = std::move(done), ok = r == Sent::kAll] { done(ok); });
  }
  enum class Sent { kAll, kRest, kFailed };
  /// Writes the pending head and `d` (a chunk, when not empty) with one sendmsg. kAll: the socket
  /// took everything. kRest: the rest goes out asynchronously under the write timeout (`writing`
  /// until then) and `done(ok)` is moved into its completion. kFailed: the connection is closed.
  /// Most writes fit the socket's send buffer: no write timer is armed and cancelled around them
  /// (two timerfd_settime calls a chunk whenever the write timeout is the loop's earliest
  /// deadline, issue 16).
  Sent send_now(std::string d, std::function<void(bool)>& done) {
    const bool chunk = !d.empty() && !head_only;
    data = chunk ? std::move(d) : std::string();
    size_t line = 0;
    if (chunk) line = fmt::format_to_n(size_line.data(), size_line.size(), "{:x}\r\n", data.size()).size;
    // Zero-length buffers where there is no head or no chunk: writev skips them.
    std::array<asio::const_buffer, 4> bufs{asio::buffer(head), asio::buffer(size_line.data(), line), asio::buffer(data),
                                           asio::buffer("\r\n", chunk ? 2 : 0)};
    beast::error_code ec;
    auto& sock = stream.socket();
    if (!sock.non_blocking()) sock.non_blocking(true, ec);
    const size_t sent = ec ? 0 : sock.write_some(bufs, ec);
    if (!ec && sent == asio::buffer_size(bufs)) {
      head.clear();
      return Sent::kAll;
    }
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
      close_now();
      return Sent::kFailed;
    }
    beast::buffers_suffix<std::array<asio::const_buffer, 4>> rest(bufs);
    rest.consume(sent);
    writing = true;
    stream.expires_after(kWriteTimeout);
    asio::async_write(stream, rest, [self = shared_from_this(), done = std::move(done)](beast::error_code ec, size_t) {
      self->writing = false;
      self->head.clear();
      if (ec) self->close_now();
      done(!ec);
      if (auto next = std::exchange(self->queued, nullptr)) next();
    });
    return Sent::kRest;
  }
  /// Sends the head of a stream whose producer wrote nothing in the turn it started.
  void flush_head() {
    if (!closed && !writing && !head.empty()) write_chunk({}, [](bool) {});
  }
  void end_body() {
    if (closed || !streaming) return;
    if (writing) {
      queued = [self = shared_from_this()] { self->end_body(); };
      return;
    }
    streaming = false;
    on_close = nullptr;
    out = std::move(head);
    head.clear();
    if (!head_only) out += "0\r\n\r\n";
    if (out.empty()) return next_or_close();
    stream.expires_after(kWriteTimeout);
    auto self = shared_from_this();
    asio::async_write(stream, asio::buffer(out), [self](beast::error_code ec, size_t) {
      if (ec) return self->close_now();
      self->next_or_close();
    });
  }
  void abort_body() {
    streaming = false;
    on_close = nullptr;
    end_watch();
    close_now();
  }
};

class ServerChunkStream : public BodyStream {
 public:
  explicit ServerChunkStream(std::shared_ptr<ServerSession> s) : s_(std::move(s)) {
    // Looked up once: any_executor::target compares type_info, by name, on every call.
    if (const auto* ex = s_->stream.get_executor().target<asio::io_context::executor_type>()) loop_ = *ex;
  }
  void write(std::string data, std::function<void(bool)> done) override {
    auto s = s_;
    asio::dispatch(s->stream.get_executor(), [s, data = std::move(data), done = std::move(done)]() mutable {
      s->write_chunk(std::move(data), std::move(done));
    });
  }
  TryWrite try_write(std::string& data) override {
    if (!loop_ || !loop_->running_in_this_thread()) return TryWrite::kNotNow;
    ServerSession& s = *s_;
    if (s.closed) return TryWrite::kClosed;
    if (s.writing) return TryWrite::kNotNow;
    std::function<void(bool)> none = [](bool) {};
    return s.send_now(std::move(data), none) == ServerSession::Sent::kFailed ? TryWrite::kClosed : TryWrite::kTaken;
  }
  void end() override {
    auto s = s_;
    asio::dispatch(s->stream.get_executor(), [s] { s->end_body(); });
  }
  void abort() override {
    auto s = s_;
    asio::dispatch(s->stream.get_executor(), [s] { s->abort_body(); });
  }
  void on_close(std::function<void()> fn) override {
    auto s = s_;
    asio::dispatch(s->stream.get_executor(), [s, fn = std::move(fn)]() mutable {
      if (s->closed) return fn();
      if (s->streaming) s->on_close = std::move(fn);
    });
  }

 private:
  std::shared_ptr<ServerSession> s_;
  std::optional<asio::io_context::executor_type> loop_;  // the connection's loop thread
};

std::shared_ptr<BodyStream> ServerSession::make_stream() {
  return std::make_shared<ServerChunkStream>(shared_from_this());
}

}  // namespace

void EventServer::Impl::do_accept() {
  auto self = shared_from_this();
  acceptor->async_accept(loop.next_executor(), [self](beast::error_code ec, tcp::socket sock) {
    if (!self->acceptor->is_open()) return;
    if (ec) {
      // Out of descriptors or a transient failure: try again shortly instead of spinning.
      auto t = std::make_shared<asio::steady_timer>(self->acceptor->get_executor(), std::chrono::milliseconds(20));
      t->async_wait([self, t](beast::error_code) {
        if (self->acceptor->is_open()) self->do_accept();
      });
      return;
    }
    beast::error_code ignored;
    sock.set_option(tcp::no_delay(true), ignored);
    std::make_shared<ServerSession>(self, std::move(sock))->start();
    self->do_accept();
  });
}

EventServer::EventServer(EventLoop& loop, size_t max_body_bytes)
    : impl_(std::make_shared<Impl>(loop, max_body_bytes)) {}

EventServer::~EventServer() { close(); }

void EventServer::route(std::string method, const std::string& path_regex, Handler h) {
  impl_->routes.push_back(Impl::Route{std::move(method), std::regex(path_regex), std::move(h), nullptr});
}

void EventServer::route_async(std::string method, const std::string& path_regex, AsyncHandler h) {
  impl_->routes.push_back(Impl::Route{std::move(method), std::regex(path_regex), nullptr, std::move(h)});
}

Expected<int> EventServer::bind(const ListenOptions& o) {
  Impl& m = *impl_;
  m.opt = o;
  beast::error_code ec;
  tcp::resolver resolver(m.loop.context());
  auto eps = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::numeric_service, ec);
  const std::string where = o.port == 0 ? o.host + " to a free port" : o.host + ":" + std::to_string(o.port);
  if (ec || eps.empty()) return Error{"cannot bind " + where + ": " + (ec ? ec.message() : "no address"), kExitIo};
  tcp::endpoint ep = eps.begin()->endpoint();
  m.acceptor.emplace(m.loop.context());  // the acceptor runs on the first loop thread
  m.acceptor->open(ep.protocol(), ec);
  // SO_REUSEADDR allows a restart on a port in TIME_WAIT; without SO_REUSEPORT a port someone
  // listens on fails to bind (issue 16: a second server must not share it silently).
  if (!ec) m.acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(ep, ec);
  if (!ec) m.acceptor->listen(4096, ec);
  if (ec) {
    m.acceptor.reset();
    return o.port == 0 ? Error{"cannot bind " + where, kExitIo}
                       : Error{"cannot bind " + where + " (port in use, or not allowed)", kExitIo};
  }
  int port = m.acceptor->local_endpoint().port();
  if (auto e = write_port_file(o.port_file, port)) return *e;
  return port;
}

void EventServer::start() {
  auto m = impl_;
  if (!m->acceptor) return;
  asio::dispatch(m->acceptor->get_executor(), [m] { m->do_accept(); });
}

void EventServer::close() {
  auto m = impl_;
  std::vector<std::shared_ptr<ServerSession>> live;
  {
    std::lock_guard lk(m->mu);
    if (m->closing) return;
    m->closing = true;
    for (auto& [p, w] : m->sessions)
      if (auto s = w.lock()) live.push_back(std::move(s));
  }
  if (m->acceptor) {
    if (!m->loop.running()) {
      beast::error_code ignored;
      m->acceptor->close(ignored);
    } else {
      auto done = std::make_shared<std::promise<void>>();
      asio::dispatch(m->acceptor->get_executor(), [m, done] {
        beast::error_code ignored;
        m->acceptor->close(ignored);
        done->set_value();
      });
      done->get_future().wait();
    }
  }
  for (auto& s : live) asio::dispatch(s->stream.get_executor(), [s] { s->close_now(); });
}

}  // namespace dyn::http
