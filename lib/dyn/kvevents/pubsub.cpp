// ZMQ transport of vLLM's KV events (see pubsub.h).
#include "dyn/kvevents/pubsub.h"

#include <chrono>

#include <fmt/format.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "dyn/base/diag.h"

namespace dyn::kvevents {

std::optional<uint64_t> decode_seq(const void* data, size_t size) {
  if (size != 8) return std::nullopt;
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

std::string encode_seq(uint64_t seq) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, seq >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(seq & 0xff);
  return s;
}

namespace {
constexpr uint64_t kEndSeq = UINT64_MAX;  // vLLM's END_SEQ: (-1).to_bytes(8, "big", signed=True)
}

// ---- publisher ---------------------------------------------------------------------------

struct Publisher::Sockets {
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;
};

Publisher::Publisher(PublisherOptions options) : opt_(std::move(options)), s_(std::make_unique<Sockets>()) {
  try {
    s_->pub.set(zmq::sockopt::sndhwm, 100000);  // vLLM's default high-water mark
    s_->pub.set(zmq::sockopt::linger, 1000);
    s_->pub.bind(opt_.endpoint);
    endpoint_ = s_->pub.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    throw Fatal(kExitIo, fmt::format("cannot bind KV event endpoint {}: {}", opt_.endpoint, e.what()));
  }
  if (!opt_.replay_endpoint.empty()) {
    try {
      s_->replay.emplace(s_->ctx, zmq::socket_type::router);
      s_->replay->set(zmq::sockopt::linger, 0);
      s_->replay->bind(opt_.replay_endpoint);
      replay_endpoint_ = s_->replay->get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      throw Fatal(kExitIo, fmt::format("cannot bind KV event replay endpoint {}: {}", opt_.replay_endpoint, e.what()));
    }
  }
  thread_ = std::thread([this] { run(); });
}

Publisher::~Publisher() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Publisher::publish(const EventBatch& batch) {
  std::string payload = encode_batch(batch, opt_.layout);
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(payload));
  }
  cv_.notify_all();
}

void Publisher::run() {
  std::deque<std::pair<uint64_t, std::string>> buffer;  // (seq, payload), oldest first
  uint64_t next_seq = 0;
  for (;;) {
    std::deque<std::string> work;
    bool stopping;
    {
      std::unique_lock lk(mu_);
      // Wake for a batch at once; otherwise look at the replay socket every 5 ms.
      cv_.wait_for(lk, std::chrono::milliseconds(5), [&] { return stop_ || !queue_.empty(); });
      work.swap(queue_);
      stopping = stop_;
    }
    for (auto& payload : work) {
      uint64_t seq = next_seq++;
      std::string seq_bytes = encode_seq(seq);
      try {
        s_->pub.send(zmq::buffer(opt_.topic), zmq::send_flags::sndmore);
        s_->pub.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
        s_->pub.send(zmq::buffer(payload), zmq::send_flags::none);
      } catch (const zmq::error_t& e) {
        diag::warning("KV events", fmt::format("publishing batch {} failed: {}", seq, e.what()));
      }
      published_++;
      buffer.emplace_back(seq, std::move(payload));
      if (buffer.size() > opt_.buffer_steps) buffer.pop_front();
    }
    while (s_->replay) {
      std::vector<zmq::message_t> req;
      std::optional<size_t> n;
      try {
        n = zmq::recv_multipart(*s_->replay, std::back_inserter(req), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t&) {
        break;
      }
      if (!n) break;
      // [client identity, empty delimiter, start seq]: anything else is ignored, as vLLM does.
      auto start = req.size() == 3 ? decode_seq(req[2].data(), req[2].size()) : std::nullopt;
      if (!start) {
        diag::warning("KV events", fmt::format("ignored a malformed replay request ({} frames)", req.size()));
        continue;
      }
      try {
        for (const auto& [seq, payload] : buffer) {
          if (seq < *start) continue;
          std::string sb = encode_seq(seq);
          s_->replay->send(zmq::buffer(req[0].data(), req[0].size()), zmq::send_flags::sndmore);
          s_->replay->send(zmq::const_buffer(), zmq::send_flags::sndmore);
          s_->replay->send(zmq::buffer(sb), zmq::send_flags::sndmore);
          s_->replay->send(zmq::buffer(payload), zmq::send_flags::none);
        }
        std::string end = encode_seq(kEndSeq);
        s_->replay->send(zmq::buffer(req[0].data(), req[0].size()), zmq::send_flags::sndmore);
        s_->replay->send(zmq::const_buffer(), zmq::send_flags::sndmore);
        s_->replay->send(zmq::buffer(end), zmq::send_flags::sndmore);
        s_->replay->send(zmq::const_buffer(), zmq::send_flags::none);
      } catch (const zmq::error_t& e) {
        diag::warning("KV events", fmt::format("answering a replay request failed: {}", e.what()));
      }
    }
    if (stopping) return;
  }
}

// ---- subscriber --------------------------------------------------------------------------

struct Subscriber::Sockets {
  zmq::context_t ctx{1};
  std::optional<zmq::socket_t> sub;
  std::optional<zmq::socket_t> monitor;  // ZMQ_EVENT_DISCONNECTED of `sub`
  std::optional<zmq::socket_t> replay;   // DEALER, recreated after a timed-out request
};

Subscriber::Subscriber(SubscriberOptions options, Handler handler)
    : opt_(std::move(options)), handler_(std::move(handler)), s_(std::make_unique<Sockets>()) {}

Subscriber::~Subscriber() { stop(); }

void Subscriber::start() {
  try {
    s_->sub.emplace(s_->ctx, zmq::socket_type::sub);
    s_->sub->set(zmq::sockopt::linger, 0);
    s_->sub->set(zmq::sockopt::rcvhwm, 100000);
    s_->sub->set(zmq::sockopt::subscribe, opt_.topic);
    // A restarted publisher is noticed through the dropped connection (its new sequence may
    // already be past ours by the time we reconnect).
    std::string mon = fmt::format("inproc://dyn-kvevents-monitor-{}", static_cast<const void*>(this));
    if (zmq_socket_monitor(s_->sub->handle(), mon.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) throw zmq::error_t();
    s_->monitor.emplace(s_->ctx, zmq::socket_type::pair);
    s_->monitor->connect(mon);
    s_->sub->connect(opt_.endpoint);
  } catch (const zmq::error_t& e) {
    throw Fatal(kExitUsage, fmt::format("KV event endpoint {}: {}", opt_.endpoint, e.what()));
  }
  if (!opt_.replay_endpoint.empty()) {
    try {
      zmq::socket_t probe(s_->ctx, zmq::socket_type::dealer);
      probe.set(zmq::sockopt::linger, 0);
      probe.connect(opt_.replay_endpoint);  // validates the address now
    } catch (const zmq::error_t& e) {
      throw Fatal(kExitUsage, fmt::format("KV event replay endpoint {}: {}", opt_.replay_endpoint, e.what()));
    }
  }
  thread_ = std::thread([this] { run(); });
}

void Subscriber::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Subscriber::deliver(uint64_t seq, const std::string& payload, bool replayed) {
  auto b = decode_batch(payload);
  stats_.last_seq = static_cast<int64_t>(seq);
  last_ = seq;
  if (!b) {
    if (stats_.bad_batches++ % 100 == 0)
      diag::warning(opt_.label, fmt::format("skipped KV event batch {}: {}", seq, b.error().message));
    return;
  }
  stats_.batches++;
  if (replayed) stats_.replayed_batches++;
  handler_.batch(seq, *b, replayed);
}

bool Subscriber::fetch(uint64_t from, uint64_t to, bool partial_ok, std::string& why) {
  if (opt_.replay_endpoint.empty()) {
    why = "no replay endpoint";
    return false;
  }
  std::vector<std::pair<uint64_t, std::string>> got;
  try {
    if (!s_->replay) {
      s_->replay.emplace(s_->ctx, zmq::socket_type::dealer);
      s_->replay->set(zmq::sockopt::linger, 0);
      s_->replay->connect(opt_.replay_endpoint);
    }
    std::string start = encode_seq(from);
    s_->replay->send(zmq::const_buffer(), zmq::send_flags::sndmore);
    s_->replay->send(zmq::buffer(start), zmq::send_flags::none);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::microseconds(static_cast<int64_t>(opt_.replay_timeout_ms * 1000));
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      zmq::pollitem_t item{s_->replay->handle(), 0, ZMQ_POLLIN, 0};
      if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0) {
        // A late answer must not be read as the answer to the next request.
        s_->replay.reset();
        why = fmt::format("the replay endpoint did not answer within {} ms", opt_.replay_timeout_ms);
        return false;
      }
      std::vector<zmq::message_t> msg;
      if (!zmq::recv_multipart(*s_->replay, std::back_inserter(msg))) continue;
      // [empty delimiter, seq, payload]
      auto seq = msg.size() == 3 ? decode_seq(msg[1].data(), msg[1].size()) : std::nullopt;
      if (!seq) {
        s_->replay.reset();
        why = fmt::format("malformed replay answer ({} frames)", msg.size());
        return false;
      }
      if (*seq == kEndSeq) break;
      if (*seq >= from && *seq < to) got.emplace_back(*seq, msg[2].to_string());
    }
  } catch (const zmq::error_t& e) {
    s_->replay.reset();
    why = fmt::format("replay request failed: {}", e.what());
    return false;
  }
  // Complete only if the buffer still held every batch from `from` on.
  uint64_t first = got.empty() ? to : got.front().first;
  uint64_t expect = partial_ok ? first : from;
  for (const auto& [seq, payload] : got) {
    if (seq != expect) break;
    ++expect;
  }
  if (partial_ok && expect == to && first != from) {
    // On joining, the newest contiguous part of the history is better than none.
    for (const auto& [seq, payload] : got) deliver(seq, payload, true);
    why = fmt::format("the publisher's replay buffer starts at batch {}", first);
    return false;
  }
  if (expect != to) {
    why = got.empty() || got.front().first != from
              ? fmt::format("the publisher's replay buffer no longer holds batch {}", from)
              : fmt::format("the replay answer stopped at batch {}", expect);
    // Nothing is delivered: batches after a hole would continue blocks the index never saw, so
    // the caller resets instead.
    return false;
  }
  for (const auto& [seq, payload] : got) deliver(seq, payload, true);
  return true;
}

void Subscriber::join_at(uint64_t seq) {
  // Ask for the publisher's history 0 … seq-1 so the index starts complete.
  if (seq == 0) return;
  std::string why;
  if (fetch(0, seq, /*partial_ok=*/true, why)) {
    diag::note(fmt::format("{}: joined at KV event batch {}; replayed batches 0-{}", opt_.label, seq, seq - 1));
  } else {
    diag::warning(opt_.label, fmt::format("joined at KV event batch {} and could not replay the earlier ones ({}): "
                                          "blocks cached before are unknown to the router until evicted",
                                          seq, why));
  }
}

void Subscriber::run() {
  bool reconnected = false;
  while (!stop_) {
    zmq::pollitem_t items[2] = {{s_->sub->handle(), 0, ZMQ_POLLIN, 0}, {s_->monitor->handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(100));
    } catch (const zmq::error_t&) {
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      std::vector<zmq::message_t> ev;
      (void)zmq::recv_multipart(*s_->monitor, std::back_inserter(ev));
      if (last_) reconnected = true;  // a dropped publisher connection: maybe a restart
    }
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> msg;
    if (!zmq::recv_multipart(*s_->sub, std::back_inserter(msg))) continue;
    auto seq = msg.size() == 3 ? decode_seq(msg[1].data(), msg[1].size()) : std::nullopt;
    if (!seq) {
      if (stats_.bad_batches++ % 100 == 0)
        diag::warning(opt_.label,
                      fmt::format("skipped a KV event message of {} frames (want topic, seq, payload)", msg.size()));
      continue;
    }
    if (last_ && (*seq <= *last_ || reconnected)) {
      stats_.restarts++;
      std::string why = *seq <= *last_ ? fmt::format("publisher restarted (batch {} after {})", *seq, *last_)
                                       : "the publisher connection dropped and came back";
      handler_.reset(why);
      diag::warning(opt_.label, "cleared the worker's KV index: " + why);
      last_.reset();
    }
    reconnected = false;
    if (!last_) {
      join_at(*seq);
    } else if (*seq > *last_ + 1) {
      stats_.gaps++;
      std::string why;
      uint64_t from = *last_ + 1;
      if (fetch(from, *seq, /*partial_ok=*/false, why)) {
        diag::note(fmt::format("{}: missed KV event batches {}-{}, replayed them", opt_.label, from, *seq - 1));
      } else {
        stats_.gaps_unrecovered++;
        std::string what =
            fmt::format("missed KV event batches {}-{} and could not replay them ({})", from, *seq - 1, why);
        handler_.reset(what);
        diag::warning(opt_.label, "cleared the worker's KV index: " + what);
      }
    }
    deliver(*seq, msg[2].to_string(), false);
  }
}

}  // namespace dyn::kvevents
