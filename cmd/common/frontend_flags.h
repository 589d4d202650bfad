// Flags shared by the live frontends (dyn-route serve, dyn-trace capture): listening address,
// upstream timeouts and request tracing (SPEC 5.2), with flag > environment > default (CLI11 envname).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "dyn/cli/checks.h"
#include "session_flags.h"
#include "dyn/cli/run_config.h"
#include "dyn/io/segment_writer.h"
#include "dyn/serve/frontend.h"

namespace dyn::cmd {

/// A count or size option: CLI11 would wrap "-1" into an unsigned value's maximum (a flush that
/// never comes), so a leading minus sign is refused, naming the option (and its variable).
inline const CLI::Validator kNotNegative(
    [](std::string& v) {
      return !v.empty() && v[0] == '-' ? std::string("must not be negative, got " + v) : std::string();
    },
    "", "not negative");

/// Registers listening, upstream and trace flags on `sub`; call apply() after parsing.
struct FrontendFlags {
  dyn::serve::FrontendOptions opt;
  bool trace_flag = false;
  std::string format;
  dyn::io::SegmentWriterOptions file;  // flag and environment values land here

  void add(CLI::App& sub, bool trace_always_on) {
    add_session_flags(sub, opt.session);
    sub.add_option("--host", opt.listen.host, "Address to listen on (admin endpoints included)")->capture_default_str();
    sub.add_option("--port", opt.listen.port, "Port to listen on; 0 picks a free port")->capture_default_str();
    sub.add_option("--port-file", opt.listen.port_file, "Write the bound port to FILE once listening")
        ->type_name("FILE");
    sub.add_option(
           "--threads", opt.listen.threads,
           "Most handler threads (admission waits, tokenizer and store calls, admin endpoints); connections and streams run on an event loop, not bounded by this")
        ->check(CLI::Range(size_t{1}, size_t{65536}))
        ->capture_default_str();
    sub.add_option("--max-request-bytes", opt.max_request_bytes,
                   "Largest request body accepted; a larger one gets 413 with an OpenAI-style error (0 = no limit)")
        ->capture_default_str()
        ->type_name("BYTES");
    sub.add_option("--max-concurrent-requests", opt.max_concurrent_requests,
                   "Most API requests dispatched to workers at once (streams until they end); more wait in the router "
                   "queue (0 = no limit)")
        ->capture_default_str()
        ->type_name("N");
    sub.add_option("--drain-timeout-secs", opt.drain_timeout_s,
                   "On SIGTERM, wait this long for requests in flight to finish (new ones get 503)")
        ->capture_default_str()
        ->check(dyn::cli::finite())
        ->check(CLI::Range(0.0, 86400.0));
    sub.add_option("--admin-host", opt.admin_listen.host, "Address of the separate admin listener (--admin-port)")
        ->capture_default_str();
    sub.add_option("--admin-port", opt.admin_listen.port,
                   "Serve /v1/bindings, /v1/programs, /metrics and detailed /health on this separate port "
                   "(0 = a free port) instead of the main one")
        ->check(CLI::Range(0, 65535));
    sub.add_option("--admin-port-file", opt.admin_listen.port_file, "Write the bound admin port to FILE")
        ->type_name("FILE");
    sub.add_flag("--admin-allow-remote", opt.admin_allow_remote,
                 "Answer admin endpoints on the main listener to non-loopback clients too (default: 403)");
    sub.add_option("--upstream-connect-timeout-secs", opt.upstream.connect_s, "Connect timeout to a worker")
        ->capture_default_str()
        ->check(dyn::cli::positive());
    sub.add_option("--upstream-read-timeout-secs", opt.upstream.read_s,
                   "Longest silence while reading a worker's response")
        ->capture_default_str()
        ->check(dyn::cli::positive());
    // SPEC 5.2's environment names, read by CLI11 (envname) like every other option: a flag wins
    // over its variable, a bad value is a usage error naming it, and the run record says which
    // variable set what.
    if (!trace_always_on)
      sub.add_flag("--request-trace", trace_flag, "Write one request_end row per request")
          ->envname("DYN_REQUEST_TRACE");
    sub.add_option("--request-trace-file-path", file.prefix, "Trace path prefix")
        ->envname("DYN_REQUEST_TRACE_FILE_PATH")
        ->capture_default_str()
        ->type_name("PREFIX");
    sub.add_option("--request-trace-file-format", format,
                   "gzip segments PREFIX.NNNNNN.jsonl.gz (also jsonl.gz, gz), or jsonl = plain PREFIX")
        ->envname("DYN_REQUEST_TRACE_FILE_FORMAT")
        ->check(CLI::IsMember({"gzip", "jsonl", "jsonl.gz", "gz"}))
        ->type_name("gzip|jsonl");
    sub.add_option("--request-trace-file-flush-interval-ms", file.flush_interval_ms,
                   "Rows wait at most this long to be flushed (one gzip member a flush); a row this "
                   "long after the one before it is flushed at once; 0 = only when the buffer fills or the tool stops")
        ->envname("DYN_REQUEST_TRACE_FILE_FLUSH_INTERVAL_MS")
        ->check(kNotNegative)
        ->capture_default_str();
    sub.add_option("--request-trace-file-buffer-bytes", file.buffer_bytes, "Flush when the buffer passes this size")
        ->envname("DYN_REQUEST_TRACE_FILE_BUFFER_BYTES")
        ->check(kNotNegative)
        ->capture_default_str();
    sub.add_option("--request-trace-file-roll-bytes", file.roll_bytes,
                   "Start a new segment after this many uncompressed bytes")
        ->envname("DYN_REQUEST_TRACE_FILE_ROLL_BYTES")
        ->check(kNotNegative)
        ->capture_default_str();
    sub.add_option("--request-trace-file-roll-lines", file.roll_lines,
                   "Start a new segment after this many rows (0 = no limit)")
        ->envname("DYN_REQUEST_TRACE_FILE_ROLL_LINES")
        ->check(kNotNegative)
        ->capture_default_str();
  }

  /// Call after parsing: the trace settings (flags and their variables) into opt.
  void apply(bool trace_always_on) {
    opt.trace_file = file;
    if (!format.empty()) opt.trace_file.gzip = format != "jsonl";  // gzip, jsonl.gz, gz
    opt.trace = trace_always_on || trace_flag;
  }
};

/// The run record of a live frontend (FrontendOptions::run_config): cli::run_config of the parsed
/// command `root` (the tool's app, its subcommand parsed), plus "trace": the effective trace
/// settings (enabled, prefix, gzip, flush and roll limits), from flags and the DYN_REQUEST_TRACE*
/// variables (run_config lists the variables that set an option under "environment").
/// A server reads no input files, so "inputs" is empty (not run_config's stdin entry).
inline dyn::Json frontend_run_config(const CLI::App& root, const dyn::serve::FrontendOptions& opt) {
  dyn::Json c = dyn::cli::run_config(root, {});
  c["inputs"] = dyn::Json::array();
  const auto& t = opt.trace_file;
  c["trace"] = {{"enabled", opt.trace},
                {"prefix", t.prefix},
                {"gzip", t.gzip},
                {"flush_interval_ms", t.flush_interval_ms},
                {"buffer_bytes", t.buffer_bytes},
                {"roll_bytes", t.roll_bytes},
                {"roll_lines", t.roll_lines}};
  return c;
}

}  // namespace dyn::cmd
