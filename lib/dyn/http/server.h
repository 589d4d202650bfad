// Server helpers on cpp-httplib: listening on loopback with --port 0 / --port-file, a large thread
// pool, clean stop on SIGTERM/SIGINT, OpenAI-style error bodies and header lists.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>

#include "dyn/base/error.h"

namespace dyn::http {

/// Where and how a server listens.
struct ListenOptions {
  std::string host = "127.0.0.1";  ///< loopback unless told otherwise (DESIGN: admin on loopback)
  int port = 8000;                 ///< 0 = any free port
  std::string port_file;           ///< written with the bound port once listening ("" = none)
  /// Worker threads. cpp-httplib serves one connection per thread for the connection's whole
  /// life (keep-alive included), so this bounds the concurrent connections; the Debian default
  /// (a handful) would serialize streaming clients.
  size_t threads = 1024;
  /// Requests served on one keep-alive connection before it is closed, and its idle timeout.
  size_t keep_alive_max_count = 100000;
  time_t keep_alive_timeout_s = 5;
};

/// Applies the ListenOptions' thread pool and keep-alive settings, binds, and writes the port
/// file (temp + rename, so a reader never sees a partial number). Returns the bound port.
/// A port another process listens on is a bind failure (no SO_REUSEPORT sharing: issue 16).
/// Errors: bind failure or an unwritable port file -> Error (exit code 4).
Expected<int> bind_server(httplib::Server& server, const ListenOptions& options);

/// Writes `port` and a newline to `path` through a temp file and rename (a reader never sees a
/// partial number); "" = nothing to write. Errors: Error (exit code 4) naming the file.
std::optional<Error> write_port_file(const std::string& path, int port);
/// The same with one port a line, in the given order (a process with several listeners:
/// dyn-mocker --num-workers).
std::optional<Error> write_port_file(const std::string& path, const std::vector<int>& ports);

/// Blocks SIGTERM and SIGINT in the calling thread (call before any other thread starts, so every
/// thread inherits the mask) and runs a watcher thread that calls `on_signal(signo)` once when
/// one arrives. With `exit_on_second`, a second signal then ends the process at once with exit
/// status 130 (DESIGN: interrupted), the escape hatch of a clean stop that is taking too long.
/// stop() (or the destructor) ends the watcher without a signal. Thread-safe.
class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int)> on_signal, bool exit_on_second = false);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  void stop();
  /// The signal that arrived, or 0.
  int received() const { return received_.load(); }

 private:
  std::function<void(int)> on_signal_;
  std::atomic<bool> stop_{false};
  std::atomic<int> received_{0};
  std::thread thread_;
};

/// The OpenAI error body (api::error_body) as the text of a response body: one JSON line; bytes
/// that are not UTF-8 become U+FFFD.
std::string openai_error_text(std::string_view message, std::string_view type, int code);
/// Sets `res` to status `status` with an OpenAI-style error body (application/json).
void set_error(httplib::Response& res, int status, std::string_view type, std::string_view message);
/// The error type for an HTTP status: 400 invalid_request_error, 404 not_found_error,
/// 429 rate_limit_error, 503 service_unavailable, 5xx internal_server_error, ...
const char* error_type_for_status(int status);

/// Request headers as (name, value) pairs (names as received; duplicates kept).
std::vector<std::pair<std::string, std::string>> header_list(const httplib::Headers& headers);

/// True for a loopback peer address: 127.0.0.0/8, ::1 and IPv4-mapped ::ffff:127.x.y.z
/// (cpp-httplib's Request::remote_addr text). Used to keep admin endpoints local (docs/cli.md).
bool is_loopback_address(std::string_view addr);

/// The name of the first header whose name or value holds CR, LF or NUL, or "" when none does.
/// cpp-httplib 0.11 percent-decodes header values ("%0d%0a" arrives as CR LF), so such bytes can
/// reach a handler; forwarding them would inject headers upstream, so callers answer 400.
std::string header_with_control_bytes(const httplib::Headers& headers);

/// Case-insensitive ASCII comparison of header names.
bool header_name_equal(std::string_view a, std::string_view b);

}  // namespace dyn::http
