// Harness tool events in the live frontend (issue 49): the PULL ingress, the join of each event
// to its session and tool call, its trace row, and the session's ACTING state it feeds.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dyn/base/clock.h"
#include "dyn/base/json.h"
#include "dyn/records/rows.h"
#include "dyn/route/admission.h"
#include "dyn/serve/request_trace.h"
#include "dyn/toolevents/toolevents.h"

namespace dyn::serve {

class KvPolicyRunner;

/// Takes harness tool events as Dynamo does (DYN_REQUEST_TRACE_TOOL_EVENTS_ZMQ_ENDPOINT: a PULL
/// socket bound here, frames [topic, seq, msgpack record]) on the receiver's own thread, so the
/// serve loop never waits on ZMQ. Each accepted event is
/// - joined to its session and tool call by (session_id, tool_call_id): a tool_end or tool_error
///   whose tool_start was seen gets the start's started_at_unix_ms (and duration_ms from the two
///   when the harness sent none); a tool_call_id that the session's latest response called names
///   that request (dyn.request_id);
/// - written to the request trace as its own row (records::append_tool_event, event_source
///   "harness") when tracing is on;
/// - fed to the session's state: ACTING from tool_start until its last running tool ends
///   (shown by GET /v1/tool_events and, with admission, the program's status: on_tool_event);
/// - with --kv-policy, fed to its runner (KvPolicyRunner::on_tool_event): a tool_start, and the
///   end of the session's last running tool, bound tool-ttl's wait.
/// Malformed frames are counted and reported (the receiver), never fatal. Per-session state is
/// bounded: past kMaxSessions the sessions idle longest (no tool running) are forgotten.
class ToolEventIngress {
 public:
  static constexpr size_t kMaxSessions = 16384;

  /// `admission`: null without program-aware admission; `kv`: null without --kv-policy.
  ToolEventIngress(const Clock& clock, RequestTrace& trace, route::AdmissionController* admission, KvPolicyRunner* kv);
  ~ToolEventIngress();
  /// Binds the endpoint and starts taking events. Fatal(kExitIo) when it cannot be bound.
  void start(const std::string& endpoint, const std::string& topic);
  void stop();
  /// A request of `session_id` arrived (the session is known from then on).
  void on_request(const std::string& session_id);
  /// A response of `session_id` ended (Relay::finish): `request_id` and the tool calls it made
  /// are what a later event's tool_call_id joins to.
  void on_response(const std::string& session_id, const std::string& request_id,
                   const std::vector<std::string>& call_ids);
  /// One event, as the receiver hands it over (public for tests). Thread-safe.
  void on_event(records::ToolEvent&& e);
  /// GET /v1/tool_events: {endpoint, topic, counters {frames, accepted, malformed, other_topic,
  /// joined_request, joined_start, unknown_session}, last_error, sessions [{session_id, status
  /// "acting" | "reasoning", running [{tool_call_id, tool_class, started_at_unix_ms}],
  /// tool_events, tool_ms}]} (sessions sorted by id).
  Json snapshot_json() const;
  /// Prometheus lines: dyn_tool_events_total{result="accepted|malformed|other_topic"}, and
  /// dyn_tool_sessions_acting.
  void append_metrics(std::string& out) const;

 private:
  struct Running {
    std::string tool_class;
    uint64_t started_at_unix_ms = 0;
  };
  struct SessionState {
    std::map<std::string, Running> running;  ///< by tool_call_id
    std::string last_request_id;
    std::vector<std::string> last_calls;  ///< tool call ids of the latest response
    uint64_t events = 0, touched = 0;
    double tool_ms = 0;
    bool requested = false;  ///< a request of this session reached the router
  };
  SessionState& session_locked(const std::string& id);

  const Clock& clock_;
  RequestTrace& trace_;
  route::AdmissionController* admission_;
  KvPolicyRunner* kv_;
  std::unique_ptr<toolevents::Receiver> receiver_;
  mutable std::mutex mu_;
  std::map<std::string, SessionState> sessions_;
  uint64_t tick_ = 0, joined_request_ = 0, joined_start_ = 0, unknown_session_ = 0;
};

}  // namespace dyn::serve
