// Unit tests for lib/dyn/fidelity: load points from CSV and request_end rows, the linear closed
// loop against the simulator, NNLS, and calibration recovering a known step model.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dyn/fidelity/calibrate.h"

using namespace dyn;
using namespace dyn::fidelity;
namespace fs = std::filesystem;

namespace {

const std::string kSilicon = std::string(DYN_SOURCE_DIR) + "/data/silicon/aic_silicon_subset.csv";

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = (fs::temp_directory_path() / ("dyn-test-" + name)).string();
  std::ofstream(path) << text;
  return path;
}

engine::StepCoefficients known() {
  engine::StepCoefficients c;
  c.base = 8;
  c.prefill_step = 3;
  c.prefill_token = 0.03;
  c.prefill_attention = 2e-6;
  c.prefill_seq = 0.5;
  c.decode_seq = 0.12;
  c.kv_token = 3e-5;
  return c;
}

}  // namespace

TEST_CASE("silicon CSV: one configuration selected, several listed, duplicates dropped") {
  auto sel = select_points(
      kSilicon, {{"backend", "vllm"}, {"model_path", "Qwen/Qwen3-32B"}, {"tp_size", "2"}, {"precision", ""}});
  REQUIRE(sel.ok());
  CHECK(sel->points.size() == 30);
  CHECK(pairs_of(sel->points).size() == 6);
  CHECK(sel->column("system") == "h100_sxm");
  const LoadPoint& p = sel->points.front();
  CHECK(p.gpus == 2);
  CHECK(p.where.find("aic_silicon_subset.csv:") != std::string::npos);
  // tps/GPU derived from TPOT as Dynamo's comparison: 1000 x c / TPOT / GPUs.
  CHECK(p.tps_gpu() == doctest::Approx(1000.0 * static_cast<double>(p.concurrency) / p.tpot_ms / 2));

  auto many = select_points(kSilicon, {{"backend", "vllm"}, {"model_path", "Qwen/Qwen3-32B"}});
  REQUIRE_FALSE(many.ok());
  CHECK(many.error().message.find("configurations match") != std::string::npos);
  CHECK(many.error().message.find("tp_size=2") != std::string::npos);
  CHECK(many.error().message.find("tp_size=4") != std::string::npos);

  auto none = select_points(kSilicon, {{"backend", "sglang"}});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message.find("no row matches") != std::string::npos);
  auto bad_col = select_points(kSilicon, {{"flavour", "x"}});
  REQUIRE_FALSE(bad_col.ok());
  CHECK(bad_col.error().exit_code == kExitUsage);

  const std::string dup = write_file("dup.csv",
                                     "id,backend,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"
                                     "a,x,100,10,4,1,50,5\nb,x,100,10,4,1,50,5\nc,x,200,10,4,1,70,6\n");
  auto d = select_points(dup, {});
  REQUIRE(d.ok());
  CHECK(d->points.size() == 2);
  CHECK(d->duplicates == 1);
  const std::string bad = write_file("bad.csv", "isl,osl,batch_size,silicon_ttft_ms,silicon_tpot_ms\n100,10,x,5,1\n");
  auto b = select_points(bad, {});
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().message.find("bad.csv:2") != std::string::npos);
  CHECK(b.error().message.find("batch_size") != std::string::npos);
}

TEST_CASE("request_end rows become closed-loop runs: concurrency from overlap, means of TTFT and ITL") {
  std::string rows;
  // Two clients, 3 requests each, back to back: 1000 input, 5 output tokens.
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 3; ++i)
      rows +=
          "{\"event_type\":\"request_end\",\"request\":{\"model\":\"m\",\"input_tokens\":1000,\"output_tokens\":5,"
          "\"request_received_ms\":" +
          std::to_string(1000 + i * 100 + c) + ",\"ttft_ms\":" + std::to_string(20 + c) +
          ",\"total_time_ms\":90,\"avg_itl_ms\":10},\"dyn\":{\"status\":\"ok\"}}\n";
  // An error row and another run much later with other lengths.
  rows +=
      "{\"event_type\":\"request_end\",\"request\":{\"model\":\"m\",\"input_tokens\":1000,\"output_tokens\":5,"
      "\"request_received_ms\":1000,\"ttft_ms\":1,\"total_time_ms\":2,\"avg_itl_ms\":1},\"dyn\":{\"status\":\"error\"}}\n";
  rows +=
      "{\"event_type\":\"request_end\",\"request\":{\"model\":\"m\",\"input_tokens\":50,\"output_tokens\":3,"
      "\"request_received_ms\":9000,\"ttft_ms\":7,\"total_time_ms\":20,\"avg_itl_ms\":6}}\n";
  auto sel = select_points(write_file("re.jsonl", rows), {});
  REQUIRE(sel.ok());
  REQUIRE(sel->points.size() == 2);
  const LoadPoint* big = sel->points[0].isl == 1000 ? &sel->points[0] : &sel->points[1];
  CHECK(big->concurrency == 2);
  CHECK(big->ttft_ms == doctest::Approx(20.5));
  CHECK(big->tpot_ms == doctest::Approx(10));
  auto only = select_points(write_file("re2.jsonl", rows), {{"isl", "50"}});
  REQUIRE(only.ok());
  CHECK(only->points.size() == 1);
}

TEST_CASE("the linear closed loop predicts exactly what the simulator measures") {
  engine::EngineConfig e;
  e.block_size = 16;
  e.max_num_seqs = 1024;
  e.max_num_batched_tokens = 2048;
  for (const LoadPoint& p : {LoadPoint{1000, 50, 8, 1, 1, 1, "a"}, LoadPoint{3000, 20, 4, 1, 1, 1, "b"},
                             LoadPoint{500, 100, 32, 1, 1, 1, "c"}}) {
    for (bool chunked : {true, false}) {
      e.enable_chunked_prefill = chunked;
      e.num_blocks = 100000;
      const LinearLoop l = linear_loop(p, e);
      REQUIRE(l.ok);
      engine::EngineConfig run = e;
      run.profile = engine::PerfProfile::parametric(known(), {}, {});
      const LoopFigures f = simulate_point(p, run);
      double ttft = l.ttft_offset, tpot = l.tpot_offset;
      for (size_t i = 0; i < engine::StepCoefficients::kCount; ++i) {
        ttft += l.ttft[i] * known()[i];
        tpot += l.tpot[i] * known()[i];
      }
      CHECK(f.requests == 10 * p.concurrency);
      CHECK(f.errors == 0);
      CHECK(f.ttft_ms == doctest::Approx(ttft).epsilon(1e-9));
      CHECK(f.tpot_ms == doctest::Approx(tpot).epsilon(1e-9));
    }
  }
  // A pool too small for the loop's demand queues and preempts; still exact.
  e.enable_chunked_prefill = true;
  e.num_blocks = 400;
  const LoadPoint p{1000, 200, 16, 1, 1, 1, "d"};
  const LinearLoop l = linear_loop(p, e);
  engine::EngineConfig run = e;
  run.profile = engine::PerfProfile::parametric(known(), {}, {});
  const LoopFigures f = simulate_point(p, run);
  double ttft = l.ttft_offset;
  for (size_t i = 0; i < engine::StepCoefficients::kCount; ++i) ttft += l.ttft[i] * known()[i];
  CHECK(f.ttft_ms == doctest::Approx(ttft).epsilon(1e-9));
}

TEST_CASE("nnls: non-negative least squares") {
  // y = 2 a + 0 b, with b's column pulling negative: b stays at 0.
  std::vector<std::vector<double>> a = {{1, 1}, {2, -1}, {3, 0}};
  std::vector<double> y = {2, 4, 6};
  auto x = nnls(a, y);
  CHECK(x[0] == doctest::Approx(2));
  CHECK(x[1] == doctest::Approx(0));
  auto z = nnls({{1, 0}, {0, 1}}, {-1, 3});
  CHECK(z[0] == 0);
  CHECK(z[1] == doctest::Approx(3));
}

TEST_CASE("calibrate recovers a known step model from closed loops simulated with it") {
  engine::EngineConfig e;
  e.block_size = 16;
  e.max_num_seqs = 1024;
  e.max_num_batched_tokens = 4096;
  e.num_blocks = 1 << 20;
  e.profile = engine::PerfProfile::parametric(known(), {}, {});
  std::vector<LoadPoint> pts;
  for (auto [isl, osl] : {std::pair{1024, 64}, {4096, 64}, {1024, 256}, {2048, 128}})
    for (uint64_t c : {4, 16, 32})
      pts.push_back({static_cast<uint64_t>(isl), static_cast<uint64_t>(osl), c, 1, 1, 1, "x"});
  for (auto& p : pts) {
    const LoopFigures f = simulate_point(p, e);
    p.ttft_ms = f.ttft_ms;
    p.tpot_ms = f.tpot_ms;
  }
  CalibrateOptions o;
  o.engine.block_size = 16;
  o.engine.max_num_seqs = 1024;
  o.budgets = {2048, 4096, 8192};
  o.info.model = "m";
  auto r = calibrate(pts, o);
  REQUIRE(r.ok());
  CHECK(r->profile->engine().max_num_batched_tokens.value() == 4096);
  CHECK(r->train_scores.ttft_mape_pct < 0.01);
  CHECK(r->train_scores.tpot_mape_pct < 0.01);
  CHECK(r->held_out_scores.rows == pts.size());
  CHECK(r->held_out_scores.ttft_mape_pct < 1);
  CHECK(r->held_out_scores.tpot_mape_pct < 1);

  std::vector<LoadPoint> two(pts.begin(), pts.begin() + 6);  // two ISL/OSL pairs
  auto few = calibrate(two, o);
  REQUIRE_FALSE(few.ok());
  CHECK(few.error().message.find("at least three ISL/OSL pairs") != std::string::npos);
}
