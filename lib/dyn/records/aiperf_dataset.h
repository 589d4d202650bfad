// AIPerf's custom dataset types as workload rows: single_turn, multi_turn and random_pool lines
// (ai-dynamo/aiperf src/aiperf/dataset/loader/models.py: SingleTurn, MultiTurn, RandomPool) turned
// into the Mooncake-form rows every replay reads (SPEC 6.1), text prompts only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dyn/base/json.h"
#include "dyn/base/named.h"
#include "dyn/records/workload.h"

namespace dyn::records {

/// The names AIPerf's --custom-dataset-type takes, and the one table of them (dyn-replay's flag,
/// its help and man page): kAuto = recognise each input by its rows.
inline constexpr Named<DatasetType> kDatasetTypes[] = {
    {DatasetType::kMooncakeTrace, "mooncake_trace",
     "Mooncake JSONL (timestamp, input_length, output_length, hash_ids, sessions: SPEC 6.1)"},
    {DatasetType::kSingleTurn, "single_turn",
     "one request per line: text or texts, optional timestamp or delay, session_id, output_length"},
    {DatasetType::kMultiTurn, "multi_turn",
     "one conversation per line: session_id and turns (each as single_turn); each turn is new input and the "
     "live replies are threaded in (--history delta)"},
    {DatasetType::kRandomPool, "random_pool",
     "a pool of text entries, sampled with replacement (seeded) into --conversation-num single-turn requests"},
};

/// The AIPerf shape of one parsed line: kMultiTurn when it has "turns", kSingleTurn when it has
/// "text" or "texts" but neither "input_length" nor "text_input" (a random_pool entry looks the
/// same: only --custom-dataset-type tells them apart, as in AIPerf), else kMooncakeTrace.
DatasetType row_shape(const Json& row);

/// The workload rows of one AIPerf line read as `type` (kSingleTurn, kMultiTurn or kRandomPool),
/// each with `where`: the prompt is the text (the contents of "texts", strings or {name, contents},
/// joined by newlines), sent as text_input; timestamp, delay, session_id and output_length keep
/// their meaning (SPEC 6.1). A multi_turn line gives one row per turn, under its session_id (or
/// "multi_turn-<line>" when it has none); a random_pool entry takes no timing or session fields.
/// Errors (one message, the line's fields as AIPerf names them): what dyn-replay cannot send (an
/// image, audio or video, a role other than user, per-turn "extra" body fields), a missing text,
/// "timestamp" with "delay", wrong types, a random_pool entry with timing or session fields.
bool aiperf_rows(const Json& row, DatasetType type, const std::string& where, std::vector<WorkloadRow>& out,
                 std::string* error);

/// random_pool: `samples` draws with replacement from `pool` (a seeded Rng, so the same seed gives
/// the same requests), each a single-turn request without a session, in draw order.
std::vector<WorkloadRow> sample_pool(const std::vector<WorkloadRow>& pool, uint64_t samples, uint64_t seed);

}  // namespace dyn::records
