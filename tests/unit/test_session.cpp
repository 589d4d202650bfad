// Unit tests for lib/dyn/session: SPEC 1 header normalization, cases 14, 16, 21, the captured
// Claude Code / Codex / OpenCode requests, and the family table's writers (round trip).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "dyn/session/families.h"
#include "dyn/session/normalize.h"

using namespace dyn;
using namespace dyn::session;

namespace {
std::string repo(const std::string& rel) { return std::string(DYN_SOURCE_DIR) + "/" + rel; }

std::vector<Json> read_jsonl(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  std::vector<Json> rows;
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) rows.push_back(Json::parse(line));
  return rows;
}

Identity norm(const HeaderList& h, NormalizeOptions o = {}) {
  auto r = normalize(h, o);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return *r;
}
std::string sid(const Identity& i) { return i.context ? i.context->session_id : "<none>"; }
std::string pid(const Identity& i) { return i.context ? i.context->parent_session_id : "<none>"; }

HeaderList write(std::string_view style, const Lineage& id) {
  const ClientStyle* s = find_client_style(style);
  REQUIRE(s != nullptr);
  return write_headers(*s, id);
}
std::string header(const HeaderList& h, const std::string& name) {
  for (const auto& [k, v] : h)
    if (k == name) return v;
  return "<absent>";
}
}  // namespace

TEST_CASE("case 14: Codex header spellings, precedence over Codex by Claude and Dynamo, aliases off and on") {
  std::ifstream f(repo("tests/fixtures/cases/14-codex-header-spellings/headers.json"));
  Json sets = Json::parse(f);
  const std::string thread = "019e0000-0000-7000-8000-0000000000a1";
  // Aliases off (the default, as Dynamo): the underscore thread_id and a bare session-id are not
  // identities. On: both are, the thread id first.
  std::map<std::string, std::pair<std::string, std::string>> want = {
      {"a-hyphen", {thread, thread}},
      {"b-underscore", {"<none>", thread}},
      {"c-capitalised", {thread, thread}},
      {"d-session-only", {"<none>", thread}},
      {"e-with-claude", {"5b0c7a7e-0000-4000-8000-000000000001", "5b0c7a7e-0000-4000-8000-000000000001"}},
      {"f-with-dynamo", {"custom-run-1", "custom-run-1"}}};
  REQUIRE(sets.size() == want.size());
  for (auto it = sets.begin(); it != sets.end(); ++it) {
    CAPTURE(it.key());
    auto h = headers_from_json(it.value());
    REQUIRE(h.ok());
    CHECK(sid(norm(*h)) == want.at(it.key()).first);
    Identity on = norm(*h, NormalizeOptions{.aliases = true});
    CHECK(sid(on) == want.at(it.key()).second);
    CHECK((pid(on) == "" || pid(on) == "<none>"));
  }
  // With aliases, the underscore form is the thread id even when session_id differs (thread id first).
  Identity u = norm({{"session_id", "root"}, {"thread_id", "child"}}, NormalizeOptions{.aliases = true});
  CHECK(sid(u) == "child");
  CHECK(u.source == Source::kCodex);
  // Without, headers of those names are not identity headers at all: duplicates do not conflict.
  CHECK_FALSE(norm({{"session_id", "a"}, {"session_id", "b"}}).context);
  CHECK_FALSE(normalize({{"session_id", "a"}, {"session_id", "b"}}, NormalizeOptions{.aliases = true}).ok());
  CHECK(describe_families().find("(with --session-header-aliases, else thread_id, else session-id, else session_id)") !=
        std::string::npos);
}

TEST_CASE("Dynamo's trajectory-era headers and agent_context read as the session era") {
  Identity t = norm({{"X-Dynamo-Trajectory-Id", "research:planner"},
                     {"x-dynamo-parent-trajectory-id", "research:root"},
                     {"x-dynamo-trajectory-final", "yes"}});
  CHECK(t.source == Source::kDynamoTrajectory);
  CHECK(sid(t) == "research:planner");
  CHECK(pid(t) == "research:root");
  CHECK(t.context->session_final == true);
  // The session-era header wins; either wins over agent-native headers.
  CHECK(sid(norm({{"x-dynamo-trajectory-id", "old"}, {"x-dynamo-session-id", "new"}})) == "new");
  CHECK(sid(norm({{"x-claude-code-session-id", "cc"}, {"x-dynamo-trajectory-id", "t"}})) == "t");
  // A trajectory-era agent_context: trajectory_id is the agent's session; that era's session_id
  // named the run; parent_trajectory_id is the parent and trajectory_final the final flag.
  auto b = AgentContext::from_json(Json::parse(
      R"({"session_type_id":"swe","session_id":"run-7","trajectory_id":"run-7:sub","parent_trajectory_id":"run-7:main","trajectory_final":true})"));
  REQUIRE(b);
  CHECK(b->session_id == "run-7:sub");
  CHECK(b->parent_session_id == "run-7:main");
  CHECK(b->session_final == true);
  auto c = AgentContext::from_json(Json::parse(R"({"trajectory_id":"t1"})"));
  REQUIRE(c);
  CHECK(c->to_json().dump() == R"({"session_id":"t1"})");
  auto d = AgentContext::from_json(Json::parse(R"({"session_id":"s","parent_session_id":"p"})"));
  CHECK(d->parent_session_id == "p");
  CHECK_FALSE(AgentContext::from_json(Json::parse(R"({"parent_trajectory_id":"p"})")));
}

TEST_CASE("case 16: nested Claude Code subagents use the immediate parent") {
  auto rows = read_jsonl(repo("tests/fixtures/cases/16-claude-nested-subagent/requests.jsonl"));
  std::map<std::string, std::pair<std::string, std::string>> want = {
      {"root", {"5b0c7a7e-0000-4000-8000-000000000001", ""}},
      {"child-A", {"agent-aaaa1111", "5b0c7a7e-0000-4000-8000-000000000001"}},
      {"grandchild-B", {"agent-bbbb2222", "agent-aaaa1111"}},
      {"root-with-stray-parent", {"5b0c7a7e-0000-4000-8000-000000000001", ""}},
      {"dynamo-override", {"d-1", ""}}};
  REQUIRE(rows.size() == 5);
  for (auto& r : rows) {
    std::string name = r["name"];
    CAPTURE(name);
    Identity id = norm(*headers_from_json(r["headers"]));
    CHECK(sid(id) == want.at(name).first);
    CHECK(pid(id) == want.at(name).second);
  }
}

TEST_CASE("case 21: lower-case Dynamo headers from a raw HTTP request") {
  std::ifstream f(repo("tests/fixtures/cases/21-dynamo-header-lowercase/request.http"));
  std::string line;
  std::getline(f, line);  // request line
  HeaderList h;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;
    auto colon = line.find(':');
    REQUIRE(colon != std::string::npos);
    h.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
  Identity id = norm(h);
  CHECK(id.source == Source::kDynamo);
  CHECK(sid(id) == "research-run-42:researcher");
  CHECK(pid(id) == "research-run-42:planner");
  CHECK(id.context->to_json().dump() ==
        R"({"session_id":"research-run-42:researcher","parent_session_id":"research-run-42:planner"})");
}

// Every captured request must normalize to the agent and parent that its capture describes. The
// expectation is built from the body-derived `role`/`agent_depth` (independent of the headers):
// depth 0 = the run's root session without parent; depth d > 0 = its own session, whose parent is
// a session seen at depth d-1 in the same run; a probe has no identity.
TEST_CASE("captured Claude Code, Codex and OpenCode requests") {
  for (const char* file : {"claude-code-2.1.197.jsonl", "codex-0.171.0.jsonl", "opencode-1.18.33.jsonl"}) {
    CAPTURE(file);
    auto rows = read_jsonl(repo(std::string("data/agent-headers/captured/") + file));
    REQUIRE(rows.size() >= 13);
    std::map<std::string, std::map<int, std::set<std::string>>> by_depth;  // run -> depth -> sessions
    std::vector<std::tuple<std::string, int, std::string, std::string>> seen;
    for (auto& r : rows) {
      auto h = headers_from_json(r["headers"]);
      REQUIRE(h.ok());
      Identity id = norm(*h);
      std::string run = r["run"];
      if (r["agent_depth"].is_null()) {
        CHECK_MESSAGE(!id.context, run << " probe has no identity");
        continue;
      }
      REQUIRE_MESSAGE(id.context, run << " seq " << r["seq_in_run"].dump());
      int depth = r["agent_depth"];
      CHECK((r["role"] == "root") == (depth == 0));
      by_depth[run][depth].insert(id.context->session_id);
      seen.emplace_back(run, depth, id.context->session_id, id.context->parent_session_id);
    }
    for (auto& [run, depth, s, p] : seen) {
      CAPTURE(run);
      CAPTURE(depth);
      if (depth == 0) {
        CHECK(p.empty());
        CHECK(by_depth[run][0].size() == 1);  // one root session per run (title requests included)
      } else {
        CHECK(!p.empty());
        CHECK(by_depth[run][depth - 1].count(p) == 1);  // the immediate parent
        CHECK(by_depth[run][depth - 1].count(s) == 0);  // a child is its own session
      }
    }
  }
}

TEST_CASE("SPEC 1.1 rules: trimming, blank, case, parent equal, limit, duplicates") {
  CHECK(sid(norm({{"X-Session-ID", "  abc \t"}})) == "abc");
  CHECK(sid(norm({{"x-dynamo-session-id", "   "}, {"x-session-id", "g"}})) == "g");  // blank = absent
  CHECK(pid(norm({{"x-session-id", "a"}, {"x-parent-session-id", "a"}})) == "");     // parent == session dropped
  CHECK(!norm({{"x-session-affinity", "ses_1"}}).context);                           // a hint, not an identity
  CHECK(norm({{"x-session-affinity", "ses_1"}}).affinity_hint == "ses_1");
  CHECK(!norm({{"x-dynamo-parent-session-id", "p"}}).context);  // parent alone: no identity
  CHECK(!norm({{"x-claude-code-parent-agent-id", "p"}}).context);

  std::string s256(256, 'a'), s257(257, 'a');
  CHECK(sid(norm({{"x-session-id", s256}})) == s256);
  auto too_long = normalize({{"x-session-id", s257}});
  REQUIRE(!too_long.ok());
  CHECK(too_long.error().exit_code == 400);
  CHECK(too_long.error().message.find("256") != std::string::npos);

  CHECK(sid(norm({{"x-session-id", "a"}, {"X-Session-Id", "a"}})) == "a");  // identical duplicates
  auto conflict = normalize({{"x-session-id", "a"}, {"X-Session-Id", "b"}});
  REQUIRE(!conflict.ok());
  CHECK(conflict.error().exit_code == 400);
  CHECK(conflict.error().message.find("x-session-id") != std::string::npos);

  // Precedence: DeepSeek over OpenCode over generic; OpenCode hosted spelling and generic parent.
  CHECK(sid(norm({{"x-session-id", "g"}, {"x-deepseek-harness-session-id", "d"}})) == "d");
  Identity oc = norm({{"x-opencode-session", "ses_c"}, {"x-parent-session-id", "ses_p"}, {"x-session-id", "g"}});
  CHECK(oc.source == Source::kOpenCode);
  CHECK(sid(oc) == "ses_c");
  CHECK(pid(oc) == "ses_p");
}

TEST_CASE("session_final, compaction, worker target, priority, request id") {
  Identity f = norm({{"x-dynamo-session-id", "s"}, {"X-Dynamo-Session-Final", "YES"}});
  REQUIRE(f.context->session_final);
  CHECK(*f.context->session_final);
  CHECK(!normalize({{"x-dynamo-session-id", "s"}, {"x-dynamo-session-final", "maybe"}}).ok());

  Identity c = norm({{"thread-id", "t"},
                     {"x-codex-turn-metadata", R"({"request_kind":"compaction","compaction":{"reason":"auto"}})"}});
  REQUIRE(c.context->compaction);
  CHECK(c.context->compaction->dump() == R"({"reason":"auto"})");
  CHECK(c.context->to_json().dump() == R"({"session_id":"t","compaction":{"reason":"auto"}})");
  Identity c2 = norm({{"thread-id", "t"}, {"x-codex-turn-metadata", R"({"request_kind":"compaction"})"}});
  CHECK(c2.context->compaction->dump() == "{}");
  Identity c3 = norm({{"thread-id", "t"}, {"x-codex-turn-metadata", R"({"request_kind":"turn"})"}});
  CHECK(!c3.context->compaction);

  Identity w = norm({{"X-Worker-Instance-Id", "7"}, {"x-dynamo-request-priority", "-3"}, {"X-Request-ID", "r1"}});
  CHECK(w.worker_instance_id == 7u);
  CHECK(w.priority == -3);
  CHECK(w.x_request_id == "r1");
  CHECK(!normalize({{"x-dynamo-worker-instance-id", "w7"}}).ok());
  // Priority headers (SPEC 3.4, Dynamo extensions.rs): one that does not parse (or is out of
  // i32 / u32 range) is ignored, so the body's nvext.agent_hints value stands; not a 400.
  Identity p = norm({{"x-dynamo-request-priority", "high"},
                     {"x-dynamo-request-strict-priority", "2"},
                     {"x-dynamo-meta-policy-class", "interactive"}});
  CHECK(!p.priority);
  CHECK(p.strict_priority == 2u);
  CHECK(p.policy_class == "interactive");
  Identity big = norm({{"x-dynamo-request-priority", "2147483648"}, {"x-dynamo-request-strict-priority", "-1"}});
  CHECK(!big.priority);
  CHECK(!big.strict_priority);
  AgentContext ctx;
  ctx.session_id = "s";
  ctx.priority = -4;
  ctx.strict_priority = 1;
  CHECK(ctx.to_json().dump() == R"({"session_id":"s","priority":-4,"strict_priority":1})");
  auto back = AgentContext::from_json(ctx.to_json());
  REQUIRE(back);
  CHECK(back->priority == -4);
  CHECK(back->strict_priority == 1u);
  std::string row;
  append_agent_context(row, ctx);
  CHECK(row == ctx.to_json().dump());
}

TEST_CASE("control characters in identity values are rejected (fuzz_headers finding)") {
  // The minimized fuzz input (fuzz/seeds/headers/group-key-spoof): a session id that was a
  // subagent group key, so a client could share the binding of another parent's subagents.
  std::string spoof = "\x1fgroup:" + parent_group_key("victim").substr(7);
  auto r = normalize({{"x-session-id", " " + spoof}});
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 400);
  CHECK(r.error().message == "header 'x-session-id' contains a control character (0x1f)");
  // CR/LF inside a value (header injection), NUL, DEL: rejected; trailing CRLF is trimmed; tab kept.
  CHECK(!normalize({{"x-dynamo-session-id", "a\r\nx-injected: 1"}}).ok());
  CHECK(!normalize({{"x-request-id", std::string("r\0x", 3)}}).ok());
  CHECK(!normalize({{"x-session-affinity", "a\x7f"}}).ok());
  CHECK(sid(norm({{"x-session-id", "a\r\n"}})) == "a");
  CHECK(sid(norm({{"x-session-id", "a\tb"}})) == "a\tb");
  // Other headers are not looked at.
  CHECK(sid(norm({{"x-session-id", "a"}, {"user-agent", "x\x01"}})) == "a");
}

TEST_CASE("headers_from_json shapes and parent group keys") {
  CHECK(headers_from_json(Json::parse(R"({"a":"1","b":2})"))->size() == 2);
  CHECK(headers_from_json(Json::parse(R"([["a","1"],["a","2"]])"))->size() == 2);
  CHECK(headers_from_json(Json::parse(R"({"a":["1","2"]})"))->size() == 2);
  CHECK(!headers_from_json(Json::parse(R"("x")")).ok());
  CHECK(!headers_from_json(Json::parse(R"([["a"]])")).ok());
  std::string k = parent_group_key("p");
  CHECK(is_parent_group_key(k));
  CHECK(!is_parent_group_key("p"));
  CHECK(k == parent_group_key("p"));
  CHECK(k != parent_group_key("q"));
}

TEST_CASE("append_agent_context writes to_json().dump(), the one agent_context writer of rows") {
  AgentContext c;
  c.session_id = "s\t1";
  CHECK([&] {
    std::string s;
    append_agent_context(s, c);
    return s;
  }() == c.to_json().dump());
  c.parent_session_id = "p";
  c.session_final = false;
  c.compaction = Json{{"request_kind", "compaction"}, {"n", 1.0}};
  std::string s;
  append_agent_context(s, c);
  CHECK(s == c.to_json().dump());
  CHECK(
      s ==
      R"({"session_id":"s\t1","parent_session_id":"p","session_final":false,"compaction":{"request_kind":"compaction","n":1.0}})");
}

TEST_CASE("identity headers: each client style as the captured CLIs send it") {
  Lineage root{"R", "", "R", false};
  Lineage child{"C", "R", "R", false};
  Lineage grandchild{"G", "C", "R", true};
  // dynamo
  auto d = write("dynamo", grandchild);
  CHECK(header(d, "X-Dynamo-Session-ID") == "G");
  CHECK(header(d, "X-Dynamo-Parent-Session-ID") == "C");
  CHECK(header(d, "X-Dynamo-Session-Final") == "true");
  CHECK(header(write("dynamo", root), "X-Dynamo-Parent-Session-ID") == "<absent>");
  // claude: session header = root always; agent id on subagents; parent-agent only for nested.
  auto cr = write("claude", root);
  CHECK(cr.size() == 1);
  CHECK(header(cr, "X-Claude-Code-Session-Id") == "R");
  auto cc = write("claude", child);
  CHECK(header(cc, "X-Claude-Code-Session-Id") == "R");
  CHECK(header(cc, "x-claude-code-agent-id") == "C");
  CHECK(header(cc, "x-claude-code-parent-agent-id") == "<absent>");
  auto cg = write("claude", grandchild);
  CHECK(header(cg, "x-claude-code-agent-id") == "G");
  CHECK(header(cg, "x-claude-code-parent-agent-id") == "C");
  // codex: session-id root, thread-id own, parent thread for children, x-client-request-id = thread.
  auto xr = write("codex", root);
  CHECK(header(xr, "session-id") == "R");
  CHECK(header(xr, "thread-id") == "R");
  CHECK(header(xr, "x-codex-parent-thread-id") == "<absent>");
  auto xg = write("codex", grandchild);
  CHECK(header(xg, "session-id") == "R");
  CHECK(header(xg, "thread-id") == "G");
  CHECK(header(xg, "x-client-request-id") == "G");
  CHECK(header(xg, "x-codex-parent-thread-id") == "C");
  CHECK(header(xg, "x-openai-subagent") == "collab_spawn");
  // opencode (third-party provider): lower-case x-session-id + affinity, immediate parent.
  auto og = write("opencode", grandchild);
  CHECK(header(og, "x-session-id") == "G");
  CHECK(header(og, "x-session-affinity") == "G");
  CHECK(header(og, "x-parent-session-id") == "C");
  CHECK(write("none", grandchild).empty());
  CHECK(write("dynamo", Lineage{}).empty());
}

TEST_CASE("round trip: normalize(write(lineage)) gives the lineage back, for every client style and family") {
  const std::vector<Lineage> lineages = {
      {"R", "", "R", false},   // a root turn
      {"R", "", "R", true},    // its last turn
      {"C", "R", "R", false},  // a top-level subagent
      {"G", "C", "R", true},   // a nested subagent's last turn
      {"S", "", "", false},    // a root whose plan left the root empty
  };
  std::set<Source> produced;
  for (const ClientStyle& style : client_styles()) {
    CAPTURE(style.name);
    const bool has_final = [&] {
      for (const Family& f : families())
        if (f.source == style.produces) return !f.final_flag.empty();
      return false;
    }();
    for (const Lineage& id : lineages) {
      CAPTURE(id.session);
      Identity got = norm(write_headers(style, id));
      if (style.produces == Source::kNone) {
        CHECK_FALSE(got.context);
        continue;
      }
      produced.insert(style.produces);
      REQUIRE(got.context);
      CHECK(got.source == style.produces);
      CHECK(got.context->session_id == id.session);
      CHECK(got.context->parent_session_id == id.parent);
      CHECK(got.context->session_final == (has_final && id.final_turn ? std::optional<bool>(true) : std::nullopt));
    }
  }
  // Every family has a client style that writes it, so the round trip covers every row.
  for (const Family& f : families()) {
    CAPTURE(source_name(f.source));
    CHECK(produced.count(f.source) == 1);
  }
  CHECK(find_client_style("nope") == nullptr);
  CHECK(client_style_names().back() == "none");
}

TEST_CASE("the family table is what normalize reads: every spelling yields its family") {
  for (const Family& f : families()) {
    CAPTURE(source_name(f.source));
    for (auto n : f.session) {
      CAPTURE(n);
      Identity got = norm({{std::string(n), "s1"}});
      CHECK(got.source == f.source);
      CHECK(sid(got) == "s1");
      CHECK(pid(got) == "");
      for (auto p : f.parent) {
        if (!f.subagent.empty()) break;  // a root turn of a subagent family has no parent
        CHECK(pid(norm({{std::string(n), "s1"}, {std::string(p), "p1"}})) == "p1");
      }
    }
    for (auto n : f.session_aliases) {
      CAPTURE(n);
      CHECK_FALSE(norm({{std::string(n), "s1"}}).context);
      Identity got = norm({{std::string(n), "s1"}}, NormalizeOptions{.aliases = true});
      CHECK(got.source == f.source);
      CHECK(sid(got) == "s1");
    }
    for (auto n : f.subagent) {
      CAPTURE(n);
      Identity got = norm({{std::string(n), "a1"}, {std::string(f.session.at(0)), "root"}});
      CHECK(got.source == f.source);
      CHECK(sid(got) == "a1");
      CHECK(pid(got) == "root");
    }
  }
  // Each spelling is an identity header: a conflicting duplicate is rejected.
  for (auto n : identity_header_names()) {
    if (n == "x-request-id" || n == "x-session-affinity") continue;
    CAPTURE(n);
    auto r = normalize({{std::string(n), "1"}, {std::string(n), "2"}});
    CHECK_FALSE(r.ok());
  }
  CHECK(describe_families().find("1 dynamo: session x-dynamo-session-id") == 0);
}
