// SPEC 1.1's header families and the agent clients' header styles: the one table of spellings.
#include "dyn/session/families.h"

#include <algorithm>

namespace dyn::session {

const char* source_name(Source s) {
  switch (s) {
    case Source::kNone: return "none";
    case Source::kDynamo: return "dynamo";
    case Source::kDynamoTrajectory: return "dynamo-trajectory";
    case Source::kClaudeCode: return "claude-code";
    case Source::kCodex: return "codex";
    case Source::kDeepSeek: return "deepseek-harness";
    case Source::kOpenCode: return "opencode";
    case Source::kGeneric: return "generic";
  }
  return "none";
}

const std::vector<Family>& families() {
  // Precedence order is SPEC 1.1's row order: canonical Dynamo headers override every agent-native
  // one, and the Claude Code header wins over Codex headers.
  static const std::vector<Family> kFamilies = {
      {.source = Source::kDynamo,
       .session = {"x-dynamo-session-id"},
       .parent = {"x-dynamo-parent-session-id"},
       .final_flag = "x-dynamo-session-final"},
      // Dynamo's own headers before it renamed trajectories to sessions (ai-dynamo/dynamo#10896;
      // docs/agents/trajectory-ids.md): the same meaning under the older names. The Hermes and Pi
      // plugins still send them; a session header wins when both are sent.
      {.source = Source::kDynamoTrajectory,
       .session = {"x-dynamo-trajectory-id"},
       .parent = {"x-dynamo-parent-trajectory-id"},
       .final_flag = "x-dynamo-trajectory-final",
       .note = "Dynamo's trajectory-era names of the row above"},
      {.source = Source::kClaudeCode,
       .session = {"x-claude-code-session-id"},
       .subagent = {"x-claude-code-agent-id"},
       .parent = {"x-claude-code-parent-agent-id"},
       .note = "a root turn never has a parent"},
      {.source = Source::kCodex,
       // thread-id, as Dynamo reads it (lib/llm/src/protocols/agents.rs; the run-wide session-id
       // is deliberately not an identity there, ai-dynamo/dynamo#12331). With aliases: the older
       // thread_id, and only when no thread id is sent, session-id or session_id (the run's root
       // thread, as older Codex builds and older Dynamo docs use; other clients send a header of
       // that name for other things, e.g. a cache scope, so it is not read by default).
       .session = {"thread-id"},
       .session_aliases = {"thread_id", "session-id", "session_id"},
       .parent = {"x-codex-parent-thread-id"},
       .turn_metadata = "x-codex-turn-metadata",
       .note = "request_kind \"compaction\" in the turn metadata sets agent_context.compaction"},
      {.source = Source::kDeepSeek,
       .session = {"x-deepseek-harness-session-id"},
       .parent = {"x-deepseek-harness-parent-session-id"}},
      {.source = Source::kOpenCode,
       // x-opencode-session-id is named in Dynamo's docs; x-opencode-session is sent to
       // opencode-hosted providers. OpenCode 1.18.33 sends the generic parent header with its
       // own session header (data/agent-headers/captured/README.md).
       .session = {"x-opencode-session-id", "x-opencode-session"},
       .parent = {"x-opencode-parent-session-id", "x-parent-session-id"}},
      {.source = Source::kGeneric,
       .session = {"x-session-id"},
       .parent = {"x-parent-session-id"},
       .note = "OpenCode on third-party providers, AIPerf, custom clients"},
  };
  return kFamilies;
}

const std::vector<std::string_view>& identity_header_names(bool aliases) {
  static const auto kNames = [](bool with_aliases) {
    std::vector<std::string_view> v;
    auto add = [&](std::string_view n) {
      if (!n.empty() && std::find(v.begin(), v.end(), n) == v.end()) v.push_back(n);
    };
    for (const Family& f : families()) {
      for (auto n : f.session) add(n);
      if (with_aliases)
        for (auto n : f.session_aliases) add(n);
      for (auto n : f.subagent) add(n);
      for (auto n : f.parent) add(n);
      add(f.final_flag);
      add(f.turn_metadata);
    }
    for (auto n :
         {"x-dynamo-worker-instance-id", "x-worker-instance-id", "x-dynamo-request-priority",
          "x-dynamo-request-strict-priority", "x-dynamo-meta-policy-class", "x-request-id", "x-session-affinity"})
      add(n);
    return v;
  };
  static const std::vector<std::string_view> kWithout = kNames(false), kWith = kNames(true);
  return aliases ? kWith : kWithout;
}

const std::vector<ClientStyle>& client_styles() {
  static const std::vector<ClientStyle> kStyles = {
      {"dynamo",
       Source::kDynamo,
       {{"X-Dynamo-Session-ID", Put::kSession},
        {"X-Dynamo-Parent-Session-ID", Put::kParent},
        {"X-Dynamo-Session-Final", Put::kFinal}},
       "Dynamo's canonical headers; the final flag on the last turn"},
      // The Hermes and Pi plugins of Dynamo's trajectory era.
      {"dynamo-trajectory",
       Source::kDynamoTrajectory,
       {{"X-Dynamo-Trajectory-ID", Put::kSession},
        {"X-Dynamo-Parent-Trajectory-ID", Put::kParent},
        {"X-Dynamo-Trajectory-Final", Put::kFinal}},
       "Dynamo's trajectory-era headers, as the Hermes and Pi plugins send them"},
      // Claude Code 2.1: the root session on every request; a subagent adds its agent id, and the
      // parent agent only when the parent is itself a subagent (a top-level child's is implied).
      {"claude",
       Source::kClaudeCode,
       {{"X-Claude-Code-Session-Id", Put::kRoot},
        {"x-claude-code-agent-id", Put::kSubagent},
        {"x-claude-code-parent-agent-id", Put::kNestedParent}},
       "Claude Code: the root session, agent ids for subagents"},
      // Codex 0.171: session-id is the run's root thread, thread-id the agent's own thread (which
      // wins in normalization); a spawned agent marks itself.
      {"codex",
       Source::kCodex,
       {{"x-codex-parent-thread-id", Put::kParent},
        {"x-openai-subagent", Put::kChildText, "collab_spawn"},
        {"x-client-request-id", Put::kSession},
        {"session-id", Put::kRoot},
        {"thread-id", Put::kSession}},
       "Codex: thread-id, session-id = the root thread"},
      // OpenCode 1.18.33 with a third-party provider: the generic family and an affinity hint.
      {"opencode",
       Source::kGeneric,
       {{"x-parent-session-id", Put::kParent}, {"x-session-affinity", Put::kSession}, {"x-session-id", Put::kSession}},
       "OpenCode on a third-party provider: x-session-id, x-session-affinity"},
      {"opencode-dynamo",
       Source::kOpenCode,
       {{"x-opencode-session-id", Put::kSession}, {"x-opencode-parent-session-id", Put::kParent}},
       "OpenCode's own headers as Dynamo's docs name them"},
      {"deepseek-harness",
       Source::kDeepSeek,
       {{"x-deepseek-harness-session-id", Put::kSession}, {"x-deepseek-harness-parent-session-id", Put::kParent}},
       "the DeepSeek agent harness"},
      {"generic",
       Source::kGeneric,
       {{"x-session-id", Put::kSession}, {"x-parent-session-id", Put::kParent}},
       "x-session-id and x-parent-session-id, as AIPerf and custom clients send them"},
      {"none", Source::kNone, {}, "no identity headers"},
  };
  return kStyles;
}

const ClientStyle* find_client_style(std::string_view name) {
  for (const ClientStyle& s : client_styles())
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> client_style_names() {
  std::vector<std::string> out;
  for (const ClientStyle& s : client_styles()) out.emplace_back(s.name);
  return out;
}

std::vector<std::pair<std::string, std::string>> write_headers(const ClientStyle& style, const Lineage& id) {
  std::vector<std::pair<std::string, std::string>> h;
  if (id.session.empty()) return h;
  const std::string& root = id.root.empty() ? id.session : id.root;
  const bool child = !id.parent.empty() && id.parent != id.session;
  const bool subagent = id.session != root;
  for (const HeaderWrite& w : style.writes) {
    switch (w.put) {
      case Put::kSession: h.emplace_back(w.name, id.session); break;
      case Put::kRoot: h.emplace_back(w.name, root); break;
      case Put::kParent:
        if (child) h.emplace_back(w.name, id.parent);
        break;
      case Put::kSubagent:
        if (subagent) h.emplace_back(w.name, id.session);
        break;
      case Put::kNestedParent:
        if (subagent && child && id.parent != root) h.emplace_back(w.name, id.parent);
        break;
      case Put::kFinal:
        if (id.final_turn) h.emplace_back(w.name, "true");
        break;
      case Put::kChildText:
        if (child) h.emplace_back(w.name, w.text);
        break;
    }
  }
  return h;
}

std::string describe_client_styles() {
  std::string out;
  for (const ClientStyle& s : client_styles()) {
    if (!out.empty()) out += "; ";
    out += std::string(s.name) + " (" + std::string(s.note) + ")";
  }
  return out;
}

std::string describe_families() {
  auto list = [](const std::vector<std::string_view>& names, const char* sep) {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) {
      if (i) s += sep;
      s += names[i];
    }
    return s;
  };
  std::string out;
  int row = 0;
  for (const Family& f : families()) {
    out += std::to_string(++row) + " " + source_name(f.source) + ": session " + list(f.session, ", else ");
    if (!f.session_aliases.empty())
      out += " (with --session-header-aliases, else " + list(f.session_aliases, ", else ") + ")";
    if (!f.subagent.empty())
      out += "; subagent " + list(f.subagent, ", else ") +
             " (then the session; its parent is the parent header, "
             "else the root session)";
    if (!f.parent.empty()) out += "; parent " + list(f.parent, ", else ");
    if (!f.final_flag.empty()) out += "; final " + std::string(f.final_flag);
    if (!f.turn_metadata.empty()) out += "; turn metadata " + std::string(f.turn_metadata);
    if (!f.note.empty()) out += " (" + std::string(f.note) + ")";
    out += '\n';
  }
  return out;
}

}  // namespace dyn::session
