// Closed loops through the simulator, and their figures as linear functions of the step model.
#include "dyn/fidelity/loop.h"

#include <vector>

#include "dyn/engine/engine.h"
#include "dyn/io/output.h"
#include "dyn/replay/sim.h"
#include "dyn/records/workload.h"

namespace dyn::fidelity {

LoopFigures simulate_point(const LoadPoint& p, const engine::EngineConfig& engine) {
  records::Workload wl;
  const uint64_t n = kRequestsPerClient * p.concurrency;
  wl.rows.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    records::WorkloadRow& r = wl.rows[i];
    r.where = p.where;
    r.index = i;
    r.input_length = p.isl;
    r.output_length = p.osl;
  }
  replay::SimOptions so;
  so.workers = 1;
  so.engine = engine;
  so.router.block_size = engine.block_size;
  so.schedule.mode = replay::LoadMode::kConcurrency;
  so.concurrency = p.concurrency;
  so.client_latency_ms = kClientLatencyMs;
  so.write_rows = false;
  LoopFigures f;
  double ttft = 0, tpot = 0;
  so.on_request = [&](const replay::SimRequest& r) {
    ++f.requests;
    if (r.error || r.first_ms < 0 || r.output_tokens < 2) {
      ++f.errors;
      return;
    }
    ttft += r.first_ms - r.start_ms;
    tpot += (r.end_ms - r.first_ms) / static_cast<double>(r.output_tokens - 1);
  };
  io::Output sink("/dev/null");
  replay::run_sim(wl, so, sink);
  const uint64_t ok = f.requests - f.errors;
  if (ok) {
    f.ttft_ms = ttft / static_cast<double>(ok);
    f.tpot_ms = tpot / static_cast<double>(ok);
    f.tps_gpu = 1000.0 * static_cast<double>(p.concurrency) / f.tpot_ms / static_cast<double>(p.gpus ? p.gpus : 1);
  }
  return f;
}

namespace {

using Vec = std::array<double, kCoefficients>;

// A point on the virtual clock: features summed over the steps so far (times the coefficients
// gives ms) plus a constant (client latencies while the engine was idle).
struct Stamp {
  Vec x{};
  double c = 0;
};

}  // namespace

LinearLoop linear_loop(const LoadPoint& p, const engine::EngineConfig& cfg) {
  engine::EngineConfig ec = cfg;
  ec.profile = nullptr;
  ec.speedup_ratio = 1;
  ec.kv_events = false;
  engine::Engine eng(ec);
  LinearLoop out;
  const uint64_t n = kRequestsPerClient * p.concurrency;
  struct Req {
    Stamp start, first;
  };
  std::vector<Req> reqs(n);
  Stamp now;
  uint64_t sent = 0, done = 0;
  auto add = [&](const Stamp& at) {
    engine::RequestSpec s;
    s.id = sent;
    s.prompt_tokens = p.isl;
    s.max_output_tokens = p.osl;
    reqs[sent].start = at;
    ++sent;
    return static_cast<bool>(eng.add(std::move(s)));
  };
  // The first wave: the first request starts the idle engine, the others reach it kClientLatencyMs
  // later, during that first step (as simulate_point's concurrency mode).
  if (!add(now)) return out.ok = false, out;
  // Requests sent at the end of the last step: they reach the engine kClientLatencyMs later,
  // while the next step runs (or, the engine idle, they start it).
  std::vector<Stamp> due(std::min(p.concurrency, n) - 1, now);
  engine::StepResult step;
  Vec ttft{}, tpot{};
  double ttft_c = 0, tpot_c = 0;
  while (eng.has_work() || !due.empty()) {
    if (!eng.has_work()) {
      now.c += kClientLatencyMs;
      for (Stamp& at : due) {
        at.c += kClientLatencyMs;
        if (!add(at)) return out.ok = false, out;
      }
      due.clear();
    }
    eng.step(step);
    const auto f = engine::StepCoefficients::features(step.shape);
    for (size_t i = 0; i < kCoefficients; ++i) now.x[i] += f[i];
    for (Stamp& at : due) {  // arrived during this step: they join the next one
      at.c += kClientLatencyMs;
      if (!add(at)) return out.ok = false, out;
    }
    due.clear();
    for (const engine::TokenOutput& o : step.outputs) {
      Req& r = reqs[o.id];
      if (o.generated == 1) r.first = now;
      if (!o.finished) continue;
      ++done;
      for (size_t i = 0; i < kCoefficients; ++i) {
        ttft[i] += r.first.x[i] - r.start.x[i];
        tpot[i] += (now.x[i] - r.first.x[i]) / static_cast<double>(p.osl - 1);
      }
      ttft_c += r.first.c - r.start.c;
      tpot_c += (now.c - r.first.c) / static_cast<double>(p.osl - 1);
      if (sent + due.size() < n) due.push_back(now);
    }
  }
  const double d = static_cast<double>(done);
  for (size_t i = 0; i < kCoefficients; ++i) {
    out.ttft[i] = ttft[i] / d;
    out.tpot[i] = tpot[i] / d;
  }
  out.ttft_offset = ttft_c / d;
  out.tpot_offset = tpot_c / d;
  return out;
}

}  // namespace dyn::fidelity
