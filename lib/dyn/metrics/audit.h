// dyn-bench audit (issue 55): per run, worker and session, the prefill that was reusable, what the
// router predicted, what the engines delivered, and each miss attributed from its own evidence.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/json.h"

namespace dyn::metrics {

/// One request's evidence, from its request_end row and its route_decision row (joined by
/// request.request_id); unset where the trace does not say.
struct AuditRequest {
  std::string request_id, session_id, worker;
  double start_ms = 0;  ///< ordering of the infinite cache
  uint64_t input_tokens = 0;
  /// The prompt's block ids: per-block ids (dyn.hash_ids) or sequence hashes
  /// (request.replay.input_sequence_hashes), at `ids_block_size` tokens each.
  std::vector<uint64_t> ids;
  uint32_t ids_block_size = 0;
  bool ids_are_sequence = false;
  /// Tokens the ids cover (request.replay.input_length: the router's count, which the engine's
  /// usage may differ from); 0 = input_tokens.
  uint64_t ids_tokens = 0;
  std::optional<uint64_t> predicted;  ///< the router's cached tokens on the chosen worker
  std::optional<uint64_t> best;       ///< the same on the eligible worker with the most overlap
  std::optional<uint64_t> delivered;  ///< the engine's cached tokens (usage; request_end only)
};

/// Sums of one scope (a run, a worker, a session), in tokens. Each cause is computed per request
/// from its own evidence and only where that evidence exists (the request counts in `*_requests`):
///   reusable    = input tokens in full engine blocks some earlier request had (an infinite cache
///                 at the engine block size, requests in order of start; SPEC 7's theoretical hit)
///   miss        = input - delivered (prefill the engines computed)
///   cold        = input - reusable: never seen before, no cache could have held it (workload)
///   routing     = best - predicted: a different eligible worker held more (routing choice)
///   stale       = predicted - delivered where positive: predicted but not delivered (stale index)
///   under       = delivered - predicted where positive: the engine held what the index did not know
///   unexplained = miss - cold - routing - stale where the request has all four pieces of evidence
///                 and the difference is positive; a negative one is `over_attributed` (causes
///                 that overlapped). It equals reusable - best - under: reusable prefix no eligible
///                 worker held in the router's picture (evicted, or never routed there), less what
///                 the engine held beyond the picture.
struct AuditFigures {
  uint64_t requests = 0, input = 0;
  uint64_t reusable = 0, reusable_requests = 0;
  uint64_t predicted = 0, predicted_requests = 0;
  uint64_t delivered = 0, delivered_requests = 0;
  uint64_t miss = 0, cold = 0, routing = 0, routing_requests = 0, stale = 0, under = 0, stale_requests = 0;
  uint64_t unexplained = 0, over_attributed = 0, attributed_requests = 0;
  /// Adds one request; `reusable` unset when it has no block ids.
  void add(const AuditRequest& r, std::optional<uint64_t> reusable);
};

/// One trace's audit.
struct AuditRun {
  std::string file;
  std::string event_source;  ///< "router", "simulator", ... ("mixed" when rows disagree)
  AuditFigures total;
  std::map<std::string, AuditFigures> workers, sessions;  ///< by worker id text, session id
  uint64_t decision_rows = 0, request_end_rows = 0, malformed = 0;
};

/// Reads one trace (request_end and route_decision rows of dyn-route serve, decide or dyn-replay
/// --sim; gzip and envelopes as records::RowReader) and audits it at engine block size
/// `engine_block_size`. A route_decision row without a request_end row is a request of its own
/// (decide's traces): predicted and routing, no delivered. Warmup rows and failed requests are
/// left out. Fatal (exit 3) when the trace holds neither row type.
AuditRun audit_trace(const std::string& path, uint32_t engine_block_size);

/// Audits requests already gathered (the arithmetic of audit_trace, for tests): the infinite cache
/// in order of start_ms (stable).
AuditRun audit_requests(std::vector<AuditRequest> requests, uint32_t engine_block_size);

/// `--format json`: {"engine_block_size", "runs": [{file, event_source, rows, total, workers,
/// sessions}]}, each figures object with every field of AuditFigures plus unexplained_share (of
/// miss, over the attributed requests; null with none).
Json audit_json(const std::vector<AuditRun>& runs, uint32_t engine_block_size);
/// The console table: per run, the run's total, each worker, then each session.
std::string audit_table(const std::vector<AuditRun>& runs, uint32_t engine_block_size);

}  // namespace dyn::metrics
