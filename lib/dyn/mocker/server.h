// The mock engine's HTTP server (dyn-mocker): the SPEC 8 engine model run in real time behind the
// OpenAI chat/completions, completions, Anthropic messages and OpenAI Responses APIs, with vLLM's
// KV event stream, a tokenizer endpoint, Prometheus metrics and scripted faults for chaos tests.
#pragma once

#include <cstdint>
#include <string>

#include "dyn/engine/config.h"
#include "dyn/http/server.h"
#include "dyn/kvevents/codec.h"
#include "dyn/session/normalize.h"

namespace dyn::mocker {

/// What dyn-mocker's flags set (docs/cli.md, man dyn-mocker).
struct MockerOptions {
  /// Host, port (0 = any free one), port file and worker threads (one per concurrent stream).
  http::ListenOptions listen;
  std::string model = "mock-model";
  int64_t worker_id = 0;  ///< in metrics, KV events, /health and x-dyn-worker
  /// --num-workers (Dynamo mocker's): engines in this process, each its own HTTP listener, worker
  /// id (worker_id + i), KV event sockets (engine_endpoint) and metrics; with G4 one pool for all.
  int num_workers = 1;
  engine::EngineConfig engine;            ///< validated by the caller (EngineConfig::validate)
  std::string kv_events_endpoint;         ///< ZMQ PUB address of vLLM-format KV events ("" = off)
  std::string kv_events_replay_endpoint;  ///< ZMQ ROUTER address answering replay requests
  /// --kv-events-encoding: current vLLM's maps (the default) or older vLLM's arrays; the map form
  /// carries data_parallel_rank 0, as vLLM's publisher always sets it (kvevents::kEncodings).
  kvevents::Layout kv_events_layout = kvevents::Layout::kMaps;
  std::string replies;                ///< --replies FILE ("" = none; engine::ReplyScript)
  session::NormalizeOptions session;  ///< how a request's session is read (--kv-eviction session)
  uint64_t default_max_tokens = 128;  ///< output limit of a request that sets none
  // Fault injection for chaos tests (man page, FAULT INJECTION): API requests are numbered in
  // arrival order; the first `fault_after` are served normally, the next `fail_first` are
  // answered with `fail_status`, then `stall_count` (0 = all) wait `stall_ms` before headers.
  uint64_t fault_after = 0;
  uint64_t fail_first = 0;
  int fail_status = 503;
  double stall_ms = 0;
  uint64_t stall_count = 0;
};

/// The KV event address of engine `index` of a --num-workers process: `endpoint` itself for
/// engine 0 and for a tcp://HOST:* address (each engine binds a free port, shown on its
/// /health); tcp://HOST:PORT gives PORT + index. Errors (kExitUsage): another form of address with
/// index > 0 (an ipc:// path cannot be shared), a port past 65535.
Expected<std::string> engine_endpoint(const std::string& endpoint, int index);

/// Runs options.num_workers engines (at least one): loads their replies, binds each (engine i on
/// options.listen.port + i, or each a free port with port 0), writes the port file once every
/// engine runs (one port a line in engine order, so a script waiting for it can send at once),
/// serves until SIGTERM or SIGINT (or until one listener stops: then all stop), then stops the
/// engines and flushes their KV event publishers. Call from the main thread before any other
/// thread starts: the stop signals are blocked for every thread and taken by a watcher
/// (http::SignalWatcher).
/// Returns the exit status: 0 after SIGTERM (the normal stop), 130 after SIGINT (interrupted).
/// Throws Fatal: ports or KV event addresses the engines cannot each take (exit code 2, naming the
/// flag: engine_endpoint), a bad replies file (its own exit code, message naming file:line), a bind
/// or port-file failure (exit code 4), a server stopping on its own.
int serve(const MockerOptions& options);

}  // namespace dyn::mocker
