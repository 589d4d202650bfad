// Offline faces of the router: dyn-route normalize (headers -> agent_context rows) and dyn-route
// decide (workload or trace rows -> route_decision rows on a virtual clock).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dyn/base/defaults.h"
#include "dyn/engine/profile.h"
#include "dyn/io/output.h"
#include "dyn/route/config.h"
#include "dyn/route/quality.h"
#include "dyn/session/normalize.h"

namespace dyn::offline {

struct NormalizeOptions {
  std::vector<std::string> inputs;  ///< JSONL files; empty or "-" = stdin
  /// How rows' headers are normalized (--session-header-aliases).
  session::NormalizeOptions session;
};

/// dyn-route normalize. Each input row {"headers": {name: value} | [[name, value], ...], ...}
/// becomes one output row: {"line": N, "agent_context"?: {...}, "x_request_id"?, "worker_instance_id"?,
/// "priority"?, "source"?} followed by the input's other fields (not headers/body), or
/// {"line": N, "error": {"code": 400|3, "message"}, ...} when SPEC 1.1 rejects the headers (also
/// reported on stderr with file:line). A row without identity has no agent_context. Malformed JSON
/// rows are reported and skipped. Returns the exit code: 0, or 3 when any row was rejected.
int normalize_rows(const NormalizeOptions& options, io::Output& out);

/// Engine model used to estimate a request's end when the input does not record it (SPEC 8):
/// prefill time for the uncached tokens in chunks of max_batched_tokens, plus output tokens ×
/// the decode step time at the worker's KV utilisation when the request arrives.
struct EndModel {
  uint64_t kv_blocks = kDefaultKvBlocks;      ///< per worker
  uint32_t block_size = kDefaultKvBlockSize;  ///< engine block size (capacity = kv_blocks × block_size tokens)
  uint64_t max_batched_tokens = 8192;         ///< prefill chunk
  double speedup_ratio = 1.0;                 ///< divides all times
  /// --perf-profile: the step timing (null = SPEC 8's default polynomial). With a profile the
  /// estimate is PerfProfile::request_ms with the other sequences holding utilisation x capacity
  /// tokens of context.
  std::shared_ptr<const engine::PerfProfile> profile;
  /// Duration estimate: prompt tokens, of them uncached, output tokens, utilisation at arrival.
  double duration_ms(uint64_t prompt_tokens, uint64_t uncached_tokens, uint64_t output_tokens,
                     double utilisation) const;
};

struct DecideOptions {
  std::vector<std::string> inputs;  ///< JSONL files; empty or "-" = stdin
  uint32_t workers = 0;             ///< virtual workers 0..N-1
  route::RouterConfig router;
  /// --kv-cache-block-size was given (flag or environment). When not, the router adopts the
  /// block size of the input's hash ids; when given and different, rows are re-blocked and a
  /// warning names both sizes (case 11).
  bool router_block_size_given = false;
  /// Block size of Mooncake hash_ids (0 = records::kMooncakeBlockSize). Dynamo rows carry replay.trace_block_size.
  uint32_t workload_block_size = 0;
  bool explain = false;
  EndModel end_model;
  session::NormalizeOptions session;  ///< how header rows are normalized (--session-header-aliases)
};

/// What one decide() run did, for its run record (dyn-route decide --summary).
struct DecideStats {
  uint64_t decisions = 0;            ///< route_decision rows written (routed + rejected request rows)
  uint64_t routed = 0;               ///< rows placed on a worker
  uint64_t rejected = 0;             ///< request rows and kv_event rows that could not be used (dyn.error / stderr)
  uint64_t skipped = 0;              ///< trace rows that are not request_end
  uint64_t untimed = 0;              ///< rows without a timestamp (routed at the previous row's arrival)
  uint64_t kv_event_rows = 0;        ///< kv_event rows read (they write no row)
  uint64_t malformed = 0;            ///< lines that are not JSON objects (reported with file:line)
  bool reordered = false;            ///< input was not in arrival order (sorted within the window)
  uint32_t router_block_size = 0;    ///< the block size the router ran with (tokens)
  std::vector<uint64_t> per_worker;  ///< routed rows per worker id
  uint64_t input_tokens = 0, cached_tokens = 0;  ///< over routed rows (hit rate = cached / input)
  /// KV events of the kv_event rows not applied to the index, by reason (kvevents::skip_name;
  /// only reasons that occurred): an unusable event is skipped, never its batch.
  std::map<std::string, uint64_t> kv_events_skipped;
  route::QualityTotals quality;  ///< every placement measured (issue 55)
};

/// dyn-route decide: routes every input row on a virtual clock and writes one route_decision row
/// per input row (docs/records.md), in arrival order (stable). Inputs: Mooncake rows (hash_ids at
/// the workload block size, chained into sequence hashes so equal leading ids give equal
/// prefixes), Dynamo request_end rows (replay.input_sequence_hashes, agent_context,
/// request_received_ms, total_time_ms), and header rows {"headers", "body"?, "timestamp"?,
/// "output_length"?} (identity per SPEC 1, body rendered per SPEC 4.2). Load: a request is active
/// from its arrival until its recorded end (Dynamo rows) or an end estimated with EndModel.
/// Only request_end trace rows are routed; other event types are skipped and counted.
/// KV event rows {"kv_event": {"worker": W, "payload_hex": HEX}, "timestamp"?} (a recorded vLLM
/// KVEventBatch, e.g. from a worker's replay socket) feed worker W's index at their time with
/// --router-kv-events, translated as dyn-route serve translates them; they write no row.
/// Deterministic: same input and seed give byte-identical output. Returns the exit code (0, or 3
/// when rows were rejected; every rejected row still gets a row with dyn.error).
/// `stats`, when given, receives the run's counts (filled also when rows were rejected).
int decide(const DecideOptions& options, io::Output& out, DecideStats* stats = nullptr);

}  // namespace dyn::offline
