// One API request from its arrival to its end (the relay's unit of work), and the facts its
// request_end row and the metrics both read: latencies from the response tap, the response's error.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dyn/http/proxy.h"
#include "dyn/records/rows.h"
#include "dyn/route/priority.h"
#include "dyn/serve/placer.h"
#include "dyn/serve/response_tap.h"
#include "dyn/session/normalize.h"

namespace dyn::serve {

/// A dispatch that failed and was given up for another worker (dyn.attempts): a retry before
/// the first byte, or a migration mid-stream.
struct FailedAttempt {
  int worker = -1;
  const char* stage = "dispatch";  ///< "dispatch" (before the first byte) or "stream" (migrated)
  std::string error;               ///< connection, timeout, http, stream_cut
  int status = 0;                  ///< the worker's HTTP status (0: none)
  const char* circuit = "closed";  ///< the worker's circuit breaker after the failure
  uint64_t tokens_sent = 0;        ///< tokens the client had when the stream moved
};

/// One request from arrival to its request_end row.
struct Exchange {
  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  /// Frees the request's slots: the exchange lives until its response has ended.
  ~Exchange() {
    if (slot) slot->fetch_sub(1);
    end_dispatch();
  }
  /// Gives back the router queue's concurrency slot (SPEC 3.4) once, when held.
  void end_dispatch() {
    if (RequestQueue* q = std::exchange(dispatch_slot, nullptr)) q->release_slot();
  }
  std::atomic<size_t>* slot = nullptr;    ///< counted in RelayStats::in_flight
  RequestQueue* dispatch_slot = nullptr;  ///< a --max-concurrent-requests slot of this queue
  Api api = Api::kChat;
  bool stream = false;
  double start_ms = 0;
  uint64_t received_unix_ms = 0;
  std::optional<session::AgentContext> ctx;
  std::string x_request_id;
  std::string request_id;
  std::string model;
  uint64_t input_length = 0;
  std::vector<uint64_t> sequence_hashes;    ///< with the trailing partial block (SPEC 4.1 replay)
  Lease lease;                              ///< what the Placer gave it (serve mode)
  std::optional<uint64_t> admitted_worker;  ///< the admission controller's (first attempt only)
  route::ResolvedPriority priority;         ///< SPEC 3.4 (serve mode)
  route::PriorityHints body_hints;          ///< the body's nvext.agent_hints
  bool queued = false;                      ///< held by the router queue (or admission) at some point
  std::optional<double> router_queue_ms;    ///< dyn.router_queue_ms
  std::optional<uint64_t> queue_depth;      ///< request.queue_depth when it entered the queue
  int worker = -1;
  std::string binding;             ///< dyn.binding ("" = omit: capture mode)
  std::string rebind_reason;       ///< dyn.rebind_reason of a moved binding ("" = omit)
  std::optional<double> pause_ms;  ///< dyn.pause_ms (admission wait, SPEC 9)
  /// The last placement's quality and predicted cached tokens (issue 55; unset in capture mode).
  std::optional<route::DecisionQuality> quality;
  std::shared_ptr<ResponseTap> tap;
  /// The client hung up (its connection's ClientWatch, on the loop thread): a stage that has not
  /// sent the request ends the exchange as cancelled instead, and `call` is cancelled.
  std::atomic<bool> client_gone{false};
  std::mutex call_mu;                   ///< orders `call` against client_gone's callback
  std::weak_ptr<http::ProxyCall> call;  ///< the attempt in flight (a migration's continuation too)
  /// Its item in the router queue once it waited there (0 = never): a hang-up cancels it
  /// (RequestQueue::cancel, a no-op once the item has left).
  std::atomic<uint64_t> queue_item{0};
  // Retries and migrations (issue 53): all empty or zero until one happens.
  unsigned retries = 0;                      ///< dyn.retries: dispatches retried before the first byte
  unsigned migrations = 0;                   ///< dyn.migrations: moves mid-stream (and resent timeouts)
  std::vector<FailedAttempt> failed;         ///< dyn.attempts
  std::vector<uint64_t> avoid;               ///< workers this request failed on (never tried again)
  std::optional<route::RetryAdvice> advice;  ///< the router's word after a failed bound dispatch
  std::unique_ptr<StreamLog> log;            ///< what the stream sent (--migration-limit > 0)
  // KV policies (--kv-policy, SPEC 6.4; KvPolicyRunner): the hint the body carries to the worker
  // (its wire form, "" = none) and every hint sent for this request (dyn.kv_hints).
  std::string kv_hint;
  std::vector<records::RequestEnd::KvHint> kv_hints;
  bool kv_turn_seen = false;  ///< the policies saw this request's turn (once, whatever the retries)
};

/// The latency figures of an exchange (SPEC 7) from the tap's content-chunk stamps: one rule for
/// the request_end row and the /metrics histograms. Times in ms from the request's arrival.
struct Latencies {
  std::optional<double> ttft_ms;     ///< first content chunk
  std::optional<double> latency_ms;  ///< last content chunk
  /// usage's count, else the SPEC 4.2 estimate from the content bytes; unset when the response
  /// said nothing (no usage, no content, no outcome).
  std::optional<uint64_t> output_tokens;
  bool output_tokens_estimated = false;
  /// (latency - TTFT) / (output tokens - 1), for a stream with at least 2 output tokens.
  std::optional<double> avg_itl_ms;
};

/// `out` null = the request was answered by the frontend itself.
Latencies latencies_of(const Exchange& ex, const http::ProxyOutcome* out);

/// The error of a relayed response (type, message; type "" = success): a cut upstream stream, a
/// client that went away, an HTTP error status (with the upstream's message), an error event
/// inside a 2xx response (the upstream's own type and message, issue 21.3), or a stream cut
/// before its API's terminal event with no finish reason (stream_incomplete, issue 21.2).
std::pair<std::string, std::string> response_error(const Exchange& ex, const http::ProxyOutcome& o);

}  // namespace dyn::serve
