// Routing core speed without JSON: decisions per second over pre-parsed Mooncake rows (kv mode,
// 8 workers, affinity on with 300 s TTL), with the same load accounting and end estimates as
// dyn-route decide. Rows with a session_id (a sessionized trace) are placed under their session
// (parent session too), so the binding table is exercised; the figure is the median of the
// passes, not the best. With a 4th argument it writes the worker chosen for each row (first
// pass, one number a line) to that file, so bench/route-decide.sh can check that decide makes
// the same choices.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <queue>
#include <tuple>

#include "dyn/base/clock.h"
#include "dyn/offline/offline.h"
#include "dyn/route/router.h"
#include "dyn/tokens/hash.h"
#include "dyn/records/workload.h"

using namespace dyn;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: route_core_bench TRACE.jsonl [passes] [workers] [CHOICES_OUT]\n");
    return 2;
  }
  int passes = std::max(1, argc > 2 ? std::atoi(argv[2]) : 5);
  uint32_t workers = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 8;
  records::WorkloadOptions wo;
  wo.block_size = records::kMooncakeBlockSize;
  auto wl = records::load_workload({argv[1]}, wo);
  struct Row {
    double t;
    uint64_t tokens, out;
    std::vector<uint64_t> seq;
    std::string session, parent;
  };
  std::vector<Row> rows;
  uint64_t blocks = 0;
  for (auto& r : wl.rows) {
    rows.push_back(Row{r.timestamp_ms.value_or(0), r.input_length, r.output_length.value_or(0),
                       tokens::sequence_from_ids(r.hash_ids, wl.block_size, false, r.input_length, wl.block_size),
                       r.session_id, r.parent_session_id == r.session_id ? std::string() : r.parent_session_id});
    blocks += rows.back().seq.size();
  }
  route::RouterConfig cfg;
  cfg.mode = route::Mode::kKv;
  cfg.block_size = wl.block_size;  // router blocks = the trace's blocks
  cfg.affinity_ttl_secs = 300;
  offline::EndModel em;
  // decide's end estimate: the engine model at the worker's utilisation on arrival.
  const double kv_tokens = static_cast<double>(em.kv_blocks) * em.block_size;
  std::FILE* choices = argc > 4 ? std::fopen(argv[4], "w") : nullptr;
  if (argc > 4 && !choices) {
    std::perror(argv[4]);
    return 4;
  }
  std::vector<double> rates, cpu_rates;  // per second of wall time, per second of this process's CPU
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  uint64_t hits = 0, sessions = 0, bound = 0;
  for (int p = 0; p < passes; ++p) {
    FakeClock clk;
    route::Router router(cfg, clk);
    for (uint32_t w = 0; w < workers; ++w) router.add_worker(route::WorkerSpec{w, 0, 0});
    std::vector<route::Placement> live(rows.size());
    std::vector<uint64_t> active(workers, 0);
    // (time, kind, row): decide's event order; at equal times a first token (kind 0) before an end.
    using Ev = std::tuple<double, int, size_t>;
    std::priority_queue<Ev, std::vector<Ev>, std::greater<>> ends;
    hits = 0;
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      while (!ends.empty() && std::get<0>(ends.top()) <= r.t) {
        const auto [t, kind, e] = ends.top();
        ends.pop();
        clk.set(t);
        if (kind == 0) {
          live[e].first_token();
          continue;
        }
        live[e].finish();
        active[live[e].worker()] -= rows[e].tokens;
      }
      clk.set(r.t);
      route::RouteRequest q;
      q.sequence_hashes = r.seq;
      q.tokens = r.tokens;
      q.session_id = r.session;
      q.parent_session_id = r.parent;
      q.wait_for_initializing = false;
      auto pl = router.place(q);
      pl->commit();
      if (p == 0 && !r.session.empty()) ++sessions, bound += pl->binding() == route::BindingOutcome::kHit;
      hits += pl->cached_tokens();
      const auto w = static_cast<uint32_t>(pl->worker());
      const double u = static_cast<double>(active[w] + r.tokens) / kv_tokens;
      const uint64_t uncached = r.tokens - pl->cached_tokens();
      const double end = r.t + em.duration_ms(r.tokens, uncached, r.out, u);
      ends.emplace(std::min(end, r.t + em.duration_ms(r.tokens, uncached, 0, u)), 0, i);
      ends.emplace(end, 1, i);
      active[w] += r.tokens;
      if (p == 0 && choices) std::fprintf(choices, "%u\n", w);
      live[i] = std::move(*pl);
    }
    auto t1 = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(t1 - t0).count();
    rates.push_back(static_cast<double>(rows.size()) / s);
    cpu_rates.push_back(static_cast<double>(rows.size()) / (cpu_now() - c0));
  }
  if (choices) std::fclose(choices);
  auto median_of = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  const double median = median_of(rates), cpu_median = median_of(cpu_rates);
  std::printf("rows %zu, mean blocks/row %.1f, workers %u, passes %d\n", rows.size(),
              static_cast<double>(blocks) / static_cast<double>(rows.size()), workers, passes);
  std::printf("predicted cached tokens %llu; rows with a session %llu, of which affinity hits %llu\n",
              static_cast<unsigned long long>(hits), static_cast<unsigned long long>(sessions),
              static_cast<unsigned long long>(bound));
  std::printf("decisions/s %.0f (median of %d passes; slowest %.0f, fastest %.0f; goal >= 500000)\n", median, passes,
              rates.front(), rates.back());
  // Per CPU-second: what a loaded machine's preemption does not change (bench/route-decide.sh).
  std::printf("decisions per CPU-second %.0f (median of %d passes)\n", cpu_median, passes);
  return 0;
}
