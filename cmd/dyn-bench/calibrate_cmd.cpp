// dyn-bench calibrate and fidelity: the engine model fitted to measured closed loops, and scored
// against them through the simulator (SPEC 8).
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "dyn/base/error.h"
#include "dyn/cli/format.h"
#include "dyn/fidelity/calibrate.h"
#include "dyn/io/output.h"
#include "engine_flags.h"

using namespace dyn;

namespace {

fidelity::Selection select_or_fail(const std::string& path, const std::vector<std::string>& where, uint32_t gpus) {
  fidelity::Where w;
  for (const auto& text : where) {
    auto p = fidelity::parse_where(text);
    if (!p) throw Fatal(p.error().exit_code, p.error().message);
    w.push_back(*p);
  }
  auto sel = fidelity::select_points(path, w, gpus);
  if (!sel) throw Fatal(sel.error().exit_code, sel.error().message);
  return std::move(*sel);
}

void add_selection_options(CLI::App* sub, std::string& rows, std::vector<std::string>& where, uint32_t& gpus) {
  sub->add_option("rows", rows,
                  "Measured closed loops: a silicon-sample CSV (AIConfigurator's columns) or request_end rows of a "
                  "real endpoint (JSONL, gzip ok)")
      ->required()
      ->type_name("ROWS");
  sub->add_option("--where", where,
                  "Keep rows whose COLUMN equals VALUE (repeatable, all must hold); the rows left must be one "
                  "configuration")
      ->type_name("COLUMN=VALUE");
  sub->add_option("--gpus", gpus, "GPUs of the measured engine, for request_end rows (CSV rows carry tp_size)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
}

std::string table_line(const char* label, const fidelity::Scores& s) {
  return fmt::format("{:<10} rows {:>4}  TTFT MAPE {:6.1f} %  TPOT MAPE {:6.1f} %  TPS/GPU MAPE {:6.1f} %\n", label,
                     s.rows, s.ttft_mape_pct, s.tpot_mape_pct, s.tps_gpu_mape_pct);
}

}  // namespace

void setup_calibrate(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::string rows, output;
    cli::Format format = cli::Format::kJson;
    std::vector<std::string> where;
    uint32_t gpus = 1, block_size = 16, max_num_seqs = 1024;
    std::vector<uint32_t> budgets, partials;
    std::string chunked = "search";
    uint64_t kv_blocks = 0;
    std::string model, gpu, engine, engine_version;
    uint32_t tp = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "calibrate",
      "Fit a timing profile (dyn's parametric step model and scheduler settings) so simulated closed loops reproduce "
      "measured ones; score it leaving each ISL/OSL pair out");
  add_selection_options(sub, o->rows, o->where, o->gpus);
  sub->add_option("-o,--output", o->output, "Write the fitted profile (dyn JSON, for --perf-profile) to FILE")
      ->type_name("PROFILE.json");
  cli::add_format_option(*sub, o->format, {cli::Format::kTable, cli::Format::kJson},
                         "Output format (json: {profile, train, held_out})");
  const char* g = "Engine";
  sub->add_option("--block-size", o->block_size, "KV block size of the fitted engine (vLLM's default 16)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20))
      ->group(g);
  auto* seqs = sub->add_option("--max-num-seqs", o->max_num_seqs,
                               "Fix the most sequences running at once (default: 1024, or fewer where the rows say so)")
                   ->check(CLI::Range(1u, 1u << 24))
                   ->group(g);
  sub->add_option("--max-num-batched-tokens", o->budgets,
                  "Token budgets per step to try (repeatable; default 2048 to 32768 by doubling; one value fixes it)")
      ->check(CLI::Range(1u, 1u << 30))
      ->group(g);
  sub->add_option("--max-num-partial-prefills", o->partials,
                  "Most prefills per step to try (repeatable, 0 = no limit; default 0, 1, 2 and 4; one value "
                  "fixes it)")
      ->group(g);
  sub->add_option("--chunked-prefill", o->chunked, "on, off, or search both")
      ->check(CLI::IsMember({"on", "off", "search"}))
      ->capture_default_str()
      ->group(g);
  sub->add_option("--num-gpu-blocks-override", o->kv_blocks,
                  "Fix the KV pool (blocks) instead of fitting its size to where long loops queue")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
      ->group(g);
  const char* n = "Profile names (default: the CSV's model_path, system, tp_size, backend, backend_version)";
  sub->add_option("--model", o->model, "Model the profile describes")->group(n);
  sub->add_option("--gpu", o->gpu, "GPU the profile describes")->group(n);
  sub->add_option("--tp", o->tp, "Tensor-parallel size")->check(CLI::Range(1u, 1u << 20))->group(n);
  sub->add_option("--engine", o->engine, "Inference engine (vllm, sglang, trtllm, ...)")->group(n);
  sub->add_option("--engine-version", o->engine_version, "Engine version")->group(n);
  dispatch.add(sub, [o, seqs] {
    const fidelity::Selection sel = select_or_fail(o->rows, o->where, o->gpus);
    fidelity::CalibrateOptions co;
    co.engine.block_size = o->block_size;
    co.engine.max_num_seqs = o->max_num_seqs;
    co.fit_seqs = seqs->count() == 0;
    if (!o->budgets.empty()) co.budgets = o->budgets;
    if (!o->partials.empty()) co.partials = o->partials;
    if (o->chunked != "search") co.chunked = {o->chunked == "on"};
    if (o->kv_blocks) {
      co.fit_kv = false;
      co.engine.num_blocks = o->kv_blocks;
    }
    auto pick = [&sel](const std::string& flag, const char* column) {
      return !flag.empty() ? flag : sel.column(column);
    };
    co.info.model = pick(o->model, sel.column("model_path").empty() ? "model" : "model_path");
    co.info.gpu = pick(o->gpu, "system");
    co.info.engine = pick(o->engine, "backend");
    co.info.engine_version = pick(o->engine_version, "backend_version");
    const std::string tp = sel.column("tp_size");
    co.info.tp = o->tp ? o->tp : tp.empty() ? 1 : static_cast<uint32_t>(std::stoul(tp));
    co.info.gpus = sel.points.empty() ? 1 : sel.points.front().gpus;
    co.info.source = o->rows;
    auto res = fidelity::calibrate(sel.points, co);
    if (!res) throw Fatal(res.error().exit_code, o->rows + ": " + res.error().message);
    const Json profile = res->profile->to_json();
    if (!o->output.empty()) {
      io::Output f(o->output);
      f.line(profile.dump(2));
      f.close();
    }
    io::Output& out = io::stdout_output();
    if (o->format == cli::Format::kJson) {
      out.line(Json{
          {"profile", profile}, {"train", res->train_scores.to_json()}, {"held_out", res->held_out_scores.to_json()}}
                   .dump(2));
    } else {
      out.write(fmt::format("profile   {}\n", res->profile->describe()));
      out.write(table_line("train", res->train_scores));
      out.write(table_line("held out", res->held_out_scores));
    }
    return static_cast<int>(kExitOk);
  });
}

void setup_fidelity(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::string rows;
    cli::Format format = cli::Format::kJson;
    std::vector<std::string> where;
    uint32_t gpus = 1;
    engine::EngineConfig engine;
    cmd::EngineFlags flags;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "fidelity",
      "Run each measured closed loop through the simulator (dyn-replay --sim's engine: concurrency c, 10 x c "
      "requests of exactly ISL in and OSL out, no prefix reuse) and score it against the measurement");
  add_selection_options(sub, o->rows, o->where, o->gpus);
  cli::add_format_option(*sub, o->format, {cli::Format::kTable, cli::Format::kJson},
                         "Output format (json: the rows and their MAPEs)");
  o->engine.max_num_seqs = 1024;  // vLLM's default on 70 GiB+ GPUs; a profile's own setting wins
  cmd::add_engine_flags(*sub, o->engine, o->flags);
  dispatch.add(sub, [o] {
    const fidelity::Selection sel = select_or_fail(o->rows, o->where, o->gpus);
    engine::EngineConfig e = o->engine;
    o->flags.finish(e);
    const auto rows = fidelity::predict(sel.points, e);
    const fidelity::Scores s = fidelity::score(rows);
    const std::string prof =
        e.profile ? e.profile->describe() : "default polynomial (H200, Llama-3.1-8B-Instruct-FP8, TP1, vLLM)";
    io::Output& out = io::stdout_output();
    if (o->format == cli::Format::kJson) {
      Json j{{"profile", prof}, {"rows", Json::array()}};
      for (const auto& r : rows) j["rows"].push_back(fidelity::prediction_json(r));
      j["ttft_mape_pct"] = s.ttft_mape_pct;
      j["tpot_mape_pct"] = s.tpot_mape_pct;
      j["tps_gpu_mape_pct"] = s.tps_gpu_mape_pct;
      out.line(j.dump(2));
    } else {
      out.write(fmt::format("profile   {}\n", prof));
      out.write(" ISL    OSL   conc  TTFT ms  pred   TPOT ms  pred   TPS/GPU  pred\n");
      for (const auto& r : rows)
        out.write(fmt::format("{:>5} {:>5} {:>5} {:>8.1f} {:>8.1f} {:>7.2f} {:>7.2f} {:>8.1f} {:>8.1f}\n", r.point.isl,
                              r.point.osl, r.point.concurrency, r.point.ttft_ms, r.predicted.ttft_ms, r.point.tpot_ms,
                              r.predicted.tpot_ms, r.point.tps_gpu(), r.predicted.tps_gpu));
      out.write(table_line("all", s));
    }
    return static_cast<int>(kExitOk);
  });
}
