// The data plane's HTTP/1.1 server on an event loop (Boost.Asio/Beast): a few loop threads serve
// every connection and relay every streamed body; handlers, which may block (admission waits,
// the tokenizer, Redis, an upstream's response headers), run on an elastic handler pool. Issue 16:
// a thread per connection cost a context switch per relayed chunk and a thread per stream.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

// <utility> first: Boost 1.74's Asio uses std::exchange without including it.
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <httplib.h>

#include "dyn/base/error.h"
#include "dyn/http/server.h"

namespace dyn::http {

/// Threads that may block, started on demand up to a limit: a task waits in the queue only when
/// `max_threads` tasks are running. Idle threads end after `idle_s`. Thread-safe.
class HandlerPool {
 public:
  explicit HandlerPool(size_t max_threads, double idle_s = 30);
  ~HandlerPool();
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;
  void post(std::function<void()> task);
  /// Runs what is queued, then ends every thread; post() afterwards runs nothing.
  void join();

 private:
  void worker();
  size_t max_;
  double idle_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  size_t alive_ = 0, idle_ = 0;
  bool stopping_ = false;
};

/// The loop threads, each running an io_context of its own (nginx's worker model), plus the
/// handler pool: what a server and the upstream connections it proxies to share. A connection
/// and the upstream exchanges it starts live on one loop thread, so relaying a chunk never wakes
/// another thread (issue 16: one context shared by every loop thread cost a cross-thread wake-up
/// per completion). start() starts the threads; shutdown() joins the handlers, then lets each
/// loop finish its last operations and joins it.
class EventLoop {
 public:
  EventLoop(size_t loop_threads, size_t handler_threads);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  /// The first loop thread's context (the listening sockets live there).
  boost::asio::io_context& context() { return *contexts_.front(); }
  /// The executor of the next loop thread, round robin (a new connection's, or an exchange's
  /// that no connection owns). It runs one handler at a time, so it serves as a strand.
  boost::asio::any_io_executor next_executor();
  HandlerPool& handlers() { return handlers_; }
  void start();
  void shutdown();
  /// Started and not shut down: posted work runs.
  bool running() const { return started_ && !shut_; }
  /// True on one of this loop's threads (where blocking would stall every connection).
  bool in_loop_thread() const;

 private:
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<Guard> guards_;
  HandlerPool handlers_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> started_{false}, shut_{false};
};

/// What a handler learns of its client while it answers: that the client closed the connection
/// before the response ended. The server watches the connection from the moment the request is
/// read until its response has ended, including while nothing is written to it (an upstream
/// that is silent before its headers, between two chunks, or while a whole body is read), and
/// tells at once (issue 51.4: seen only at the next write, a hang-up cost the worker the whole
/// generation and left the request's load counted). Thread-safe.
class ClientWatch {
 public:
  /// `fn` runs once, on the connection's loop thread, when the client goes (at once, on the
  /// calling thread, when it has gone already). One callback: a second call replaces the first.
  void on_gone(std::function<void()> fn);
  /// The client has gone.
  bool gone() const;
  /// The server saw the client go: runs the callback (once).
  void fire();

 private:
  mutable std::mutex mu_;
  bool gone_ = false;
  std::function<void()> fn_;
};

/// A request as a handler sees it.
struct ServerRequest {
  std::string method;        ///< "POST" (a HEAD request reaches the GET handler as "HEAD")
  std::string target;        ///< as sent, e.g. "/v1/messages?beta=true" or an absolute-form URL
  std::string path;          ///< the target without its query, percent-decoded (routes match it)
  httplib::Headers headers;  ///< as received (names case-insensitive, duplicates kept)
  std::string body;
  std::string remote_addr;  ///< the peer's address, e.g. "127.0.0.1" or "::1"
  /// The connection's loop thread: upstream I/O for this request runs there too (ProxyCall::start).
  boost::asio::any_io_executor executor;
  /// The client's hang-up, while this request is answered (null for a request no server read).
  std::shared_ptr<ClientWatch> client;
  std::string get_header_value(const std::string& name) const;
};

/// A streamed response body, written from the event loop. Calls come from the loop: one write
/// at a time, then end() or abort().
class BodyStream {
 public:
  virtual ~BodyStream() = default;
  /// Sends `data` as one chunk; `done(ok)` runs on the loop once it is written (ok = false: the
  /// client is gone and the body must stop).
  virtual void write(std::string data, std::function<void(bool ok)> done) = 0;
  /// What try_write did with a chunk.
  enum class TryWrite {
    kTaken,   ///< sent now, or its rest is being sent (a later write waits for it); `data` is moved from
    kClosed,  ///< the client is gone and the body must stop
    kNotNow,  ///< nothing was sent and `data` is untouched: use write()
  };
  /// Sends `data` as one chunk from the caller's own turn when the caller runs on the
  /// connection's loop thread and no write is in progress: a relay then needs no completion
  /// handler and no suspension per chunk (issue 16: most chunks fit the socket at once).
  virtual TryWrite try_write(std::string& /*data*/) { return TryWrite::kNotNow; }
  /// The body is complete (terminating chunk); the connection serves its next request.
  virtual void end() = 0;
  /// The body ends incomplete: the connection is closed, so the client sees a cut response.
  virtual void abort() = 0;
  /// `fn` runs once, on the loop, if the connection closes before end() or abort() (server
  /// stop): the producer must stop waiting for data it could no longer send.
  virtual void on_close(std::function<void()> fn) = 0;
};

/// A handler's answer: status, headers and either a whole body or a stream.
struct ServerResponse {
  int status = 200;
  httplib::Headers headers;
  std::string body;
  void set_header(const std::string& name, const std::string& value);
  void set_content(std::string body, const std::string& content_type);
  /// A chunked body: called on the loop once the status line and headers are written; it writes
  /// through the BodyStream until it ends it. Empty = `body` is the whole body.
  std::function<void(std::shared_ptr<BodyStream>)> stream;
};

/// Sets `res` to status `status` with an OpenAI-style error body (application/json).
void set_error(ServerResponse& res, int status, std::string_view type, std::string_view message);

/// An HTTP/1.1 server on an EventLoop. Routes are (method, regex over the decoded path) pairs
/// tried in the order added, with a blocking handler (run on the pool) or an asynchronous one
/// (run on the loop: no thread switch for the request); HEAD runs the GET route without sending the body. Keep-alive
/// and Expect: 100-continue as clients use them. Errors it answers itself, with OpenAI-style bodies: 400 for a
/// malformed request (a header line over 8 KiB, a bad request line, header or chunked body, CR/LF/NUL in a header), 413
/// for a body over `max_body_bytes`, 414 for a target over 8 KiB, 404 for no route. Binding a busy port is an error (no
/// SO_REUSEPORT sharing, issue 16). From a request's arrival to its response's end the connection
/// is watched for the client's hang-up (ServerRequest::client): a readable socket is peeked, and
/// no byte (EOF) or an error (RST) closes the connection, as nginx's
/// ngx_http_upstream_check_broken_connection does; bytes are the client's next request and stay
/// unread. One wait queued per request on a socket the reactor already polls: nothing per
/// streamed chunk.
class EventServer {
 public:
  /// Runs on the handler pool (it may block); the response is sent when it returns.
  using Handler = std::function<void(const ServerRequest&, ServerResponse&)>;
  /// Runs on the connection's loop thread and must not block: it starts the work and
  /// calls `done` (from any thread, once) when the response is set.
  using AsyncHandler = std::function<void(std::shared_ptr<const ServerRequest>, std::shared_ptr<ServerResponse>,
                                          std::function<void()> done)>;
  /// `max_body_bytes` 0 = no limit.
  EventServer(EventLoop& loop, size_t max_body_bytes = 0);
  ~EventServer();
  EventServer(const EventServer&) = delete;
  EventServer& operator=(const EventServer&) = delete;
  void route(std::string method, const std::string& path_regex, Handler h);
  void route_async(std::string method, const std::string& path_regex, AsyncHandler h);
  /// Binds and listens (backlog 4,096) and writes the port file (temp + rename). Returns the
  /// bound port. Errors: bind failure or an unwritable port file -> Error (exit code 4).
  Expected<int> bind(const ListenOptions& options);
  /// Starts accepting on the loop (call after bind() and EventLoop::start()).
  void start();
  /// Stops accepting and closes every connection (streams in flight are told through
  /// BodyStream::on_close). Returns once done; safe to call twice or before start().
  void close();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace dyn::http
