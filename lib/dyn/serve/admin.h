// The admin pages of a frontend: /v1/bindings, /v1/programs, /v1/run-config, /metrics, the
// detailed /health, read from the other parts' state, and the worker verbs (/v1/workers).
#pragma once

#include <functional>
#include <string>

#include "dyn/base/clock.h"
#include "dyn/base/json.h"
#include "dyn/http/event_server.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/kv_feeds.h"
#include "dyn/serve/membership.h"
#include "dyn/serve/options.h"
#include "dyn/serve/placer.h"
#include "dyn/serve/relay.h"
#include "dyn/serve/request_trace.h"
#include "dyn/serve/tool_events.h"

namespace dyn::serve {

/// What the pages read. `placer`, `kv` and `members` are null where the frontend has none
/// (capture mode, a predicted index); the placer is not const only because listing the shared
/// binding store takes one of its connections. The worker verbs change the fleet through
/// `members` (Membership), the one part that does.
struct AdminSources {
  const FrontendOptions& opt;
  const Clock& clock;
  const Fleet& fleet;
  Placer* placer;
  const KvFeeds* kv;
  const Relay& relay;
  const RequestTrace& trace;
  Membership* members;
  const ToolEventIngress* tools = nullptr;  ///< --tool-events-endpoint
};

/// The admin endpoints. They answer on the admin listener when there is one (--admin-port);
/// GET /v1/workers lists the workers, POST /v1/workers adds one, POST /v1/workers/drain drains
/// one, DELETE /v1/workers removes one (JSON bodies, Membership's answers; serve mode).
/// otherwise on the main listener, to loopback peers only (403 for others) unless
/// admin_allow_remote. /health stays on the main listener for load balancers, with worker
/// details for admin peers only.
class AdminPages {
 public:
  explicit AdminPages(AdminSources s) : s_(s) {}

  /// The admin routes on `server`: `guarded` on the main listener (the loopback rule above);
  /// unguarded on the admin listener, which also gets the detailed GET /health.
  void add_routes(http::EventServer& server, bool guarded) const;
  /// GET /health on the main listener (serve mode): 200 while a worker is healthy, else 503;
  /// worker URLs only for admin peers when there is no admin listener.
  void add_health_route(http::EventServer& server) const;

  /// GET /v1/bindings: {"affinity", "store"?, "count", "bindings": [...]}, one binding per line.
  std::string bindings_text() const;
  /// GET /metrics: the Prometheus text of every part (metrics.cpp).
  std::string metrics_text() const;
  /// {"status", "workers": [{"worker", "url", "healthy"}]}; *any_healthy says whether one is.
  Json health_json(bool* any_healthy) const;
  /// POST /v1/busy_threshold (also /busy_threshold, Dynamo's path), Dynamo's shape (SPEC 3.4):
  /// {"model", "active_decode_blocks_threshold"?, "active_prefill_tokens_threshold"?,
  /// "active_prefill_tokens_threshold_frac"?, "active_requests_threshold"? (dyn's)}: the given
  /// thresholds are set for the worker pool (every model: dyn-route serve has one pool), the
  /// others kept; with none given it only answers. The answer: the model and all four (null =
  /// unset). Errors: 415 not JSON, 400 malformed JSON or a value out of range, 422 a field of the
  /// wrong type or no "model". GET lists {"thresholds": [{"model": "*", ...}]}.
  void busy_threshold(const http::ServerRequest& req, http::ServerResponse& res) const;

 private:
  bool admin_separate() const { return s_.opt.admin_listen.port >= 0; }
  /// The worker verbs on `server`, each wrapped by `admin` (the loopback guard).
  void add_worker_routes(http::EventServer& server,
                         const std::function<http::EventServer::Handler(http::EventServer::Handler)>& admin) const;
  /// Admin endpoints on the main listener: loopback peers, or anyone with admin_allow_remote.
  bool admin_allowed(const http::ServerRequest& req) const {
    return s_.opt.admin_allow_remote || http::is_loopback_address(req.remote_addr);
  }

  AdminSources s_;
};

}  // namespace dyn::serve
