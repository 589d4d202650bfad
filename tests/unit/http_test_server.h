// In-process cpp-httplib server on 127.0.0.1, port 0, for HTTP client tests with scripted faults.
#pragma once

#include <httplib.h>

#include "dyn/http/pool.h"

#include <stdexcept>
#include <thread>

namespace dyn::testing {

/// Binds 127.0.0.1 on a free port, serves on a background thread, stops and joins on
/// destruction. Register handlers on `server` before calling start().
struct TestServer {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  explicit TestServer(size_t threads = 64) {
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_tcp_nodelay(true);  // small SSE writes must not wait for delayed ACKs (Nagle)
  }
  void start() {
    port = server.bind_to_any_port("127.0.0.1");
    if (port <= 0) throw std::runtime_error("cannot bind 127.0.0.1");
    dyn::http::widen_listen_backlog(port);  // httplib's backlog of 5 drops bursts of connects
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  ~TestServer() {
    server.stop();
    if (thread.joinable()) thread.join();
  }
};

/// An OpenAI chat chunk line pair "data: {...}\n\n" with the given delta content.
inline std::string chunk(const std::string& content, const char* finish = nullptr) {
  std::string fr = finish ? std::string("\"") + finish + "\"" : "null";
  return "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" +
         content + "\"},\"finish_reason\":" + fr + "}]}\n\n";
}

}  // namespace dyn::testing
