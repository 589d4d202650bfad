// dyn-route decide: router flags and options -> offline::decide.
#include <memory>

#include "commands.h"
#include "dyn/cli/run_config.h"
#include "dyn/offline/offline.h"
#include "engine_flags.h"
#include "router_flags.h"
#include "session_flags.h"

void setup_decide(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::offline::DecideOptions decide;
    dyn::cmd::RouterFlags router;
    uint64_t seed = 0;
    std::string summary_path, perf_profile;
    dyn::cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "decide", "Route workload or trace rows offline on a virtual clock; one route_decision row per input row");
  sub->add_option("files", o->decide.inputs,
                  "Mooncake rows, Dynamo request_end rows or header rows (JSONL, gzip ok); - or none = stdin")
      ->type_name("FILE");
  sub->add_option("--workers", o->decide.workers, "Number of virtual workers (ids 0..N-1)")
      ->required()
      ->check(CLI::Range(1u, 100000u));
  sub->add_option("--seed", o->seed, "Seed of every random choice (ties, random modes, temperature)")
      ->capture_default_str();
  sub->add_flag("--explain", o->decide.explain,
                "Add dyn.explain: each worker's overlap, prefill and decode blocks and cost");
  sub->add_option("--block-size", o->decide.workload_block_size,
                  "Block size of Mooncake hash_ids in tokens (default 512; Dynamo rows carry their own)")
      ->check(CLI::Range(1u, 1u << 20));
  sub->add_option("--perf-profile", o->perf_profile,
                  std::string("Engine model: ") + dyn::cmd::kPerfProfileHelp +
                      " (the end estimate: each prompt chunk one step, then one decode step per output token beside "
                      "the worker's KV use)")
      ->type_name("PATH");
  auto* blocks_opt = sub->add_option("--num-gpu-blocks", o->decide.end_model.kv_blocks,
                                     "Engine model: KV blocks per worker, for the decode-time estimate (SPEC 8)")
                         ->capture_default_str()
                         ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  auto* bs_opt = sub->add_option("--engine-block-size", o->decide.end_model.block_size,
                                 "Engine model: the workers' KV block size in tokens (capacity = blocks x size)")
                     ->capture_default_str()
                     ->check(CLI::Range(1u, 1u << 20));
  sub->add_option("--speedup-ratio", o->decide.end_model.speedup_ratio,
                  "Engine model: divides every estimated duration")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1e9));
  sub->add_option("--summary", o->summary_path,
                  "Also write the run record as JSON to FILE: the configuration (version, flags and the environment "
                  "variables that set them, inputs with SHA-256) and the counts (rows routed per worker, rejected, "
                  "skipped, predicted prompt-cache hit %), as dyn-replay --summary")
      ->type_name("FILE");
  dyn::cmd::add_router_flags(*sub, o->router);
  dyn::cmd::add_session_flags(*sub, o->decide.session);
  dyn::cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, &o->decide.inputs, &o->out, [o, sub, blocks_opt, bs_opt](dyn::cli::Sink& sink) {
    if (!o->perf_profile.empty()) {
      auto p = dyn::engine::PerfProfile::load(o->perf_profile);
      if (!p) throw dyn::Fatal(p.error().exit_code, "--perf-profile " + p.error().message);
      dyn::cmd::apply_profile_to_end_model(**p, o->decide.end_model, bs_opt->count() > 0, blocks_opt->count() > 0);
      o->decide.end_model.profile = *p;
    }
    o->decide.router = o->router.config(o->seed);
    o->decide.router_block_size_given = o->router.block_size_given();
    // Recorded before routing: the inputs' checksums are of the files as they were read.
    dyn::Json config;
    std::unique_ptr<dyn::io::Output> summary_out;  // opened now: a bad --summary path fails before the run
    if (!o->summary_path.empty()) {
      config = dyn::cli::run_config(*sub->get_parent(), o->decide.inputs);
      summary_out = dyn::cli::open_run_record(o->summary_path);
    }
    dyn::io::Output* out = &sink.get();
    dyn::offline::DecideStats st;
    int rc = dyn::offline::decide(o->decide, *out, &st);
    sink.close();
    if (!o->summary_path.empty()) {
      dyn::Json workers = dyn::Json::array();
      for (uint64_t n : st.per_worker) workers.push_back(n);
      dyn::Json summary{{"mode", "decide"},
                        {"workers", o->decide.workers},
                        {"router_mode", dyn::route::mode_name(o->decide.router.mode)},
                        {"router_block_size", st.router_block_size},
                        {"requests", st.decisions},
                        {"routed", st.routed},
                        {"rejected", st.rejected},
                        {"skipped_not_request_end", st.skipped},
                        {"untimed", st.untimed},
                        {"kv_event_rows", st.kv_event_rows},
                        {"kv_events_skipped", st.kv_events_skipped},
                        {"malformed_lines", st.malformed},
                        {"reordered", st.reordered},
                        {"routed_per_worker", workers},
                        {"input_tokens", st.input_tokens},
                        {"cached_tokens", st.cached_tokens},
                        // percent, as dyn-replay --sim's summary
                        {"prompt_cache_hit_pct", st.input_tokens ? 100.0 * static_cast<double>(st.cached_tokens) /
                                                                       static_cast<double>(st.input_tokens)
                                                                 : 0.0},
                        {"decision_quality", dyn::route::quality_json(st.quality)},
                        {"exit_status", rc}};
      dyn::cli::write_run_record(*summary_out, config, summary);
    }
    return rc;
  });
}
