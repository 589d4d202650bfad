// Server helpers: binding with --port 0 / --port-file, signal watcher, OpenAI-style errors.
#include "dyn/http/server.h"

#include "dyn/api/api.h"
#include "dyn/http/pool.h"

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <fstream>

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dyn::http {

Expected<int> bind_server(httplib::Server& server, const ListenOptions& o) {
  size_t threads = o.threads == 0 ? 1 : o.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_keep_alive_max_count(o.keep_alive_max_count);
  server.set_keep_alive_timeout(o.keep_alive_timeout_s);
  server.set_tcp_nodelay(true);
  // cpp-httplib's default sets SO_REUSEPORT, with which a second server on a busy port binds
  // without error and silently takes part of the traffic (issue 16). SO_REUSEADDR alone still
  // allows a restart on a port in TIME_WAIT, but a port someone listens on fails to bind.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  int port = o.port;
  if (port == 0) {
    port = server.bind_to_any_port(o.host);
    if (port <= 0) return Error{"cannot bind " + o.host + " to a free port", kExitIo};
  } else if (!server.bind_to_port(o.host, port)) {
    return Error{"cannot bind " + o.host + ":" + std::to_string(port) + " (port in use, or not allowed)", kExitIo};
  }
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of connects (1,000 sessions starting
  // together) would overflow it and clients would see resets.
  widen_listen_backlog(port);
  if (auto e = write_port_file(o.port_file, port)) return *e;
  return port;
}

std::optional<Error> write_port_file(const std::string& path, int port) {
  return write_port_file(path, std::vector<int>{port});
}

std::optional<Error> write_port_file(const std::string& path, const std::vector<int>& ports) {
  if (path.empty()) return std::nullopt;
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    for (int port : ports) f << port << "\n";
    if (!f) return Error{"cannot write port file " + path, kExitIo};
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Error{"cannot write port file " + path, kExitIo};
  }
  return std::nullopt;
}

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal, bool exit_on_second)
    : on_signal_(std::move(on_signal)) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this, set, exit_on_second] {
    // Sleeps until a signal comes: stop() sends this thread one of its own. A 100 ms poll here
    // was a third of an idle router's CPU (issue 54: ten wake-ups a second on a VM).
    for (;;) {
      int sig = sigwaitinfo(&set, nullptr);
      if (stop_.load()) return;
      if (sig <= 0) continue;
      if (received_.exchange(sig) != 0) std::_Exit(kExitInterrupted);
      on_signal_(sig);
      if (!exit_on_second) return;
    }
  });
}

SignalWatcher::~SignalWatcher() { stop(); }

void SignalWatcher::stop() {
  stop_.store(true);
  if (!thread_.joinable() || thread_.get_id() == std::this_thread::get_id()) return;
  // SIGTERM to the watcher thread alone (it blocks it, so sigwaitinfo takes it, now or once
  // on_signal returns): it sees stop_ and ends without calling on_signal. A thread that has
  // returned already is not signalled (glibc: the id stays valid until joined).
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

const char* error_type_for_status(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 502: return "bad_gateway";
    case 503: return "service_unavailable";
    case 504: return "timeout";
    default: return status >= 500 ? "internal_server_error" : "invalid_request_error";
  }
}

std::string openai_error_text(std::string_view message, std::string_view type, int code) {
  // replace: messages may quote client bytes (a path, a header name) that are not UTF-8.
  return api::error_body(api::Api::kChat, message, type, code).dump(-1, ' ', false, Json::error_handler_t::replace) +
         "\n";
}

void set_error(httplib::Response& res, int status, std::string_view type, std::string_view message) {
  res.status = status;
  res.set_content(openai_error_text(message, type, status), "application/json");
}

std::vector<std::pair<std::string, std::string>> header_list(const httplib::Headers& headers) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(headers.size());
  for (const auto& [k, v] : headers) out.emplace_back(k, v);
  return out;
}

bool is_loopback_address(std::string_view a) {
  if (a == "::1") return true;
  if (a.rfind("::ffff:", 0) == 0) a.remove_prefix(7);
  return a.rfind("127.", 0) == 0;
}

std::string header_with_control_bytes(const httplib::Headers& headers) {
  auto bad = [](const std::string& s) { return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos; };
  for (const auto& [k, v] : headers) {
    if (bad(k) || bad(v)) return k;
  }
  return "";
}

bool header_name_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace dyn::http
