// Load client for the serve benchmarks: C concurrent clients, each looping streamed chat
// completions (optionally as one agent session per client whose conversation grows every turn)
// for a fixed time; prints TTFT percentiles (the first content token), the first streamed chunk's
// (servers send a role chunk with the response headers, before any engine step: the latency of
// the path itself), throughput and errors as one JSON line.
// Usage: serve_load URL CONCURRENCY SECONDS [--sessions] [--max-tokens N] [--unique-sessions N]
//   [--think-ms MS]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "dyn/base/json.h"

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
double pct(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = (v.size() - 1) * q / 100.0;
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}
constexpr std::string_view kContent = "\"content\":\"";
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: serve_load URL CONCURRENCY SECONDS [--sessions] [--max-tokens N] [--unique-sessions N] "
                 "[--think-ms MS]\n");
    return 2;
  }
  std::string url = argv[1];
  int conc = std::atoi(argv[2]);
  double secs = std::atof(argv[3]);
  bool sessions = false;
  int max_tokens = 16;
  uint64_t unique = 0;
  double think_ms = 0;
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--sessions") sessions = true;
    else if (a == "--max-tokens" && has_value) max_tokens = std::atoi(argv[++i]);
    else if (a == "--unique-sessions" && has_value) unique = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--think-ms" && has_value) think_ms = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "serve_load: unknown argument, or one without its value: '%s'\n", a.c_str());
      return 2;
    }
  }
  // --think-ms MS: each client waits MS after every turn, as an agent runs its tools between
  // turns, so the offered load is set by the clients and is the same on every path measured
  // (TTFT then compares the paths, not how deep each one drove the engine's queue). Clients
  // start spread over one think time instead of all at once.
  // --unique-sessions N: every request opens a new session (x-session-id uniq-K, K = 0..N-1) and
  // the run ends after N requests (or SECONDS); 503 answers (binding table full) are counted
  // apart from errors.
  std::atomic<uint64_t> next_unique{0}, rejected_503{0};
  std::mutex mu;
  std::vector<double> ttfts, firsts, totals;
  std::atomic<uint64_t> ok{0}, errors{0}, chunks_total{0};
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < conc; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client cli(url);
      cli.set_keep_alive(true);
      // cpp-httplib writes a request's headers and body in two sends; with Nagle on, the body
      // waits for the server's delayed ACK (40 ms on Linux), which was most of every TTFT this
      // measured. The clients agents use (aiohttp/httpx on asyncio, Node's http) set TCP_NODELAY.
      cli.set_tcp_nodelay(true);
      cli.set_read_timeout(std::chrono::seconds(60));
      cli.set_connection_timeout(std::chrono::seconds(10));
      dyn::Json messages = dyn::Json::array();
      messages.push_back({{"role", "system"},
                          {"content", "You are a benchmark assistant. Be brief and exact in every answer you give."}});
      int turn = 0;
      std::vector<double> my_ttft, my_first, my_total;
      auto think = [&](double ms) {
        auto until = std::min(deadline, Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
        std::this_thread::sleep_until(until);
      };
      if (think_ms > 0) think(think_ms * c / conc);
      while (Clock::now() < deadline) {
        uint64_t uk = 0;
        if (unique) {
          uk = next_unique.fetch_add(1);
          if (uk >= unique) break;
        }
        ++turn;
        messages.push_back({{"role", "user"},
                            {"content", "client " + std::to_string(c) + " turn " + std::to_string(turn) +
                                            " asks a question about caching and routing"}});
        dyn::Json body = {
            {"model", "mock-model"}, {"stream", true}, {"max_tokens", max_tokens}, {"messages", messages}};
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/chat/completions";
        req.headers.emplace("Content-Type", "application/json");
        if (unique) {
          req.headers.emplace("x-session-id", "uniq-" + std::to_string(uk));
        } else if (sessions) {
          req.headers.emplace("x-session-id", "bench-session-" + std::to_string(c));
        }
        req.body = body.dump();
        auto t0 = Clock::now();
        double ttft = -1, first = -1;
        uint64_t chunks = 0;
        std::string tail;
        req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
          std::string_view s(d, n);
          if (first < 0 && n > 0) first = ms_since(t0);
          // TTFT is the first token: a non-empty content delta, not the role chunk
          // ({"role":"assistant","content":""}) that servers send with the response headers.
          for (size_t p = s.find(kContent); p != std::string_view::npos; p = s.find(kContent, p + 1)) {
            ++chunks;
            const size_t v = p + kContent.size();
            if (ttft < 0 && v < s.size() && s[v] != '"') ttft = ms_since(t0);
          }
          tail.assign(s.substr(s.size() > 32 ? s.size() - 32 : 0));
          return true;
        };
        httplib::Response res;
        httplib::Error err;
        bool sent = cli.send(req, res, err);
        if (!sent && res.status == -1 && tail.empty()) {
          // A keep-alive connection the server closed just now (httplib servers close after
          // their keep-alive count): resend once on a fresh connection, as HTTP clients do.
          t0 = Clock::now();
          res = httplib::Response();
          sent = cli.send(req, res, err);
        }
        double total = ms_since(t0);
        if (unique && sent && res.status == 503) {
          rejected_503++;
          messages.erase(messages.end() - 1);
          continue;
        }
        if (!sent || res.status != 200 || tail.find("[DONE]") == std::string::npos || ttft < 0) {
          errors++;
          if (errors.load() <= 3)
            std::fprintf(stderr, "error: %s status %d\n", httplib::to_string(err).c_str(), res.status);
          messages.erase(messages.end() - 1);
          continue;
        }
        ok++;
        chunks_total += chunks;
        my_ttft.push_back(ttft);
        my_first.push_back(first);
        my_total.push_back(total);
        if (sessions) {
          messages.push_back({{"role", "assistant"},
                              {"content", "an answer of about sixteen tokens for turn " + std::to_string(turn)}});
          if (messages.size() > 41) messages.erase(messages.begin() + 1, messages.begin() + 3);  // bounded history
        } else {
          messages.erase(messages.end() - 1);
        }
        if (think_ms > 0) think(think_ms);
      }
      std::lock_guard<std::mutex> lk(mu);
      ttfts.insert(ttfts.end(), my_ttft.begin(), my_ttft.end());
      firsts.insert(firsts.end(), my_first.begin(), my_first.end());
      totals.insert(totals.end(), my_total.begin(), my_total.end());
    });
  }
  for (auto& t : threads) t.join();
  double wall = ms_since(start) / 1000.0;
  dyn::Json out = {{"concurrency", conc},
                   {"seconds", wall},
                   {"requests_ok", ok.load()},
                   {"errors", errors.load()},
                   {"rejected_503", rejected_503.load()},
                   {"requests_per_s", ok.load() / wall},
                   {"chunks_per_s", chunks_total.load() / wall},
                   {"ttft_p50_ms", pct(ttfts, 50)},
                   {"ttft_p90_ms", pct(ttfts, 90)},
                   {"ttft_p99_ms", pct(ttfts, 99)},
                   {"first_chunk_p50_ms", pct(firsts, 50)},
                   {"first_chunk_p99_ms", pct(firsts, 99)},
                   {"total_p50_ms", pct(totals, 50)}};
  std::printf("%s\n", out.dump().c_str());
  return errors.load() == 0 ? 0 : 1;
}
