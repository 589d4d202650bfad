// cpp-httplib based client: streaming receiver, arrival stamps, error classification.
#include "dyn/http/client.h"

#include <httplib.h>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "dyn/base/json.h"
#include "dyn/base/version.h"

namespace dyn::http {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void set_timeout(double s, const std::function<void(time_t, time_t)>& f) {
  double whole = std::floor(s);
  f(static_cast<time_t>(whole), static_cast<time_t>((s - whole) * 1e6));
}

/// `s` whole when short; else its first 4,000 bytes and how many more there were, so a long
/// message is never cut short silently.
std::string bounded(std::string s) {
  constexpr size_t kMax = 4000;
  if (s.size() <= kMax) return s;
  size_t more = s.size() - kMax;
  s.resize(kMax);
  return s + "... (" + std::to_string(more) + " more bytes)";
}

/// The message of an OpenAI-style error body, or the body itself.
std::string error_message(const std::string& body, const std::string& fallback) {
  Json j = Json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (auto e = j.find("error"); e != j.end()) {
      if (e->is_object())
        if (auto m = e->find("message"); m != e->end() && m->is_string()) return m->get<std::string>();
      if (e->is_string()) return e->get<std::string>();
    }
    if (auto m = j.find("message"); m != j.end() && m->is_string()) return m->get<std::string>();
  }
  std::string s = bounded(body);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s.empty() ? fallback : s;
}

std::string url_of(const Endpoint& e) {
  bool v6 = e.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

}  // namespace

std::string connect_failure_reason(const std::string& host, int port, double timeout_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) return gai_strerror(rc);
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int r = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int ms = static_cast<int>(std::max(1.0, timeout_s * 1000));
      int n = ::poll(&p, 1, ms);
      if (n == 0) {
        why = "timed out after " + std::to_string(static_cast<int>(std::ceil(timeout_s))) + " s";
        ::close(fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      r = err ? -1 : 0;
      errno = err;
    }
    if (r == 0) {
      ::close(fd);
      freeaddrinfo(res);
      return "";
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(res);
  return why;
}

Expected<Endpoint> Endpoint::parse(const std::string& url) {
  auto usage = [&](const std::string& why) { return Error{"--url " + url + ": " + why, kExitUsage}; };
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  else if (rest.find("://") != std::string::npos) return usage("only http:// URLs are supported");
  Endpoint e;
  auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) e.base_path = rest.substr(slash);
  while (!e.base_path.empty() && e.base_path.back() == '/') e.base_path.pop_back();
  std::string host = hostport;
  if (!hostport.empty() && hostport[0] == '[') {  // [v6]:port
    auto close = hostport.find(']');
    if (close == std::string::npos) return usage("bad IPv6 address");
    host = hostport.substr(1, close - 1);
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && hostport[0] == ':') {
      try {
        e.port = std::stoi(hostport.substr(1));
      } catch (...) {
        return usage("bad port");
      }
    }
  } else if (auto colon = hostport.rfind(':'); colon != std::string::npos) {
    host = hostport.substr(0, colon);
    try {
      size_t used = 0;
      e.port = std::stoi(hostport.substr(colon + 1), &used);
      if (used != hostport.size() - colon - 1) return usage("bad port");
    } catch (...) {
      return usage("bad port");
    }
  }
  if (host.empty()) return usage("no host");
  if (e.port <= 0 || e.port > 65535) return usage("port out of range");
  e.host = host;
  return e;
}

std::string Endpoint::join(const std::string& path) const {
  std::string p = path.empty() || path[0] != '/' ? "/" + path : path;
  if (base_path.size() >= 3 && base_path.compare(base_path.size() - 3, 3, "/v1") == 0 && p.rfind("/v1/", 0) == 0)
    p = p.substr(3);
  return base_path + p;
}

std::string HttpResult::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

Connection::Connection(const ClientOptions& options, const Clock& clock) : opts_(options), clock_(clock) {
  cli_ = std::make_unique<httplib::Client>(opts_.endpoint.host, opts_.endpoint.port);
  cli_->set_keep_alive(true);
  cli_->set_tcp_nodelay(true);
  cli_->set_decompress(false);
  set_timeout(opts_.connect_timeout_s, [&](time_t s, time_t us) { cli_->set_connection_timeout(s, us); });
  set_timeout(opts_.read_timeout_s, [&](time_t s, time_t us) { cli_->set_read_timeout(s, us); });
  set_timeout(std::max(opts_.connect_timeout_s, 5.0), [&](time_t s, time_t us) { cli_->set_write_timeout(s, us); });
}

Connection::~Connection() = default;

void Connection::cancel() {
  cancelled_ = true;
  cli_->stop();  // thread-safe in cpp-httplib: shuts the socket down under its socket mutex
}

std::pair<int, std::string> Connection::get(const std::string& path) {
  auto res = cli_->Get(opts_.endpoint.join(path).c_str());
  if (!res) {
    if (res.error() == httplib::Error::Connection || res.error() == httplib::Error::ConnectionTimeout) {
      std::string why = connect_failure_reason(opts_.endpoint.host, opts_.endpoint.port, opts_.connect_timeout_s);
      return {0, "cannot connect to " + url_of(opts_.endpoint) + ": " +
                     (why.empty() ? httplib::to_string(res.error()) : why)};
    }
    return {0, url_of(opts_.endpoint) + ": " + httplib::to_string(res.error())};
  }
  return {res->status, res->body};
}

HttpResult Connection::post(const HttpRequest& r) {
  HttpResult out;
  SseParser parser;
  OpenAiStream stream(r.keep_text);
  std::vector<SseEvent> events;
  std::string plain;  // non-SSE body (JSON response or error body)
  bool timed_out = false;
  double last_read_ms = 0;

  httplib::Request req;
  req.method = "POST";
  req.path = opts_.endpoint.join(r.path);
  for (const auto& [k, v] : r.headers) req.headers.emplace(k, v);
  if (!req.has_header("User-Agent")) req.headers.emplace("User-Agent", std::string("dyn-replay/") + kVersion);
  req.headers.emplace("Content-Type", "application/json");
  req.body = r.body;
  req.response_handler = [&](const httplib::Response& res) {
    out.headers_ms = clock_.now_ms();
    out.status = res.status;
    for (const auto& [k, v] : res.headers) out.headers.emplace_back(lower(k), v);
    out.streamed = res.get_header_value("Content-Type").find("text/event-stream") != std::string::npos;
    return !cancelled_;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (cancelled_) return false;
    double now = clock_.now_ms();
    last_read_ms = now;
    ++out.reads;
    out.body_bytes += n;
    if (out.streamed && out.status >= 200 && out.status < 300) {
      parser.feed(std::string_view(data, n), now, events);
      for (const auto& ev : events) stream.on_event(ev);
      events.clear();
    } else if (plain.size() < (64u << 20)) {
      plain.append(data, n);
    }
    if (opts_.request_timeout_s > 0 && now - out.start_ms > opts_.request_timeout_s * 1000) {
      timed_out = true;
      return false;
    }
    return true;
  };

  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  auto fail = [&](int code, std::string type, std::string message) {
    out.error = HttpError{code, std::move(type), std::move(message)};
  };
  out.start_ms = clock_.now_ms();
  if (r.on_start) r.on_start();
  if (cancelled_) {
    out.end_ms = out.start_ms;
    fail(499, "cancelled", "cancelled before it was sent");
    return out;
  }
  bool ok = cli_->send(req, res, err);
  out.end_ms = clock_.now_ms();
  if (!ok) {
    double silent_ms = out.end_ms - (last_read_ms > 0     ? last_read_ms
                                     : out.headers_ms > 0 ? out.headers_ms
                                                          : out.start_ms);
    bool read_timeout = silent_ms + 50 >= opts_.read_timeout_s * 1000;
    if (cancelled_) {  // whatever the transport said, the cause is the cancel
      fail(499, "cancelled",
           out.status ? "cancelled mid-response after " + std::to_string(out.body_bytes) + " bytes"
                      : "cancelled before the response headers");
    } else if (timed_out) {
      fail(out.status, "timeout", "request exceeded " + std::to_string(opts_.request_timeout_s) + " s");
    } else if (err == httplib::Error::ConnectionTimeout) {
      fail(0, "timeout", "connect timed out");
    } else if (err == httplib::Error::Connection) {
      std::string why = connect_failure_reason(opts_.endpoint.host, opts_.endpoint.port, opts_.connect_timeout_s);
      fail(0, "connection",
           "cannot connect to " + url_of(opts_.endpoint) + ": " + (why.empty() ? httplib::to_string(err) : why));
    } else if (out.status > 0 && read_timeout) {
      fail(out.status, "timeout", "no data for " + std::to_string(opts_.read_timeout_s) + " s mid-response");
    } else if (out.status > 0) {
      fail(out.status, "stream_cut",
           "connection lost mid-response after " + std::to_string(out.body_bytes) + " bytes (" +
               httplib::to_string(err) + ")");
    } else if (read_timeout) {
      fail(0, "timeout", "no response headers within " + std::to_string(opts_.read_timeout_s) + " s");
    } else {
      fail(0, "connection", "no response: " + httplib::to_string(err));
    }
    if (out.streamed) {  // keep what did arrive (it has timings), but it stays an error
      parser.finish(events);
      for (const auto& ev : events) stream.on_event(ev);
    }
    out.summary = std::move(stream.summary());
    return out;
  }
  if (out.status < 200 || out.status >= 300) {
    fail(out.status, "http",
         error_message(plain, res.reason.empty() ? "HTTP " + std::to_string(out.status) : res.reason));
    out.summary = std::move(stream.summary());
    return out;
  }
  if (out.streamed) {
    bool clean = parser.finish(events);
    for (const auto& ev : events) stream.on_event(ev);
    auto& s = stream.summary();
    if (s.stream_error) fail(out.status, s.error_type, s.error_message);
    else if (!clean)
      fail(out.status, "stream_cut", "stream ended inside an event after " + std::to_string(out.body_bytes) + " bytes");
    else if (s.parse_errors)
      fail(out.status, "protocol",
           std::to_string(s.parse_errors) + " SSE data payload(s) are not JSON, first: " + s.first_parse_error);
    else if (!s.done && s.finish_reason.empty())
      fail(out.status, "stream_incomplete", "stream ended without a finish reason or [DONE]");
  } else {
    stream.on_body(plain, out.end_ms);
    auto& s = stream.summary();
    if (s.stream_error) fail(out.status, s.error_type, s.error_message);
    else if (s.parse_errors) fail(out.status, "protocol", "response body is not JSON: " + s.first_parse_error);
  }
  out.summary = std::move(stream.summary());
  return out;
}

}  // namespace dyn::http
