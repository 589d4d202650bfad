// ZMQ transport of harness tool events: the router's PULL receiver and a harness's PUSH sender.
#include <chrono>

#include <fmt/format.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "dyn/base/diag.h"
#include "dyn/kvevents/pubsub.h"
#include "dyn/toolevents/toolevents.h"

namespace dyn::toolevents {

std::string zmq_address(const std::string& endpoint) {
  if (endpoint.size() > 2 && endpoint.compare(endpoint.size() - 2, 2, ":0") == 0)
    return endpoint.substr(0, endpoint.size() - 1) + "*";
  return endpoint;
}

struct Receiver::Sockets {
  zmq::context_t ctx{1};
  zmq::socket_t pull{ctx, zmq::socket_type::pull};
};

Receiver::Receiver(const std::string& endpoint, std::string topic, Handler handler)
    : s_(std::make_unique<Sockets>()), topic_(std::move(topic)), handler_(std::move(handler)) {
  try {
    s_->pull.set(zmq::sockopt::linger, 0);
    s_->pull.set(zmq::sockopt::rcvtimeo, 100);  // the thread checks stop_ this often
    s_->pull.bind(zmq_address(endpoint));
    endpoint_ = s_->pull.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    throw Fatal(kExitIo, fmt::format("cannot bind the tool event endpoint {}: {}", endpoint, e.what()));
  }
  thread_ = std::thread([this] { run(); });
}

Receiver::~Receiver() { stop(); }

void Receiver::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string Receiver::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void Receiver::malformed(const std::string& why) {
  uint64_t n = ++stats_.malformed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = why;
  }
  if (n <= 5 || n % 100 == 0) diag::warning(endpoint_, fmt::format("malformed tool event #{} skipped: {}", n, why));
}

void Receiver::run() {
  while (!stop_) {
    std::vector<zmq::message_t> frames;
    try {
      auto got = zmq::recv_multipart(s_->pull, std::back_inserter(frames));
      if (!got) continue;  // timeout: look at stop_
    } catch (const zmq::error_t& e) {
      if (stop_) break;
      malformed(std::string("receive failed: ") + e.what());
      continue;
    }
    ++stats_.frames;
    if (frames.size() != 3) {
      malformed(fmt::format("expected 3 frames [topic, seq, payload], got {}", frames.size()));
      continue;
    }
    if (!topic_.empty() && frames[0].to_string_view() != topic_) {
      ++stats_.other_topic;
      continue;
    }
    if (!kvevents::decode_seq(frames[1].data(), frames[1].size())) {
      malformed(fmt::format("sequence frame of {} bytes (want 8, big-endian)", frames[1].size()));
      continue;
    }
    auto event = decode_tool_event(frames[2].to_string_view());
    if (!event) {
      malformed(event.error().message);
      continue;
    }
    ++stats_.accepted;
    handler_(std::move(*event));
  }
}

struct Sender::Sockets {
  zmq::context_t ctx{1};
  zmq::socket_t push{ctx, zmq::socket_type::push};
};

Sender::Sender(const std::string& endpoint, std::string topic)
    : s_(std::make_unique<Sockets>()), topic_(std::move(topic)) {
  try {
    s_->push.set(zmq::sockopt::sndhwm, 10000);
    s_->push.set(zmq::sockopt::linger, 2000);
    s_->push.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw Fatal(kExitUsage, fmt::format("--tool-events-endpoint {}: {}", endpoint, e.what()));
  }
}

Sender::~Sender() = default;  // the context's close waits out the linger

void Sender::send(const records::ToolEvent& e) {
  std::string payload = encode_tool_event(e);
  std::lock_guard<std::mutex> lock(mu_);
  std::string seq = kvevents::encode_seq(seq_++);
  try {
    std::array<zmq::const_buffer, 3> parts{zmq::buffer(topic_), zmq::buffer(seq), zmq::buffer(payload)};
    if (zmq::send_multipart(s_->push, parts, zmq::send_flags::dontwait)) {
      ++sent_;
      return;
    }
  } catch (const zmq::error_t&) {
  }
  ++dropped_;
}

}  // namespace dyn::toolevents
