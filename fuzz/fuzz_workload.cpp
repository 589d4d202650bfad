// Fuzz target: the workload loader (records::load_workload: Mooncake/agentic rows through the
// simdjson row validator parse_workload_object, Dynamo request_end records through
// workload_from_dynamo, session validation, stable sorting).
// Input: one flags byte (bits 0-1 block size 0/16/64/512, bit2 lenient hash ids, bit3 require
// timestamps, bit4 require them when the first row has one, bit5 no sorting), then the JSONL file.
// Properties checked: rows are numbered in load order; a usable strict workload has only
// consistent rows; sorted rows are in timestamp order; every row survives
// workload_row_to_json -> parse_workload_row unchanged (what dyn-trace convert writes, dyn-replay
// and dyn-route read back); and on every line, the fast line scanner (parse_workload_line_fast,
// which decide and the simulator try first) accepts only what simdjson + parse_workload_object
// accept, with the same row.
#include <simdjson.h>

#include <string>

#include "dyn/records/workload.h"
#include "fuzz_util.h"

using dyn::records::WorkloadRow;

namespace {

bool same_row(const WorkloadRow& a, const WorkloadRow& b) {
  return a.timestamp_ms == b.timestamp_ms && a.delay_ms == b.delay_ms && a.input_length == b.input_length &&
         a.output_length == b.output_length && a.hash_ids == b.hash_ids && a.session_id == b.session_id &&
         a.parent_session_id == b.parent_session_id && a.request_id == b.request_id && a.text_input == b.text_input &&
         a.wait_for == b.wait_for && a.tool_wait_ms == b.tool_wait_ms && a.priority == b.priority &&
         a.hash_ids_consistent == b.hash_ids_consistent;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  static constexpr uint32_t kBlockSizes[4] = {0, 16, 64, dyn::records::kMooncakeBlockSize};
  dyn::records::WorkloadOptions opts;
  opts.block_size = kBlockSizes[flags & 3];
  opts.strict_hash_ids = !(flags & 4);
  opts.require_timestamps = flags & 8;
  opts.require_timestamps_if_first_has = flags & 16;
  opts.sort_by_timestamp = !(flags & 32);
  dyn::fuzz::MemFile file(dyn::fuzz::as_view(data + 1, size - 1));
  dyn::records::Workload w = dyn::records::load_workload({file.path()}, opts);

  FUZZ_CHECK(w.block_size > 0);
  for (const std::string& e : w.errors) FUZZ_CHECK(!e.empty());
  bool reordered = false;
  for (size_t i = 0; i < w.rows.size(); ++i) {
    const WorkloadRow& r = w.rows[i];
    reordered |= r.index != i;
    FUZZ_CHECK(r.index < w.rows.size());
    if (w.ok() && opts.strict_hash_ids) FUZZ_CHECK(r.hash_ids_consistent);
    if (i > 0 && opts.sort_by_timestamp && (w.reordered || w.from_dynamo))
      FUZZ_CHECK(w.rows[i - 1].timestamp_ms.value_or(0) <= r.timestamp_ms.value_or(0));

    std::string err;
    auto back = dyn::records::parse_workload_row(dyn::records::workload_row_to_json(r), w.block_size, r.where, &err);
    if (!back) std::fprintf(stderr, "round trip of %s failed: %s\n", r.where.c_str(), err.c_str());
    FUZZ_CHECK(back.has_value());
    FUZZ_CHECK(same_row(r, *back));
  }
  if (!w.from_dynamo) FUZZ_CHECK(reordered == w.reordered);

  // The fast scanner against the DOM path, line by line (the file's bytes as they are, so its
  // 8-byte reads meet every line length and ending).
  static simdjson::dom::parser parser;
  std::string_view text = dyn::fuzz::as_view(data + 1, size - 1);
  WorkloadRow fast, slow;
  const uint32_t bs = opts.block_size ? opts.block_size : dyn::records::kMooncakeBlockSize;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!dyn::records::parse_workload_line_fast(line, bs, fast)) continue;
    simdjson::dom::object obj;
    FUZZ_CHECK(parser.parse(line.data(), line.size()).get_object().get(obj) == simdjson::SUCCESS);
    std::string err;
    FUZZ_CHECK(dyn::records::parse_workload_object(obj, bs, slow, &err));
    FUZZ_CHECK(same_row(fast, slow));
  }
  return 0;
}
