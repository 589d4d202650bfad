// Harness tool events in the live frontend: join, trace row, session state (see tool_events.h).
#include "dyn/serve/tool_events.h"

#include <algorithm>

#include <fmt/format.h>

#include "dyn/base/diag.h"
#include "dyn/records/record.h"
#include "dyn/serve/kv_hints.h"

namespace dyn::serve {

ToolEventIngress::ToolEventIngress(const Clock& clock, RequestTrace& trace, route::AdmissionController* admission,
                                   KvPolicyRunner* kv)
    : clock_(clock), trace_(trace), admission_(admission), kv_(kv) {}

ToolEventIngress::~ToolEventIngress() { stop(); }

void ToolEventIngress::start(const std::string& endpoint, const std::string& topic) {
  receiver_ = std::make_unique<toolevents::Receiver>(endpoint, topic,
                                                     [this](records::ToolEvent&& e) { on_event(std::move(e)); });
  diag::note("tool events: PULL on " + receiver_->endpoint() + (topic.empty() ? "" : ", topic " + topic));
}

void ToolEventIngress::stop() {
  if (receiver_) receiver_->stop();
}

ToolEventIngress::SessionState& ToolEventIngress::session_locked(const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    if (sessions_.size() >= kMaxSessions) {
      // Forget the session touched longest ago among those with no tool running.
      auto victim = sessions_.end();
      for (auto s = sessions_.begin(); s != sessions_.end(); ++s)
        if (s->second.running.empty() && (victim == sessions_.end() || s->second.touched < victim->second.touched))
          victim = s;
      if (victim != sessions_.end()) sessions_.erase(victim);
    }
    it = sessions_.emplace(id, SessionState{}).first;
  }
  it->second.touched = ++tick_;
  return it->second;
}

void ToolEventIngress::on_request(const std::string& session_id) {
  std::lock_guard lk(mu_);
  session_locked(session_id).requested = true;
}

void ToolEventIngress::on_response(const std::string& session_id, const std::string& request_id,
                                   const std::vector<std::string>& call_ids) {
  std::lock_guard lk(mu_);
  SessionState& s = session_locked(session_id);
  s.requested = true;
  s.last_request_id = request_id;
  s.last_calls = call_ids;
}

void ToolEventIngress::on_event(records::ToolEvent&& e) {
  records::ToolEventJoin join;
  std::string request_id;
  bool running = e.event_type == records::event::kToolStart;
  bool last_done = false;  // the session's last running tool ended
  {
    std::lock_guard lk(mu_);
    SessionState& s = session_locked(e.session_id);
    join.known_session = s.requested;
    if (!s.requested) ++unknown_session_;
    if (std::find(s.last_calls.begin(), s.last_calls.end(), e.tool_call_id) != s.last_calls.end()) {
      request_id = s.last_request_id;
      ++joined_request_;
    }
    s.events++;
    if (running) {
      s.running[e.tool_call_id] = Running{e.tool_class, e.started_at_unix_ms.value_or(e.event_time_unix_ms)};
    } else {
      auto r = s.running.find(e.tool_call_id);
      if (r != s.running.end()) {
        if (!e.started_at_unix_ms) e.started_at_unix_ms = r->second.started_at_unix_ms;
        ++joined_start_;
        s.running.erase(r);
      }
      last_done = s.running.empty();
      uint64_t end = e.ended_at_unix_ms.value_or(e.event_time_unix_ms);
      if (!e.duration_ms && e.started_at_unix_ms && end >= *e.started_at_unix_ms)
        e.duration_ms = static_cast<double>(end - *e.started_at_unix_ms);
      s.tool_ms += e.duration_ms.value_or(0);
    }
  }
  join.request_id = request_id;
  if (admission_) admission_->on_tool_event(e.session_id, running, clock_.now_ms());
  if (kv_) kv_->on_tool_event(e.session_id, e.tool_class, running, last_done);
  if (trace_.on()) trace_.write_tool_event(e, join);
}

Json ToolEventIngress::snapshot_json() const {
  Json j = Json::object();
  j["endpoint"] = receiver_ ? receiver_->endpoint() : "";
  j["topic"] = receiver_ ? receiver_->topic() : "";
  std::lock_guard lk(mu_);
  Json c = Json::object();
  if (receiver_) {
    const auto& st = receiver_->stats();
    c["frames"] = st.frames.load();
    c["accepted"] = st.accepted.load();
    c["malformed"] = st.malformed.load();
    c["other_topic"] = st.other_topic.load();
  }
  c["joined_request"] = joined_request_;
  c["joined_start"] = joined_start_;
  c["unknown_session"] = unknown_session_;
  j["counters"] = std::move(c);
  j["last_error"] = receiver_ ? receiver_->last_error() : "";
  Json list = Json::array();
  for (const auto& [id, s] : sessions_) {
    if (s.events == 0) continue;  // only requests so far
    Json o = {{"session_id", id}, {"status", s.running.empty() ? "reasoning" : "acting"}};
    Json run = Json::array();
    for (const auto& [call, r] : s.running)
      run.push_back(
          {{"tool_call_id", call}, {"tool_class", r.tool_class}, {"started_at_unix_ms", r.started_at_unix_ms}});
    o["running"] = std::move(run);
    o["tool_events"] = s.events;
    o["tool_ms"] = s.tool_ms;
    list.push_back(std::move(o));
  }
  j["sessions"] = std::move(list);
  return j;
}

void ToolEventIngress::append_metrics(std::string& out) const {
  if (!receiver_) return;
  const auto& st = receiver_->stats();
  out += "# HELP dyn_tool_events_total Harness tool event frames received, by result.\n";
  out += "# TYPE dyn_tool_events_total counter\n";
  out += fmt::format("dyn_tool_events_total{{result=\"accepted\"}} {}\n", st.accepted.load());
  out += fmt::format("dyn_tool_events_total{{result=\"malformed\"}} {}\n", st.malformed.load());
  out += fmt::format("dyn_tool_events_total{{result=\"other_topic\"}} {}\n", st.other_topic.load());
  uint64_t acting = 0;
  {
    std::lock_guard lk(mu_);
    for (const auto& [id, s] : sessions_) acting += !s.running.empty();
  }
  out += "# HELP dyn_tool_sessions_acting Sessions with a harness tool running (tool_start without its end).\n";
  out += "# TYPE dyn_tool_sessions_acting gauge\n";
  out += fmt::format("dyn_tool_sessions_acting {}\n", acting);
}

}  // namespace dyn::serve
