// Streaming reverse proxy: forwards a request to one upstream (Boost.Beast client on the server's
// event loop) and relays its response (status, headers, body chunks flushed as they arrive)
// through an observing tap to the client's connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// <utility> first: Boost 1.74's Asio uses std::exchange without including it.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <httplib.h>

#include "dyn/base/clock.h"
#include "dyn/base/error.h"
#include "dyn/http/event_server.h"
#include "dyn/http/url.h"

namespace dyn::http {

/// Timeouts for upstream calls, in seconds.
struct UpstreamTimeouts {
  double connect_s = 5;
  double read_s = 600;  ///< longest silence between two reads of a response (long generations)
};

/// Keep-alive connections to one upstream, reused across requests so the proxy does not pay a TCP
/// handshake per call. Idle connections stay Asio sockets of the loop thread that used them, so a
/// call on that thread takes one up without registering it with the reactor again (issue 16:
/// nginx keeps its upstream connections the same way, per worker); each waits for readable
/// while idle, which means the upstream closed it (or sent bytes nobody asked for), and is then
/// dropped. https upstreams are not pooled (a TLS session is not kept): each call connects and
/// handshakes anew. Calls run their I/O on `loop`, which must outlive the pool. Thread-safe.
class UpstreamPool {
 public:
  UpstreamPool(UpstreamUrl url, EventLoop& loop, UpstreamTimeouts timeouts = {});
  ~UpstreamPool();
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;
  const UpstreamUrl& url() const { return url_; }
  const UpstreamTimeouts& timeouts() const { return timeouts_; }
  EventLoop& loop() const { return loop_; }

  struct Idle;  ///< a kept connection (proxy.cpp)
  /// An idle connection of the loop thread that runs `executor`, now the caller's, or null when
  /// that thread has none. Call on that thread (its connections are only touched there).
  std::shared_ptr<Idle> take_idle(const boost::asio::any_io_executor& executor);
  /// Keeps a connection after a complete exchange whose response allowed keep-alive (or closes
  /// it when enough are idle already). Call on the connection's loop thread.
  void put_idle(std::shared_ptr<Idle> idle);
  /// Closes every idle connection, each on its own loop thread (posted: any thread may call).
  /// A server that stops calls it before its loop shuts down: an idle connection's read wait is
  /// an operation that keeps its loop running until the upstream closes the connection (a
  /// cpp-httplib worker after its 5 s keep-alive), which held a router's exit for 5 s after traffic.
  /// Connections put back afterwards (a stream that ends during the stop) are closed, not kept.
  void close_idle();

 private:
  UpstreamUrl url_;
  UpstreamTimeouts timeouts_;
  EventLoop& loop_;
  std::mutex mu_;
  bool closed_ = false;  ///< close_idle() ran: put_idle closes instead of keeping
  /// Idle connections per loop thread, keyed by its execution context.
  std::vector<std::pair<const void*, std::vector<std::shared_ptr<Idle>>>> idle_;
};

/// Observes (and may rewrite) a response on its way to the client. Called from one thread at a
/// time (the event loop, in order: on_response before any on_data). Implementations see bytes exactly
/// as the upstream sent them, possibly split anywhere.
class StreamTap {
 public:
  virtual ~StreamTap() = default;
  /// Status and headers of the upstream response, at `arrival_ms` (Clock::now_ms()).
  virtual void on_response(int status, const httplib::Headers& headers, double arrival_ms) {}
  /// One upstream read of `data` received at `arrival_ms`; append to `out` what the client
  /// should see (the default relays it unchanged).
  virtual void on_data(std::string_view data, double arrival_ms, std::string& out) { out.append(data); }
  /// The upstream body ended (cleanly or not); append any held-back bytes to `out`.
  virtual void on_end(double now_ms, std::string& out) {}
};

/// Continues an SSE response whose upstream failed after its headers (a relay's request
/// migration, --migration-limit): the pump asks it at the cut, never per chunk.
class StreamContinuation {
 public:
  virtual ~StreamContinuation() = default;
  /// True when the stream goes on elsewhere: the pump then sends the complete events it holds,
  /// skips the tap's end (a partial event is dropped, never the client's), does not end the
  /// exchange, and hands the client's stream to take(). `error` says why the upstream ended.
  virtual bool may_continue(const std::string& error) = 0;
  /// Takes over `out` once the pump has stopped: the taker writes the rest and ends it.
  virtual void take(std::shared_ptr<BodyStream> out) = 0;
};

/// How a proxied exchange ended.
struct ProxyOutcome {
  enum class Kind {
    kOk,         ///< the upstream response was relayed completely
    kTransport,  ///< no response: connection refused/reset or timeout before the status line
    kStreamCut,  ///< the upstream failed after its headers (worker killed mid-stream)
    kCancelled,  ///< the client went away; the upstream request was stopped
  };
  Kind kind = Kind::kOk;
  int status = 0;       ///< upstream HTTP status (0 when none arrived)
  std::string message;  ///< transport error text, "" when ok
  double end_ms = 0;    ///< Clock::now_ms() when the response to the client ended
};
const char* outcome_name(ProxyOutcome::Kind k);

/// The request to forward.
struct ProxyRequest {
  std::string method = "POST";
  std::string path;          ///< with query string, e.g. "/v1/messages?beta=true"
  httplib::Headers headers;  ///< the client's headers; hop-by-hop ones are dropped (see forwardable_header)
  /// Shared, never copied: a call sends these bytes where they lie, and a retry or a stream
  /// continued on another worker shares them (issue 54: an agent's prompt is up to a megabyte,
  /// and each copy of it was a pass over every byte). Null = no body.
  std::shared_ptr<const std::string> body;
  /// Bytes sent inside `body` before its byte `insert_at` (a member the router adds to the
  /// client's JSON object: stream_options), so the body is not copied to add them.
  std::string insert;
  size_t insert_at = 0;
  /// The body as sent, `insert` spliced in: a copy, for the rare reader of the whole text (a
  /// stream continued on another worker).
  std::string bytes() const;
  std::string content_type = "application/json";
};

/// False for headers a proxy must not forward: hop-by-hop (Connection, Keep-Alive, TE, Trailer,
/// Transfer-Encoding, Upgrade, Proxy-*), Host, Content-Length, Accept-Encoding (the upstream is
/// asked for identity encoding so the tap sees plain bytes) and cpp-httplib's pseudo headers
/// (REMOTE_ADDR, REMOTE_PORT, LOCAL_ADDR, LOCAL_PORT). Credentials are forwarded.
bool forwardable_header(std::string_view name);
/// The header names a message's `Connection` (and legacy `Proxy-Connection`) headers nominate as
/// hop-by-hop (RFC 9110 7.6.1: comma-separated, case-insensitive, whitespace trimmed), e.g.
/// "keep-alive, X-Internal-Hop" -> {"keep-alive", "X-Internal-Hop"}. A proxy drops them in both
/// directions.
std::vector<std::string> connection_nominated(const httplib::Headers& headers);
/// forwardable_header(name) and not one of `nominated` (see connection_nominated).
bool forwardable_header(std::string_view name, const std::vector<std::string>& nominated);

/// One proxied exchange. Its upstream I/O runs on one of the pool's loop threads (the client
/// connection's when the server passes its executor). start_async() connects (or takes a pooled
/// connection), sends the request and reads the upstream's status and headers; the caller may
/// then retry elsewhere (cancel) or answer with relay(). An SSE body (text/event-stream) is
/// relayed on the loop piece by piece as it arrives, through the tap, as a chunked response: no
/// thread per stream and no thread switch per chunk (issue 16). Other bodies are read whole and
/// answered with a Content-Length. A client that disconnects stops the upstream request: at once
/// when the server closes the connection (it watches it, ClientWatch) or the caller says so
/// (cancel_for_client), else at the next write.
class ProxyCall : public std::enable_shared_from_this<ProxyCall> {
 public:
  /// An exchange forwarding `request` to `pool`'s upstream (nothing is sent before
  /// start_async()). `tap` may be null. `pool` and `clock` must outlive the call.
  /// `executor` (one loop thread's, or a strand) runs the call's I/O; a server passes the client
  /// connection's, so the relay never changes threads. Default: the loop's next thread.
  static std::shared_ptr<ProxyCall> start(UpstreamPool& pool, ProxyRequest request, std::shared_ptr<StreamTap> tap,
                                          const Clock& clock, boost::asio::any_io_executor executor = {});
  ~ProxyCall();
  ProxyCall(const ProxyCall&) = delete;
  ProxyCall& operator=(const ProxyCall&) = delete;

  /// Sends the request and reads the upstream's status line and headers; then `on_headers(ok)`
  /// runs on the call's executor: true with the response's status and headers, false when it
  /// failed before them (see error()). A pooled connection that fails before any response is
  /// retried once on a fresh connection (the upstream may have closed it while idle). Call once.
  void start_async(std::function<void(bool ok)> on_headers);
  /// start_async() waited for, from a thread that is not one of the loop's.
  bool wait_response();
  int status() const { return status_; }
  const httplib::Headers& headers() const { return headers_; }
  /// Transport error text ("" when none).
  std::string error() const;
  /// True when the exchange failed because no status line arrived within the read timeout
  /// (the request was sent and may be running upstream: callers must not resend it).
  bool timed_out() const { return timed_out_; }
  /// Content-Type of the upstream response.
  std::string content_type() const;
  bool is_event_stream() const;

  /// Answers with the upstream response: status and upstream headers (minus hop-by-hop) plus
  /// `extra_headers`, then the body: read whole (a 502 stream_cut error when it breaks off) or,
  /// for SSE, set as `res.stream`, which the server starts on the loop. `ready` runs once `res`
  /// may be sent (at once for SSE; on the call's executor once a whole body is read); `res` must
  /// live until then. `on_end` runs exactly once, when the response to the client has ended.
  /// When the upstream is cut mid-stream, an SSE error event {"error": {..., "type":
  /// "stream_cut"}} is sent and the chunked response is aborted, so the client sees an error
  /// rather than a hang. Call after the headers arrived, at most once.
  void relay(ServerResponse& res, const std::vector<std::pair<std::string, std::string>>& extra_headers,
             std::function<void(const ProxyOutcome&)> on_end, std::function<void()> ready);
  /// Consulted when this call's SSE upstream fails after its headers (set before relay()).
  void set_continuation(std::shared_ptr<StreamContinuation> c) { continuation_ = std::move(c); }
  /// Relays this call's SSE body into `out`, a client stream that another call began (the
  /// continuation of a migrated stream): no status line or headers are written; the body goes
  /// through the tap, and `on_end` runs once when the response to the client has ended, as with
  /// relay(). Call after the headers arrived, at most once, instead of relay().
  void continue_stream(std::shared_ptr<BodyStream> out, std::function<void(const ProxyOutcome&)> on_end);
  /// Ends a client stream as a cut upstream does: an SSE error event {"error": {..., "type":
  /// "stream_cut"}} naming `error`, then an aborted chunked response.
  static void cut_stream(std::shared_ptr<BodyStream> out, const std::string& error);
  /// relay() waited for, from a thread that is not one of the loop's.
  void relay_blocking(ServerResponse& res, const std::vector<std::pair<std::string, std::string>>& extra_headers,
                      std::function<void(const ProxyOutcome&)> on_end);
  /// Abandons the exchange (no relay): closes the upstream connection (on the loop, soon after).
  void cancel();
  /// The client went away (any time, from any thread): the upstream connection is closed on the
  /// loop, so the worker sees the request dropped, a pooled connection is not tried again, and
  /// the exchange ends as kCancelled: start_async's on_headers(false) with client_gone() set, or
  /// relay()'s on_end with kCancelled (a whole body as well as a stream).
  void cancel_for_client();
  /// cancel_for_client() was called, or the stream's client connection closed (on the loop).
  bool client_gone() const { return client_gone_; }

 private:
  struct Io;  // the Beast connection, parser and buffers (proxy.cpp)
  ProxyCall(UpstreamPool& pool, ProxyRequest request, std::shared_ptr<StreamTap> tap, const Clock& clock,
            boost::asio::any_io_executor executor);
  boost::asio::awaitable<void> exchange();
  /// Relays an SSE body to `out` until it ends, the upstream fails or the client goes away.
  boost::asio::awaitable<void> pump(std::shared_ptr<BodyStream> out);
  void stop_upstream();
  void finish_once(ProxyOutcome::Kind kind);
  /// Takes one upstream read of `n` bytes ending with `ec` and appends it, through the tap, to
  /// `out`; returns true when the upstream body is done (complete, failed or cancelled).
  bool take_piece(size_t n, boost::system::error_code ec, std::string& out);

  UpstreamPool& pool_;
  std::shared_ptr<StreamTap> tap_;
  const Clock& clock_;
  std::unique_ptr<Io> io_;
  bool have_response_ = false;
  bool done_ = false;
  bool ended_ = false;
  int status_ = 0;
  httplib::Headers headers_;
  std::string error_;
  bool body_complete_ = false;
  bool timed_out_ = false;
  std::atomic<bool> client_gone_{false};
  std::function<void(const ProxyOutcome&)> on_end_;
  std::shared_ptr<StreamContinuation> continuation_;
};

}  // namespace dyn::http
