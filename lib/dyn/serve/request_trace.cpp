// The request trace: request_end rows of finished exchanges, and the run configuration beside them.
#include "dyn/serve/request_trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <unistd.h>

#include "dyn/base/diag.h"
#include "dyn/io/output.h"
#include "dyn/records/rows.h"

namespace dyn::serve {

std::optional<Error> RequestTrace::check_folder(const std::string& prefix) {
  std::string dir = std::filesystem::path(prefix).parent_path().string();
  if (dir.empty()) dir = ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Error{dir + ": trace folder cannot be written: " + std::strerror(errno), kExitIo};
  return std::nullopt;
}

void RequestTrace::open(const io::SegmentWriterOptions& file, const Json& run_config) {
  io::SegmentWriterOptions wo = file;
  wo.drop_on_error = true;  // a full disk must not stop the proxy: rows are dropped and reported
  writer_ = std::make_unique<io::SegmentWriter>(wo);
  if (run_config.is_null()) return;
  // Beside the segments, so the trace says what produced it; not being able to write it is a
  // warning like a dropped row, never a reason to stop serving.
  const std::string path = wo.prefix + ".run-config.json";
  try {
    io::Output f(path);
    f.line(run_config.dump(2, ' ', false, Json::error_handler_t::replace));
    f.close();
  } catch (const Fatal& e) {
    diag::warning(path, std::string("run configuration not written: ") + e.what());
  }
}

void RequestTrace::write_end(const Exchange& ex, const http::ProxyOutcome* out, int status, const std::string& err_type,
                             const std::string& err_msg) {
  writer_->write_line(request_end_row(ex, out, status, err_type, err_msg));
}

void RequestTrace::write_tool_event(const records::ToolEvent& e, const records::ToolEventJoin& join) {
  std::string row;
  records::append_tool_event(row, e, &join);
  writer_->write_line(row);
}

void RequestTrace::close() {
  if (writer_) writer_->close();
}

std::optional<uint64_t> RequestTrace::dropped_rows() const {
  if (!writer_) return std::nullopt;
  return writer_->dropped_rows();
}

std::string RequestTrace::request_end_row(const Exchange& ex, const http::ProxyOutcome* out, int status,
                                          const std::string& err_type, const std::string& err_msg) const {
  const ResponseFacts* f = ex.tap ? &ex.tap->facts() : nullptr;
  double end = out ? out->end_ms : clock_.now_ms();
  const Latencies lat = latencies_of(ex, out);
  records::RequestEnd r;
  r.event_time_unix_ms = ex.received_unix_ms + static_cast<uint64_t>(std::max(0.0, end - ex.start_ms));
  r.event_source = "router";
  if (ex.ctx) r.agent_context = records::ContextRef::of(*ex.ctx);
  r.request_id = ex.request_id;
  if (!ex.x_request_id.empty()) r.x_request_id = ex.x_request_id;
  const std::string& model = f && !f->model.empty() ? f->model : ex.model;
  if (!model.empty()) r.model = model;
  uint64_t in = ex.input_length;
  if (f && f->input_tokens) {
    in = *f->input_tokens;
  } else {
    r.input_tokens_estimated = true;
  }
  r.input_tokens = in;
  if (lat.output_tokens) {
    r.output_tokens = *lat.output_tokens;
    if (lat.output_tokens_estimated) r.output_tokens_estimated = true;
  }
  if (f && f->cached_tokens) r.cached_tokens = *f->cached_tokens;
  r.request_received_ms = ex.received_unix_ms;
  if (ex.stream && lat.ttft_ms) r.ttft_ms = *lat.ttft_ms;
  r.total_time_ms = end - ex.start_ms;
  if (lat.avg_itl_ms) r.avg_itl_ms = *lat.avg_itl_ms;
  if (f && f->cached_tokens && in > 0) r.kv_hit_rate = static_cast<double>(*f->cached_tokens) / static_cast<double>(in);
  if (ex.worker >= 0 && routed_) r.worker = ex.worker;
  r.replay = records::RequestEnd::Replay{static_cast<uint64_t>(block_size_), ex.input_length, ex.sequence_hashes};
  std::vector<records::RequestEnd::ToolCall> calls;
  if (f) {
    if (f->finish_reason) r.finish_reason = *f->finish_reason;
    for (const auto& tc : f->tool_calls) calls.push_back({tc.choice_index, tc.tool_call_index, tc.id, tc.name});
    r.tool_calls = calls;
  }

  bool cancelled = out && out->kind == http::ProxyOutcome::Kind::kCancelled;
  bool error = !err_type.empty() && !cancelled;
  r.status = cancelled ? "cancelled" : (error ? "error" : "ok");
  std::string warning;
  if (error) {
    bool transport = err_type == "connection" || err_type == "stream_cut";
    r.error =
        records::RequestEnd::Failure{transport ? 0 : status, err_type,
                                     err_msg.empty() ? std::string_view("the stream carried an error event") : err_msg};
  } else if (!cancelled && f) {
    if (StreamEnd se = stream_end(ex.api, *f); !se.warning.empty()) {
      warning = std::move(se.warning);
      r.warning = warning;
    }
  }
  if (f && f->first_content_ms && f->second_content_ms) r.ttst_ms = *f->second_content_ms - *f->first_content_ms;
  if (ex.stream && f && !f->inter_chunk_ms.empty()) r.inter_chunk_ms = f->inter_chunk_ms;
  // Per-chunk token counts when the worker sent per-chunk usage (issue 21.4), as dyn-replay does.
  if (ex.stream && f && f->content_chunks > 0 && f->chunk_tokens.size() == f->content_chunks)
    r.chunk_tokens = f->chunk_tokens;
  if (lat.latency_ms) r.request_latency_ms = *lat.latency_ms;
  if (!ex.binding.empty()) r.binding = ex.binding;
  if (!ex.rebind_reason.empty()) r.rebind_reason = ex.rebind_reason;
  r.retries = ex.retries;
  r.migrations = ex.migrations;
  std::vector<records::RequestEnd::Attempt> attempts;
  for (const FailedAttempt& a : ex.failed)
    attempts.push_back({a.worker, a.stage, a.error, a.status, a.circuit, a.tokens_sent});
  r.attempts = attempts;
  r.pause_ms = ex.pause_ms;
  // The router queue (SPEC 3.4): for requests it held, their wait and class and the depth met.
  if (ex.queued) {
    r.router_queue_ms = ex.router_queue_ms.value_or(0);
    r.queue_depth = ex.queue_depth;
    if (policy_classes_ && ex.priority.class_index < policy_classes_->size())
      r.policy_class = (*policy_classes_)[ex.priority.class_index].name;
  }
  if (ex.priority.source != route::PrioritySource::kDefault)
    r.priority_source = route::priority_source_name(ex.priority.source);
  if (ex.quality)
    r.quality = records::RequestEnd::Quality{ex.quality->predicted_cached_tokens, ex.quality->avoidable_prefill_tokens,
                                             route::non_max_cause_name(ex.quality->cause)};
  r.kv_hints = ex.kv_hints;
  // Room for the hash list (up to 20 digits and a comma each): a 150k-token prompt's 2,344
  // hashes are some 47 KB, which a 1 KiB start reached through six reallocations and copies.
  std::string line;
  line.reserve(1024 + 21 * ex.sequence_hashes.size());
  records::append_request_end(line, r);
  return line;
}

}  // namespace dyn::serve
