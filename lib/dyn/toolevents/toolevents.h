// Harness tool events as Dynamo takes them in (lib/llm request_trace tool relay): ZMQ multipart
// [topic "agent-tool-events", seq (8 bytes, big-endian), msgpack(RequestTraceToolEventIngress)],
// a PULL socket bound by the router and PUSH sockets connected by harnesses.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "dyn/base/error.h"
#include "dyn/records/rows.h"

namespace dyn::toolevents {

/// Dynamo's default first frame (DYN_REQUEST_TRACE_TOOL_EVENTS_ZMQ_TOPIC).
inline constexpr const char* kDefaultTopic = "agent-tool-events";

/// Status spellings Dynamo's RequestTraceToolStatus accepts, normalized: running, succeeded
/// (ok, success), error (failed, timeout), cancelled (canceled); nullopt for anything else.
std::optional<std::string> normalize_tool_status(std::string_view status);

/// Decodes one payload: a msgpack map {schema "dynamo.request.trace.v1", event_type tool_start |
/// tool_end | tool_error, event_time_unix_ms (u64), session_id (non-empty), parent_session_id?,
/// tool {tool_call_id (non-empty), tool_class, status?, started_at_unix_ms?, ended_at_unix_ms?,
/// duration_ms? (number >= 0), output_tokens?, output_bytes?, tool_name_hash?, error_type?}}.
/// Unknown keys are ignored and nil counts as absent, as serde does. Errors (kExitBadData): not
/// msgpack, trailing bytes, a missing or mistyped field, another schema or event type, an
/// unknown status; the message names the field.
Expected<records::ToolEvent> decode_tool_event(std::string_view payload);
/// The msgpack map decode_tool_event reads (named fields, as rmp_serde::to_vec_named; absent
/// optionals omitted).
std::string encode_tool_event(const records::ToolEvent& e);

/// The ZMQ address to bind or connect for `endpoint`: "tcp://host:0" becomes "tcp://host:*" (a
/// free port; ZMQ's own spelling). Other addresses pass unchanged.
std::string zmq_address(const std::string& endpoint);

/// Binds a PULL socket and decodes what arrives on its own thread, so the caller's loop never
/// waits on ZMQ. Every frame set is counted: accepted events go to the handler (on the receiver
/// thread, in arrival order); a frame count other than 3, a sequence frame not 8 bytes long or an
/// undecodable payload is malformed (counted, warned for the first 5 and every 100th, never
/// fatal); another topic is counted apart (Dynamo drops it too). An empty topic accepts any.
class Receiver {
 public:
  struct Stats {
    std::atomic<uint64_t> frames{0};  ///< multipart messages received
    std::atomic<uint64_t> accepted{0};
    std::atomic<uint64_t> malformed{0};
    std::atomic<uint64_t> other_topic{0};
  };
  using Handler = std::function<void(records::ToolEvent&& event)>;

  /// Binds `endpoint` (zmq_address) and starts the thread. Fatal(kExitIo) naming the endpoint
  /// when it cannot be bound (in use, bad address).
  Receiver(const std::string& endpoint, std::string topic, Handler handler);
  ~Receiver();  ///< stops the thread
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  void stop();
  /// The bound address, a wildcard port resolved ("tcp://127.0.0.1:40123").
  const std::string& endpoint() const { return endpoint_; }
  const std::string& topic() const { return topic_; }
  const Stats& stats() const { return stats_; }
  /// The latest malformed frame's reason ("" when none).
  std::string last_error() const;

 private:
  void run();
  void malformed(const std::string& why);
  struct Sockets;
  std::unique_ptr<Sockets> s_;
  std::string endpoint_, topic_;
  Handler handler_;
  Stats stats_;
  mutable std::mutex mu_;
  std::string last_error_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// Connects a PUSH socket and sends events as a harness does: [topic, seq 0, 1, 2, ..., payload].
/// A send never blocks: with no peer, events queue up to the high-water mark (10,000) and then
/// are dropped and counted. Closing waits up to 2 s for queued events to leave. Thread-safe.
class Sender {
 public:
  /// Fatal(kExitUsage) for an address ZMQ rejects.
  Sender(const std::string& endpoint, std::string topic = kDefaultTopic);
  ~Sender();
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  void send(const records::ToolEvent& e);
  uint64_t sent() const { return sent_.load(); }
  uint64_t dropped() const { return dropped_.load(); }

 private:
  struct Sockets;
  std::unique_ptr<Sockets> s_;
  std::string topic_;
  std::mutex mu_;
  uint64_t seq_ = 0;
  std::atomic<uint64_t> sent_{0}, dropped_{0};
};

}  // namespace dyn::toolevents
