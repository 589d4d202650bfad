// dyn-mocker: a mock OpenAI-compatible inference engine running the SPEC 8 engine model in
// real time. Flags and start-up only: the server is dyn::mocker (lib/dyn/mocker), the model and
// wire shapes live in lib/dyn/engine and lib/dyn/api.
#include "dyn/cli/checks.h"
#include "dyn/cli/choices.h"
#include "dyn/base/error.h"
#include "dyn/cli/run_tool.h"
#include "dyn/mocker/server.h"
#include "engine_flags.h"
#include "session_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"Mock OpenAI-compatible inference engine with a KV cache and timing model", "dyn-mocker"};
  dyn::mocker::MockerOptions o;
  app.add_option("--host", o.listen.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", o.listen.port, "Port to listen on (0 = any free port); engine i of --num-workers: PORT + i")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--port-file", o.listen.port_file,
                 "Write the bound port to FILE once listening (--num-workers: one port a line, engine order)")
      ->type_name("FILE");
  app.add_option("--model", o.model, "Model name served and reported")->capture_default_str();
  app.add_option("--worker-id", o.worker_id, "Worker id in metrics, KV events and the x-dyn-worker header")
      ->capture_default_str();
  app.add_option("--num-workers", o.num_workers,
                 "Engines in this process (Dynamo mocker's): each its own HTTP listener, worker id --worker-id + i, KV "
                 "event sockets and metrics; with --num-g4-blocks one G4 pool shared by all")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  dyn::cmd::EngineFlags ef;
  dyn::cmd::add_engine_flags(app, o.engine, ef);
  dyn::cmd::add_session_flags(app, o.session);
  dyn::cmd::add_kv_hint_flags(app, o.engine.kv_hints,
                              "KV hints (POST /v1/kv_hints, X-Dynamo-Retention-TTL-Ms, nvext.kv_hint)");
  app.add_option(
         "--kv-events-endpoint", o.kv_events_endpoint,
         "Publish KV cache events as vLLM does (ZMQ PUB, msgpack KVEventBatch), bound here; port * = any free one (see GET /health)")
      ->type_name("ZMQ_ADDR");
  app.add_option("--kv-events-replay-endpoint", o.kv_events_replay_endpoint,
                 "Answer replay requests for missed KV event batches (ZMQ ROUTER) here")
      ->type_name("ZMQ_ADDR")
      ->needs("--kv-events-endpoint");
  dyn::cli::add_choice(
      app, "--kv-events-encoding", o.kv_events_layout, dyn::kvevents::kEncodings,
      "Encoding of the published batches: " + dyn::cli::choices_help(dyn::kvevents::kEncodings, "; ", ": "))
      ->needs("--kv-events-endpoint");
  app.add_option(
         "--replies", o.replies,
         "JSONL of scripted replies: {\"text\"} or {\"tool_call\": {\"name\", \"arguments\"}}, optional conditions \"match\", \"offered\", \"first_turn\", \"after_tool\"")
      ->type_name("FILE")
      ->check(CLI::ExistingFile);
  app.add_option("--default-max-tokens", o.default_max_tokens, "Output tokens when a request sets no limit")
      ->capture_default_str()
      ->check(dyn::cli::positive());
  app.add_option("--threads", o.listen.threads, "HTTP worker threads (one per concurrent stream)")
      ->capture_default_str()
      ->check(CLI::Range(4, 65536));
  const char* fg = "Fault injection";
  app.add_option("--fault-after", o.fault_after, "Serve this many API requests normally before any injected fault")
      ->capture_default_str()
      ->group(fg);
  app.add_option("--fail-first", o.fail_first,
                 "Answer the first N API requests (after --fault-after) with --fail-status, then recover")
      ->capture_default_str()
      ->group(fg);
  app.add_option("--fail-status", o.fail_status, "HTTP status of injected failures")
      ->capture_default_str()
      ->check(CLI::Range(400, 599))
      ->group(fg);
  app.add_option("--stall-before-headers-ms", o.stall_ms,
                 "Hold API requests (after the failures) this long before sending response headers")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3.6e6))
      ->group(fg);
  app.add_option("--stall-count", o.stall_count, "Stall only this many requests (0 = every one)")
      ->capture_default_str()
      ->group(fg);
  return dyn::cli::run_tool(argc, argv, app, [&] {
    o.engine.kv_events = !o.kv_events_endpoint.empty();
    o.engine.kv_hints.enabled = true;
    ef.finish(o.engine);
    return dyn::mocker::serve(o);
  });
}
