// The fleet's membership at run time (issue 53): workers added, drained and removed through the
// admin API and the watched --worker-file, each change carried to every part that knows workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/serve/fleet.h"
#include "dyn/serve/kv_feeds.h"
#include "dyn/serve/options.h"
#include "dyn/serve/placer.h"

namespace dyn::serve {

/// What a worker joins with: the body of POST /v1/workers, or one line of the worker file.
struct WorkerSpec {
  std::string url;
  std::optional<KvEventSource> kv_events;  ///< required in --router-kv-events mode
  std::optional<uint32_t> block_size;      ///< checked against the router's (as /health's is)
  bool draining = false;                   ///< the worker file's `"draining": true`
};

/// Parses a worker spec from JSON {"url", "kv_events_endpoint"?, "kv_events_replay_endpoint"?,
/// "block_size"?, "draining"?} (`url_only`: {"url"} alone, for drain and delete). Errors (400)
/// name the field: not an object, no url string, a field of the wrong type, an unknown field.
Expected<WorkerSpec> parse_worker_spec(const Json& j, bool url_only);

/// Adds, drains and removes workers (serve mode), one change at a time, each carried to the
/// Fleet (its state), the Placer (router candidates, bindings dropped and deleted from the shared
/// store, admission workers) and the KV feeds (a subscription started, or stopped and its index
/// state freed). Answers are HTTP status + JSON body, for the admin API:
/// - add: 201 {"worker": {...}} for a new id; 200 for a worker already serving, one that stops
///   draining, or a removed one taken back by its old id; 400 for a bad URL or spec (a missing
///   KV event endpoint in --router-kv-events mode, a block size the router refuses).
/// - drain: 200 {"worker": {...}}; 404 for a worker the fleet does not have (or removed).
/// - remove: 200 {"worker": {...}, "bindings_dropped": N}; 404 likewise. Requests in flight on it
///   finish normally; its sessions move at their next turn ("rebound", reason "removed").
/// --worker-file FILE (FrontendOptions::worker_file) is read at start (Fatal, exit 4, when it
/// cannot be read) and then every worker_file_interval_ms: the workers it names are added (or
/// drained with "draining": true), the workers it added earlier and no longer names are removed.
/// A malformed line is reported with FILE:LINE and skipped; the other lines still apply.
/// Thread-safe.
class Membership {
 public:
  Membership(const FrontendOptions& opt, Fleet& fleet, Placer& placer, KvFeeds* kv);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  struct Answer {
    int status = 200;
    Json body;
  };
  Answer add(const WorkerSpec& spec, WorkerSource source);
  Answer drain(const std::string& url);
  Answer remove(const std::string& url);
  /// GET /v1/workers: {"workers": [...]} for every worker not removed, in id order: id, url,
  /// state ("serving", "draining", or "down" for a serving worker that is unhealthy or whose
  /// circuit is open), healthy, circuit, source, in_flight, the router's load, bound sessions,
  /// block size, KV event endpoint.
  Json list() const;

  /// Reads the worker file once (Fatal, exit 4, when it cannot be read), then watches it on a
  /// thread of its own. Nothing without a worker file.
  void start();
  /// Stops the watcher.
  void stop();

 private:
  Json worker_json(size_t i) const;
  /// Applies the worker file's current content (when it changed since the last call). False
  /// when the file could not be read.
  bool sync_file(bool at_start);
  void watch();

  const FrontendOptions& opt_;
  Fleet& fleet_;
  Placer& placer_;
  KvFeeds* kv_;
  std::mutex mu_;  ///< one change at a time
  std::string file_content_;
  bool file_unreadable_ = false;
  std::thread watcher_;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;
};

}  // namespace dyn::serve
