// Load client for the serve benchmarks: C concurrent clients, each looping streamed chat
// completions (optionally as one agent session per client whose conversation grows every turn)
// for a fixed time; prints TTFT percentiles (the first content token), the first streamed chunk's
// (servers send a role chunk with the response headers, before any engine step: the latency of
// the path itself), throughput and errors as one JSON line.
// Usage: serve_load URL CONCURRENCY SECONDS [--sessions] [--max-tokens N] [--unique-sessions N]
//   [--think-ms MS] [--agent-prompts FROM_TOKENS TO_TOKENS TURNS]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <cstring>
#include <unistd.h>
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

/// --agent-prompts: the sizes of an agent session's turns (SPEC 4.2 tokens, 4 bytes each).
struct AgentPrompts {
  uint64_t from_tokens = 0, to_tokens = 0, turns = 0;  // turns 0 = the mode is off
};

/// One client's agent sessions: each turn's prompt is the previous turn's (its reply included)
/// plus a new user message sized so the prompt grows evenly from from_tokens to to_tokens over
/// `turns` turns; then a new session starts. Text is words from a per-session random stream, so
/// sessions share no prefix and a session's turns share all of theirs.
class AgentSession {
 public:
  AgentSession(const AgentPrompts& p, int client) : p_(p), client_(client), turn_(client % p.turns) {}
  /// The next turn's body and x-session-id.
  std::pair<std::string, std::string> next(int max_tokens) {
    if (turn_ == p_.turns) {
      turn_ = 0;
      ++session_;
      msgs_.clear();
      rendered_ = 0;
    }
    if (msgs_.empty()) rng_ = 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(client_) * 1000003 + session_ + 1);
    const uint64_t target =
        p_.turns == 1 ? p_.from_tokens : p_.from_tokens + (p_.to_tokens - p_.from_tokens) * turn_ / (p_.turns - 1);
    const uint64_t want = target * 4 > rendered_ + 6 ? target * 4 - rendered_ - 6 : 16;  // "user\n" ... "\n"
    undo_ = msgs_.size();
    undo_rendered_ = rendered_;
    append_message("user", words(want));
    std::string body = R"({"model":"mock-model","stream":true,"max_tokens":)" + std::to_string(max_tokens) +
                       R"(,"messages":[)" + msgs_ + "]}";
    return {std::move(body),
            "agent-" + std::to_string(::getpid()) + "-" + std::to_string(client_) + "-" + std::to_string(session_)};
  }
  /// The turn was answered: the reply joins the conversation.
  void answered() {
    append_message("assistant", "an answer of about sixteen tokens for turn " + std::to_string(turn_));
    ++turn_;
  }
  /// The turn failed: its message is dropped and the turn is sent again.
  void failed() {
    msgs_.resize(undo_);
    rendered_ = undo_rendered_;
  }

 private:
  void append_message(const char* role, const std::string& text) {
    if (!msgs_.empty()) msgs_ += ',';
    msgs_ += R"({"role":")";
    msgs_ += role;
    msgs_ += R"(","content":")";
    msgs_ += text;  // letters and spaces only: no JSON escaping needed
    msgs_ += "\"}";
    rendered_ += std::strlen(role) + text.size() + 2;
  }
  std::string words(uint64_t bytes) {
    static constexpr std::string_view kWords[] = {"the ",    "cache ", "router ", "block ", "agent ",  "session ",
                                                  "token ",  "of ",    "and ",    "tool ",  "result ", "file ",
                                                  "prefix ", "hash ",  "worker ", "turn "};
    std::string out;
    out.reserve(bytes + 8);
    while (out.size() < bytes) {
      rng_ ^= rng_ << 13;
      rng_ ^= rng_ >> 7;
      rng_ ^= rng_ << 17;
      out += kWords[rng_ & 15];
    }
    out.resize(bytes);
    return out;
  }
  AgentPrompts p_;
  int client_;
  uint64_t turn_, session_ = 0, rng_ = 0, rendered_ = 0, undo_ = 0, undo_rendered_ = 0;
  std::string msgs_;
};
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: serve_load URL CONCURRENCY SECONDS [--sessions] [--max-tokens N] [--unique-sessions N] "
                 "[--think-ms MS] [--agent-prompts FROM_TOKENS TO_TOKENS TURNS]\n");
    return 2;
  }
  std::string url = argv[1];
  int conc = std::atoi(argv[2]);
  double secs = std::atof(argv[3]);
  bool sessions = false;
  int max_tokens = 16;
  uint64_t unique = 0;
  double think_ms = 0;
  AgentPrompts agent;
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--sessions") sessions = true;
    else if (a == "--max-tokens" && has_value) max_tokens = std::atoi(argv[++i]);
    else if (a == "--unique-sessions" && has_value) unique = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--think-ms" && has_value) think_ms = std::atof(argv[++i]);
    else if (a == "--agent-prompts" && i + 3 < argc) {
      agent.from_tokens = std::strtoull(argv[++i], nullptr, 10);
      agent.to_tokens = std::strtoull(argv[++i], nullptr, 10);
      agent.turns = std::strtoull(argv[++i], nullptr, 10);
      if (agent.turns < 1 || agent.from_tokens < 1 || agent.to_tokens < agent.from_tokens) {
        std::fprintf(stderr, "serve_load: --agent-prompts needs 1 <= FROM_TOKENS <= TO_TOKENS and TURNS >= 1\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "serve_load: unknown argument, or one without its value: '%s'\n", a.c_str());
      return 2;
    }
  }
  // --think-ms MS: each client waits MS after every turn, as an agent runs its tools between
  // turns, so the offered load is set by the clients and is the same on every path measured
  // (TTFT then compares the paths, not how deep each one drove the engine's queue). Clients
  // start spread over one think time instead of all at once.
  // --agent-prompts FROM TO TURNS: each client runs agent sessions (AgentSession) whose prompt
  // grows from FROM to TO tokens over TURNS turns (x-session-id agent-PID-CLIENT-K); client c
  // starts at turn c % TURNS, so many clients send every size from the first second on.
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
      std::optional<AgentSession> agent_session;
      if (agent.turns) agent_session.emplace(agent, c);
      if (think_ms > 0) think(think_ms * c / conc);
      while (Clock::now() < deadline) {
        uint64_t uk = 0;
        if (unique) {
          uk = next_unique.fetch_add(1);
          if (uk >= unique) break;
        }
        ++turn;
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/chat/completions";
        req.headers.emplace("Content-Type", "application/json");
        if (agent_session) {
          std::string sid;
          std::tie(req.body, sid) = agent_session->next(max_tokens);
          req.headers.emplace("x-session-id", sid);
        } else {
          messages.push_back({{"role", "user"},
                              {"content", "client " + std::to_string(c) + " turn " + std::to_string(turn) +
                                              " asks a question about caching and routing"}});
          dyn::Json body = {
              {"model", "mock-model"}, {"stream", true}, {"max_tokens", max_tokens}, {"messages", messages}};
          if (unique) {
            req.headers.emplace("x-session-id", "uniq-" + std::to_string(uk));
          } else if (sessions) {
            req.headers.emplace("x-session-id", "bench-session-" + std::to_string(c));
          }
          req.body = body.dump();
        }
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
          if (agent_session) agent_session->failed();
          else messages.erase(messages.end() - 1);
          continue;
        }
        if (!sent || res.status != 200 || tail.find("[DONE]") == std::string::npos || ttft < 0) {
          errors++;
          if (errors.load() <= 3)
            std::fprintf(stderr, "error: %s status %d\n", httplib::to_string(err).c_str(), res.status);
          if (agent_session) agent_session->failed();
          else messages.erase(messages.end() - 1);
          continue;
        }
        ok++;
        chunks_total += chunks;
        my_ttft.push_back(ttft);
        my_first.push_back(first);
        my_total.push_back(total);
        if (agent_session) {
          agent_session->answered();
        } else if (sessions) {
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
