// The admin pages: their routes and the loopback guard, /v1/bindings and /health.
#include "dyn/serve/admin.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "dyn/base/diag.h"

namespace dyn::serve {

void AdminPages::add_routes(http::EventServer& s, bool guarded) const {
  // Wraps an admin handler: on the main listener only loopback peers (or --admin-allow-remote).
  auto admin = [this, guarded](http::EventServer::Handler fn) {
    return [this, guarded, fn](const http::ServerRequest& req, http::ServerResponse& res) {
      if (guarded && !admin_allowed(req)) {
        return http::set_error(res, 403, "permission_error",
                               "admin endpoint " + req.path +
                                   " answers loopback clients only (see --admin-port and --admin-allow-remote)");
      }
      fn(req, res);
    };
  };
  if (s_.tools) {
    s.route("GET", "/v1/tool_events", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
              res.set_content(s_.tools->snapshot_json().dump(2) + "\n", "application/json");
            }));
  }
  if (const KvPolicyRunner* k = s_.relay.kv_policies()) {
    s.route("GET", "/v1/session_prefix", admin([k](const http::ServerRequest&, http::ServerResponse& res) {
              res.set_content(k->session_prefix_json().dump(2) + "\n", "application/json");
            }));
  }
  if (s_.placer) {
    s.route("GET", "/v1/bindings", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
              res.set_content(bindings_text(), "application/json");
            }));
    for (const char* path : {"/v1/busy_threshold", "/busy_threshold"})
      for (const char* method : {"GET", "POST"})
        s.route(method, path,
                admin([this](const http::ServerRequest& req, http::ServerResponse& res) { busy_threshold(req, res); }));
    s.route(
        "GET", "/v1/programs", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
          const route::AdmissionController* a = s_.placer->admission();
          Json j = a ? a->snapshot_json(s_.clock.now_ms()) : Json{{"admission", "none"}, {"programs", Json::array()}};
          res.set_content(j.dump(2) + "\n", "application/json");
        }));
  }
  if (s_.members) add_worker_routes(s, admin);
  if (!s_.opt.run_config.is_null()) {
    s.route("GET", "/v1/run-config", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
              res.set_content(s_.opt.run_config.dump(2, ' ', false, Json::error_handler_t::replace) + "\n",
                              "application/json");
            }));
  }
  s.route("GET", "/metrics", admin([this](const http::ServerRequest&, http::ServerResponse& res) {
            res.set_content(metrics_text(), "text/plain; version=0.0.4");
          }));
  if (guarded || !s_.placer) return;
  s.route("GET", "/health", [this](const http::ServerRequest&, http::ServerResponse& res) {
    bool any = false;
    Json j = health_json(&any);
    res.status = any ? 200 : 503;
    res.set_content(j.dump() + "\n", "application/json");
  });
}

void AdminPages::add_worker_routes(
    http::EventServer& s, const std::function<http::EventServer::Handler(http::EventServer::Handler)>& admin) const {
  Membership* m = s_.members;
  // The body of a worker verb, or a 400 that says what is wrong with it.
  auto spec_of = [](const http::ServerRequest& req, http::ServerResponse& res, bool url_only) {
    Json j = Json::parse(req.body, nullptr, false);
    auto spec =
        j.is_discarded() ? Expected<WorkerSpec>(Error{"the body is not JSON", 400}) : parse_worker_spec(j, url_only);
    if (!spec) http::set_error(res, 400, "invalid_request_error", spec.error().message);
    return spec;
  };
  auto answer = [](http::ServerResponse& res, const Membership::Answer& a) {
    res.status = a.status;
    res.set_content(a.body.dump(2) + "\n", "application/json");
  };
  s.route("GET", "/v1/workers", admin([m](const http::ServerRequest&, http::ServerResponse& res) {
            res.set_content(m->list().dump(2) + "\n", "application/json");
          }));
  s.route("POST", "/v1/workers", admin([m, spec_of, answer](const http::ServerRequest& req, http::ServerResponse& res) {
            if (auto spec = spec_of(req, res, false)) answer(res, m->add(*spec, WorkerSource::kApi));
          }));
  s.route("POST", "/v1/workers/drain",
          admin([m, spec_of, answer](const http::ServerRequest& req, http::ServerResponse& res) {
            if (auto spec = spec_of(req, res, true)) answer(res, m->drain(spec->url));
          }));
  s.route("DELETE", "/v1/workers",
          admin([m, spec_of, answer](const http::ServerRequest& req, http::ServerResponse& res) {
            if (auto spec = spec_of(req, res, true)) answer(res, m->remove(spec->url));
          }));
}

void AdminPages::add_health_route(http::EventServer& s) const {
  s.route("GET", "/health", [this](const http::ServerRequest& req, http::ServerResponse& res) {
    bool any = false;
    Json j = health_json(&any);
    res.status = any ? 200 : 503;
    if (admin_separate() || !admin_allowed(req)) j.erase("workers");
    res.set_content(j.dump() + "\n", "application/json");
  });
}

Json AdminPages::health_json(bool* any_healthy) const {
  Json ws = Json::array();
  bool any = false;
  for (size_t i = 0; i < s_.fleet.size(); ++i) {
    const Fleet::Worker& w = s_.fleet.at(i);
    if (!w.present()) continue;
    bool h = w.routable.load();
    any = any || (h && w.state.load() == WorkerState::kServing);
    ws.push_back(Json{{"worker", i}, {"url", w.url}, {"healthy", h}});
  }
  if (any_healthy) *any_healthy = any;
  Json j = Json::object();
  j["status"] = any ? "ok" : "no healthy worker";
  j["workers"] = std::move(ws);
  return j;
}

namespace {

/// The four thresholds under Dynamo's names (null = unset), after "model".
Json thresholds_json(const std::string& model, const route::BusyThresholds& t) {
  auto opt = [](const auto& v) { return v ? Json(*v) : Json(nullptr); };
  Json j = Json::object();
  j["model"] = model;
  j["active_decode_blocks_threshold"] = opt(t.active_decode_blocks);
  j["active_prefill_tokens_threshold"] = opt(t.active_prefill_tokens);
  j["active_prefill_tokens_threshold_frac"] = opt(t.active_prefill_tokens_frac);
  j["active_requests_threshold"] = opt(t.active_requests);
  return j;
}

/// Reads one threshold of a POST body into `out` (absent or null: unchanged). `integer`: an
/// unsigned integer; else a number. False: the wrong type (422).
template <class T>
bool read_threshold(const Json& body, const char* key, bool integer, std::optional<T>& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (integer ? !it->is_number_unsigned() : !it->is_number()) return false;
  out = it->get<T>();
  return true;
}

/// The identity columns of a /v1/bindings row: a session's key, or a parent group's parent id.
Json binding_key_json(const std::string& key, const std::string& parent) {
  Json j = Json::object();
  if (!parent.empty()) {
    j["key"] = nullptr;
    j["parent_session_id"] = parent;
    j["kind"] = "parent_group";
  } else {
    j["key"] = key;
    j["kind"] = "session";
  }
  return j;
}

/// Rows of the shared table: every replica's bindings as the store holds them; leases, state
/// and version are this replica's view (other replicas' leases are not in the store).
template <class Emit>
void store_rows(std::vector<StoredBinding>& rows, const std::vector<route::BindingInfo>& local, const Fleet& fleet,
                uint64_t unix_now, Emit emit) {
  std::map<std::pair<std::string, std::string>, const route::BindingInfo*> mine;
  for (const auto& b : local) mine[{b.key, b.parent_session_id}] = &b;
  std::sort(rows.begin(), rows.end(), [](const StoredBinding& a, const StoredBinding& b) {
    return std::tie(a.session_id, a.parent_session_id) < std::tie(b.session_id, b.parent_session_id);
  });
  for (const auto& r : rows) {
    Json j = binding_key_json(r.session_id, r.parent_session_id);
    std::optional<size_t> w = fleet.find(r.worker_url);
    if (w && !fleet.at(*w).present()) w.reset();
    j["worker"] = w ? Json(static_cast<uint64_t>(*w)) : Json(nullptr);
    j["worker_url"] = r.worker_url;
    auto m = mine.find({r.session_id, r.parent_session_id});
    const route::BindingInfo* b = m == mine.end() ? nullptr : m->second;
    j["state"] = !w ? "unknown_worker" : (b && b->initializing ? "initializing" : "bound");
    j["active_leases"] = b ? b->active_leases : 0;
    j["version"] = b ? b->version : 0;
    if (r.ttl_ms >= 0) {
      j["idle_deadline_unix_ms"] = unix_now + static_cast<uint64_t>(r.ttl_ms);
      j["idle_expires_in_ms"] = static_cast<double>(r.ttl_ms);
    } else {
      j["idle_deadline_unix_ms"] = nullptr;
    }
    emit(j);
  }
}

/// Rows of this replica's own table.
template <class Emit>
void local_rows(const std::vector<route::BindingInfo>& local, const Fleet& fleet, double now, uint64_t unix_now,
                Emit emit) {
  for (const auto& b : local) {
    Json j = binding_key_json(b.key, b.parent_session_id);
    j["worker"] = b.worker;
    j["worker_url"] = b.worker < fleet.size() ? fleet.at(b.worker).url : "";
    j["state"] = b.initializing ? "initializing" : "bound";
    j["active_leases"] = b.active_leases;
    j["version"] = b.version;
    if (b.idle_deadline_ms) {
      double left = *b.idle_deadline_ms - now;
      j["idle_deadline_unix_ms"] = unix_now + static_cast<uint64_t>(std::max(0.0, left));
      j["idle_expires_in_ms"] = std::max(0.0, left);
    } else {
      j["idle_deadline_unix_ms"] = nullptr;
    }
    emit(j);
  }
}

}  // namespace

void AdminPages::busy_threshold(const http::ServerRequest& req, http::ServerResponse& res) const {
  route::Router& router = s_.placer->router();
  if (req.method == "GET") {
    Json j{{"thresholds", Json::array({thresholds_json("*", router.busy_thresholds())})}};
    return res.set_content(j.dump() + "\n", "application/json");
  }
  std::string ct = req.get_header_value("Content-Type");
  if (ct.rfind("application/json", 0) != 0)
    return http::set_error(res, 415, "invalid_request_error", "Expected request with Content-Type application/json");
  Json body = Json::parse(req.body, nullptr, false);
  if (body.is_discarded()) return http::set_error(res, 400, "invalid_request_error", "malformed JSON body");
  auto model = body.is_object() ? body.find("model") : body.end();
  if (!body.is_object() || model == body.end() || !model->is_string())
    return http::set_error(res, 422, "invalid_request_error", "the body needs a \"model\" string");
  route::BusyThresholds t = router.busy_thresholds(), given;
  if (!read_threshold(body, "active_decode_blocks_threshold", false, given.active_decode_blocks) ||
      !read_threshold(body, "active_prefill_tokens_threshold", true, given.active_prefill_tokens) ||
      !read_threshold(body, "active_prefill_tokens_threshold_frac", false, given.active_prefill_tokens_frac) ||
      !read_threshold(body, "active_requests_threshold", true, given.active_requests))
    return http::set_error(res, 422, "invalid_request_error",
                           "thresholds are numbers (active_prefill_tokens_threshold and active_requests_threshold "
                           "unsigned integers) or null");
  if (given.any()) {
    if (given.active_decode_blocks) t.active_decode_blocks = given.active_decode_blocks;
    if (given.active_prefill_tokens) t.active_prefill_tokens = given.active_prefill_tokens;
    if (given.active_prefill_tokens_frac) t.active_prefill_tokens_frac = given.active_prefill_tokens_frac;
    if (given.active_requests) t.active_requests = given.active_requests;
    if (auto e = router.set_busy_thresholds(t)) return http::set_error(res, 400, "invalid_request_error", e->message);
    s_.placer->queue().thresholds_changed();
    diag::note("busy thresholds set: " + thresholds_json(model->get<std::string>(), t).dump());
  }
  res.set_content(thresholds_json(model->get<std::string>(), router.busy_thresholds()).dump() + "\n",
                  "application/json");
}

std::string AdminPages::bindings_text() const {
  const route::RouterConfig& rc = s_.opt.router;
  SharedBindings* shared = s_.placer->shared();
  double now = s_.clock.now_ms();
  uint64_t unix_now = s_.clock.unix_ms();
  auto local = std::as_const(*s_.placer).router().bindings();
  std::optional<Expected<std::vector<StoredBinding>>> stored;
  if (shared && shared->store().up()) stored = shared->store().list();
  const bool from_store = stored && *stored;
  // The document is written row by row, each binding on one line: the table can hold 65,536
  // bindings, and one Json tree of them all (plus its indented dump) peaked at about 150 MB.
  Json head = Json::object();
  head["affinity"] = rc.affinity_enabled() ? Json{{"ttl_secs", rc.affinity_ttl_secs},
                                                  {"mode", route::affinity_mode_name(rc.affinity_mode)}}
                                           : Json(nullptr);
  if (shared) {
    // Which table this is: the shared one, or this replica's own while the store is unreachable.
    head["store"] = Json{{"url", s_.opt.binding_store}, {"up", from_store}, {"table", from_store ? "shared" : "local"}};
  }
  head["count"] = from_store ? (**stored).size() : local.size();
  std::string out = head.dump(2, ' ', false, Json::error_handler_t::replace);
  out.resize(out.size() - 2);  // "\n}": the rows follow
  out += ",\n  \"bindings\": [";
  bool first = true;
  auto emit = [&](const Json& j) {
    out += first ? "\n    " : ",\n    ";
    first = false;
    out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  if (from_store) {
    store_rows(**stored, local, s_.fleet, unix_now, emit);
  } else {
    local_rows(local, s_.fleet, now, unix_now, emit);
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

}  // namespace dyn::serve
