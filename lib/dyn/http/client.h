// HTTP client for OpenAI-compatible endpoints on cpp-httplib: one keep-alive connection per
// Connection, streaming SSE with per-read arrival stamps, errors as values (SPEC 6.3).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/base/error.h"
#include "dyn/http/sse_openai.h"

namespace httplib {
class Client;
}

namespace dyn::http {

/// A parsed base URL: `http://HOST[:PORT][/PREFIX]`. Only plain http (the toolkit talks to local
/// or in-cluster endpoints; TLS belongs to a proxy in front).
struct Endpoint {
  std::string host;
  int port = 80;
  std::string base_path;  ///< without trailing '/', e.g. "" or "/v1"
  /// Parses `url`; errors (exit code 2): other schemes, bad port, empty host.
  static Expected<Endpoint> parse(const std::string& url);
  /// Joins base_path and `path`, dropping a duplicated "/v1" when the base already ends in it.
  std::string join(const std::string& path) const;
};

struct ClientOptions {
  Endpoint endpoint;
  double connect_timeout_s = 10;
  /// Longest silence between two reads before the request fails with type "timeout".
  double read_timeout_s = 600;
  /// Whole-request limit (0 = none), checked on every read; AIPerf's --request-timeout-seconds.
  double request_timeout_s = 0;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string path;        ///< joined with the endpoint's base path
  HeaderList headers;      ///< sent in this order
  std::string body;        ///< JSON
  bool keep_text = false;  ///< keep the response text (history threading)
  /// Called once by Transport::post, on the posting thread, right after HttpResult::start_ms is
  /// stamped and before anything is written (and before returning when nothing will be sent: a
  /// cancelled connection). dyn-replay's send-order gate lets the next request go from here, so
  /// the connect, the write and the wait for the response all run outside the gate (issue 21.6).
  std::function<void()> on_start;
};

/// Error of one request (docs/records.md dyn.error): HTTP status or 0 for transport errors,
/// type ("http", "timeout", "connection", "stream_cut", "protocol", or the server's own error
/// type for an error object in a 200 stream) and a message.
struct HttpError {
  int code = 0;
  std::string type, message;
};

struct HttpResult {
  int status = 0;         ///< HTTP status, 0 when no response line arrived
  double start_ms = 0;    ///< clock reading just before the request was written
  double headers_ms = 0;  ///< response headers received (0 if never)
  double end_ms = 0;      ///< response complete, failed or cut
  HeaderList headers;     ///< response headers, names lower-case
  bool streamed = false;  ///< the response was text/event-stream
  uint64_t body_bytes = 0, reads = 0;
  ResponseSummary summary;
  std::optional<HttpError> error;
  /// First value of a response header (name lower-case), or "".
  std::string header(std::string_view name) const;
};

/// Why a TCP connection to host:port cannot be made, as the system says it ("Connection
/// refused", "No route to host", "Name or service not known", "timed out after 5 s"), or "" when
/// a connection can be made now. Used to turn cpp-httplib's bare "Could not establish connection"
/// into `cannot connect to URL: reason` (issue 21.9). Blocks up to `timeout_s`.
std::string connect_failure_reason(const std::string& host, int port, double timeout_s);

/// What sends one request at a time and reads its whole response: an http::Connection, or a
/// stand-in a unit test gives ConnectionPool (dyn-replay's seam, LiveOptions::transport, so a
/// test can see the exact order in which requests are handed over). Not thread-safe except
/// cancel(): one Transport per worker thread.
class Transport {
 public:
  virtual ~Transport() = default;
  /// Sends `req` and reads its whole response; never throws for network or server faults (they
  /// come back in HttpResult::error). Calls req.on_start (when set) once, as HttpRequest says.
  virtual HttpResult post(const HttpRequest& req) = 0;
  /// Cancels this transport for good, from any thread: a post() in flight stops soon, later
  /// post() calls send nothing; both return error type "cancelled" (code 499).
  virtual void cancel() = 0;
};

/// Makes the Transport of one ConnectionPool worker (called once, on that worker's thread).
using TransportFactory = std::function<std::unique_ptr<Transport>()>;

/// One keep-alive HTTP/1.1 connection to an endpoint (reconnects transparently when the server
/// closed it). Not thread-safe: one Connection per worker thread (see ConnectionPool).
class Connection : public Transport {
 public:
  explicit Connection(const ClientOptions& options, const Clock& clock = RealClock::instance());
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  /// POSTs `req` and reads the whole response, streaming SSE through SseParser and OpenAiStream
  /// as it arrives (each read stamped with the clock before parsing). Never throws for network
  /// or server faults: they come back in HttpResult::error. A stream is successful only when it
  /// ends cleanly with [DONE] or a finish_reason; a stream that stops inside an event is an
  /// error of type "stream_cut", one that ends cleanly with neither is "stream_incomplete"
  /// (issue 21.2); non-JSON data payloads make it "protocol".
  HttpResult post(const HttpRequest& req) override;
  /// GET returning status and body (small admin endpoints: /v1/models, /health). Errors: status
  /// 0 and the body is `cannot connect to http://HOST:PORT: reason` (or another transport error).
  std::pair<int, std::string> get(const std::string& path);
  /// Cancels this connection for good, from any thread (dyn-replay on SIGINT): a post() in
  /// flight stops at its next read or at once when blocked on the socket (the socket is shut
  /// down), and later post() calls send nothing; both return error type "cancelled" (code 499,
  /// the status nginx gives a request its client abandoned), keeping what had arrived.
  void cancel() override;

 private:
  ClientOptions opts_;
  const Clock& clock_;
  std::unique_ptr<httplib::Client> cli_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace dyn::http
