// dyn-trace cat: concatenate trace segments and JSONL files, unwrap envelopes, optional sort.
#pragma once

#include <string>
#include <vector>

#include "dyn/io/line_reader.h"
#include "dyn/io/output.h"

namespace dyn::trace {

struct CatOptions {
  std::vector<std::string> inputs;  ///< files in order; empty or "-" = stdin
  bool sort = false;                ///< stable sort by event_time_unix_ms (rows without it keep order, first)
  bool strict = false;              ///< a truncated gzip stream is an error (exit 3)
};

/// Streams every valid JSON row of the inputs to `out`, one per line. A bare row is written
/// byte-for-byte as read (u64 values untouched); an envelope {"timestamp","event"} is replaced
/// by its event. Malformed lines (invalid JSON, NUL padding) are reported with file:line,
/// counted and skipped. With `sort`, rows are held in memory and stably sorted.
/// Returns the exit code (0; 3 in strict mode when a gzip stream was truncated).
int cat_traces(const CatOptions& options, io::Output& out);

}  // namespace dyn::trace
