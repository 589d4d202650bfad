// Fuzz target: the trace-record decoder: metrics::load_requests (request_end rows and AIPerf
// records -> RequestRecord, with parse_request_end / parse_aiperf_record) and the report built
// from the records (build_report, report_json, report_csv, report_table: what dyn-bench report
// and compare print).
// Input: one flags byte (bit0 with a goodput SLO), then the JSONL file.
// Properties checked: every row is accounted for (a record, a warmup row or another event type);
// mixing AIPerf records with trace rows is the documented Fatal exit 3 and nothing else throws;
// the per-row decoders agree with load_requests; the report's request count is the valid records.
#include <string>

#include "dyn/base/error.h"
#include "dyn/io/jsonl.h"
#include "dyn/metrics/report.h"
#include "dyn/metrics/request.h"
#include "dyn/records/reader.h"
#include "fuzz_util.h"

using namespace dyn::metrics;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  dyn::fuzz::MemFile file(dyn::fuzz::as_view(data + 1, size - 1));
  RequestSet set;
  try {
    set = load_requests({file.path()});
  } catch (const dyn::Fatal& f) {
    FUZZ_CHECK(f.exit_code() == dyn::kExitBadData);
    return 0;
  }

  // The same rows decoded one by one.
  dyn::io::JsonlOptions opts;
  opts.max_reports = 0;
  dyn::records::RowReader reader({file.path()}, opts);  // as load_requests reads: envelopes unwrapped
  dyn::Json row;
  std::string where;
  uint64_t rows = 0, records = 0;
  while (reader.next(row, &where)) {
    ++rows;
    if (set.kind == RowKind::kAiperf) {
      FUZZ_CHECK(is_aiperf_record(row));
      RequestRecord r = parse_aiperf_record(row, where);
      FUZZ_CHECK(records < set.requests.size() && set.requests[records].where == r.where);
      ++records;
    } else if (auto r = parse_request_end(row, where)) {
      FUZZ_CHECK(records < set.requests.size() && set.requests[records].request_id == r->request_id &&
                 set.requests[records].valid() == r->valid());
      ++records;
    }
  }
  FUZZ_CHECK(records == set.requests.size());
  FUZZ_CHECK(set.malformed == reader.malformed());
  if (set.kind == RowKind::kDyn) FUZZ_CHECK(rows == set.requests.size() + set.warmup_skipped + set.other_rows);

  ReportOptions ropts;
  if (flags & 1) ropts.goodput = {{"time_to_first_token", 100.0}, {"request_latency", 1000.0}};
  Report report = build_report(set, ropts);
  uint64_t valid = 0;
  for (auto& r : set.requests) valid += r.valid();
  if (const Scalar* count = report.find_scalar("request_count")) FUZZ_CHECK(count->value == static_cast<double>(valid));
  dyn::Json j = report_json(report);
  (void)j.dump();
  (void)report_csv(report);
  (void)report_table(report, /*per_session=*/true);
  return 0;
}
