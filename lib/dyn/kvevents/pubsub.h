// vLLM's KV event transport over ZMQ: a PUB socket sending [topic, seq (8 bytes, big-endian),
// payload] and a ROUTER socket that replays buffered batches from a requested sequence number
// (vllm/distributed/kv_events.py ZmqEventPublisher; SGLang uses the same).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "dyn/kvevents/codec.h"

namespace dyn::kvevents {

/// Publisher settings. Endpoints are ZMQ addresses the publisher binds ("tcp://127.0.0.1:5557";
/// a port of "*" takes a free one, see Publisher::endpoint()). vLLM connects instead of binding
/// when the address has no wildcard; a mock engine that a router subscribes to must bind.
struct PublisherOptions {
  std::string endpoint;
  std::string replay_endpoint;   ///< "" = no replay socket
  std::string topic;             ///< first frame of every message (vLLM's default: "")
  size_t buffer_steps = 10'000;  ///< batches kept for replay (vLLM's default)
  /// How each batch is encoded (codec.h Layout): current vLLM's maps by default; kArrays for a
  /// subscriber written against older vLLM (dyn-mocker --kv-events-encoding array).
  Layout layout = Layout::kMaps;
};

/// Publishes batches with sequence numbers 0, 1, 2, ... from its own thread (ZMQ sockets are
/// single-threaded), and answers replay requests: a request [ "", start_seq(8 bytes BE) ] gets
/// one [ "", seq, payload ] per buffered batch with seq >= start_seq, then [ "", -1 (8 bytes),
/// "" ] as the end marker. Thread-safe publish().
class Publisher {
 public:
  /// Binds the sockets. Fatal(kExitIo) naming the endpoint when one cannot be bound.
  explicit Publisher(PublisherOptions options);
  /// Sends what is queued, then closes the sockets.
  ~Publisher();
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  /// Queues a batch; it gets the next sequence number when sent.
  void publish(const EventBatch& batch);
  /// The bound addresses (a "*" port resolved).
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }
  uint64_t published() const { return published_.load(); }

 private:
  void run();
  struct Sockets;
  PublisherOptions opt_;
  std::unique_ptr<Sockets> s_;
  std::string endpoint_, replay_endpoint_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool stop_ = false;
  std::atomic<uint64_t> published_{0};
  std::thread thread_;
};

/// Subscriber settings: the addresses a worker's publisher bound (connected to, so the
/// publisher may start later or restart).
struct SubscriberOptions {
  std::string endpoint;
  std::string replay_endpoint;  ///< "" = gaps cannot be replayed: the handler's index is reset
  std::string topic;            ///< subscription prefix ("" = every message)
  std::string label;            ///< names the worker in diagnostics ("worker 0 (tcp://…)")
  double replay_timeout_ms = 2000;
};

/// Receives one publisher's batches and hands them to the handler strictly in sequence order,
/// from its own thread:
/// - a gap (seq > last + 1) is fetched from the replay socket; when it cannot be (no replay
///   socket, no answer in replay_timeout_ms, or the publisher's buffer no longer holds it) the
///   handler's `reset` is called, then the batch is delivered;
/// - a publisher restart (seq <= last, or the connection dropped and came back) resets too, and
///   the new publisher's history is fetched from seq 0 when it has a replay socket;
/// - on joining, a publisher already at seq N > 0 is asked for 0 … N-1, so a router started
///   after its workers learns what they hold (as far as their replay buffers reach).
/// Undecodable payloads are counted and skipped (diagnostic once per 100).
class Subscriber {
 public:
  struct Handler {
    /// A batch, in order. `replayed`: it came from the replay socket.
    std::function<void(uint64_t seq, const EventBatch& batch, bool replayed)> batch;
    /// Everything known about the worker's cache is stale: clear it. `why` for diagnostics.
    std::function<void(const std::string& why)> reset;
  };
  struct Stats {
    std::atomic<uint64_t> batches{0};  ///< delivered, replayed ones included
    std::atomic<uint64_t> replayed_batches{0};
    std::atomic<uint64_t> gaps{0};              ///< sequence gaps detected
    std::atomic<uint64_t> gaps_unrecovered{0};  ///< gaps the replay socket could not fill
    std::atomic<uint64_t> restarts{0};          ///< publisher restarts / reconnections seen
    std::atomic<uint64_t> bad_batches{0};       ///< undecodable payloads or frames
    std::atomic<int64_t> last_seq{-1};
  };

  Subscriber(SubscriberOptions options, Handler handler);
  ~Subscriber();  ///< stops the thread
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  /// Connects and starts the thread. Fatal(kExitUsage) for an address ZMQ rejects.
  void start();
  void stop();
  const Stats& stats() const { return stats_; }

 private:
  void run();
  struct Sockets;
  /// Delivers batches from … to-1 from the replay socket; false (nothing delivered) when incomplete,
  /// except that with partial_ok a contiguous tail ending at to-1 is delivered (still false).
  bool fetch(uint64_t from, uint64_t to, bool partial_ok, std::string& why);
  void deliver(uint64_t seq, const std::string& payload, bool replayed);
  void join_at(uint64_t seq);

  SubscriberOptions opt_;
  Handler handler_;
  std::unique_ptr<Sockets> s_;
  Stats stats_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::optional<uint64_t> last_;
};

/// Decodes an 8-byte big-endian sequence frame; nullopt for another size.
std::optional<uint64_t> decode_seq(const void* data, size_t size);
/// The 8-byte big-endian form of `seq`.
std::string encode_seq(uint64_t seq);

}  // namespace dyn::kvevents
