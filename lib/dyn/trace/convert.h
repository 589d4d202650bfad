// Workload converters (SPEC 6): Dynamo traces -> Mooncake, Mooncake -> Dynamo's agentic form,
// Azure LLM inference CSV -> Mooncake, WEKA agent traces -> Mooncake with sessions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dyn/base/named.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/engine/profile.h"
#include "dyn/io/output.h"
#include "dyn/records/workload.h"

namespace dyn::trace {

enum class ConvertFrom { kDynamo, kMooncake, kAzureCsv, kWeka };
/// `dyn-trace convert --from` names.
inline constexpr Named<ConvertFrom> kConvertFrom[] = {
    {ConvertFrom::kDynamo, "dynamo", "Dynamo request_end traces"},
    {ConvertFrom::kMooncake, "mooncake", "Mooncake JSONL workloads"},
    {ConvertFrom::kAzureCsv, "azure-csv", "Azure LLM inference trace CSV"},
    {ConvertFrom::kWeka, "weka", "WEKA kv-cache-tester agent traces (one JSON file per conversation)"},
};
enum class ConvertTo { kMooncake, kAgentic };
/// `dyn-trace convert --to` names.
inline constexpr Named<ConvertTo> kConvertTo[] = {
    {ConvertTo::kMooncake, "mooncake", "Mooncake JSONL"},
    {ConvertTo::kAgentic, "agentic", "Dynamo's agentic form, wait_for chains"},
};

struct ConvertOptions {
  std::vector<std::string> inputs;  ///< files in order; empty or "-" = stdin (gzip by magic)
  ConvertFrom from = ConvertFrom::kDynamo;
  ConvertTo to = ConvertTo::kMooncake;
  uint32_t block_size = 0;  ///< 0 = from the trace (Dynamo) or records::kMooncakeBlockSize
  /// --to agentic: the timing of the service-time estimate (null: SPEC 8's polynomial).
  std::shared_ptr<const engine::PerfProfile> profile;
};

/// Runs one conversion and writes JSONL rows to `out`. Returns the exit code (0, or 3 when rows
/// were rejected; rejected rows are reported with file:line and nothing is written for them).
/// - dynamo -> mooncake|agentic: load_workload (SPEC 6.2: compact ids in first-seen order, block
///   size from request.replay.trace_block_size, mixed sizes or a different --block-size rejected).
///   Any error rejects the whole conversion (exit 3, nothing written).
/// - mooncake -> mooncake: validated and normalized rows (SPEC 6.1).
/// - any -> agentic: to_agentic_rows().
/// - azure-csv -> mooncake: read_azure_csv(), streamed in constant memory.
/// - weka -> mooncake|agentic: read_weka() (weka.h) at block size 64 (another --block-size is a
///   usage error); any file that fails rejects the whole conversion (exit 3, nothing written).
int convert_workload(const ConvertOptions& options, io::Output& out);

/// Dynamo's agentic Mooncake form (ai-dynamo/dynamo agent_trace_to_mooncake --agentic):
/// every row gets `request_id` (its own, else "<session>:<turn>" or "row-<n>"); rows of a
/// session form a wait_for chain (each later turn waits for the previous turn's request_id);
/// the gap after the previous turn goes to `tool_wait_ms` (from `delay`; for a timestamp-only
/// session, timestamp − previous timestamp − estimate_service_ms(previous, nothing cached, `profile`),
/// floored at 0 and rounded to whole ms); only rows without dependencies keep `timestamp` (their open-loop start).
/// Keys: request_id, session_id, parent_session_id, input_length, output_length, hash_ids,
/// text_input, timestamp, wait_for, tool_wait_ms, priority (absent ones omitted). Existing
/// wait_for lists are kept (the previous turn is appended when missing).
std::vector<Json> to_agentic_rows(const records::Workload& workload, const engine::PerfProfile* profile = nullptr);

/// Parses an Azure LLM inference trace timestamp "YYYY-MM-DD HH:MM:SS[.fraction]" (up to 7
/// fractional digits, as in the 2023 release) into 100 ns ticks since 1970-01-01 (UTC, no
/// time-zone handling). Errors: malformed text (kExitBadData).
Expected<int64_t> parse_azure_timestamp(std::string_view text);

/// Streams an Azure LLM inference CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`, columns found
/// by header name; CRLF line endings and a last line without newline accepted) as Mooncake
/// rows: timestamp = ms after the first row (fractional, 0.1 µs resolution), input_length =
/// ContextTokens, output_length = GeneratedTokens, and ceil(ContextTokens / block_size) fresh
/// hash ids per row, counting up across the file, so no two rows share a block (the CSV has no
/// prefix information). Bad rows (unparsable numbers or times, a time before the first row) are
/// reported with file:line and skipped. Returns the number of rejected rows.
uint64_t read_azure_csv(const std::vector<std::string>& inputs, uint32_t block_size, io::Output& out);

}  // namespace dyn::trace
