// The session-header families of SPEC 1.1 as one table: the spellings normalize() reads, and how
// each agent client writes them (dyn-replay --session-headers). A new spelling is one line of
// families.cpp; normalization, the duplicate check, the fuzz target, `dyn-route normalize --help`
// and the man page all read it from there.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dyn::session {

/// Which header family (SPEC 1.1 table row) produced the session.
enum class Source { kNone, kDynamo, kDynamoTrajectory, kClaudeCode, kCodex, kDeepSeek, kOpenCode, kGeneric };
/// "none", "dynamo", "dynamo-trajectory", "claude-code", "codex", "deepseek-harness", "opencode", "generic".
const char* source_name(Source s);

/// One row of SPEC 1.1's precedence table. Header names are lower case; each list is in
/// precedence order (the first spelling present wins).
struct Family {
  Source source = Source::kNone;
  std::vector<std::string_view> session = {};  ///< session id spellings
  /// Session spellings read only with aliases on (NormalizeOptions::aliases), after `session`:
  /// spellings some clients send that Dynamo does not read today.
  std::vector<std::string_view> session_aliases = {};
  /// A subagent's own id (Claude Code's agent id). When present it is the session, and its parent
  /// is the first `parent` spelling present, else the `session` spelling's value (the root
  /// session: a top-level subagent). Without it the session spelling is a root turn: no parent.
  std::vector<std::string_view> subagent = {};
  std::vector<std::string_view> parent = {};  ///< parent session spellings
  std::string_view final_flag = {};           ///< "": none. true/false/1/0/yes/no (Dynamo)
  std::string_view turn_metadata = {};        ///< "": none. JSON; request_kind "compaction" (Codex)
  std::string_view note = {};                 ///< one line for --help and the man page ("" = none)
};

/// SPEC 1.1's families in precedence order: the first family with a session or subagent spelling
/// present yields the session.
const std::vector<Family>& families();

/// Every header whose value is part of the identity (lower case): the families' spellings (their
/// aliases with `aliases`), then the worker target, priority, x-request-id and x-session-affinity.
/// normalize() rejects a conflicting duplicate of any of these except the last two, and reads no
/// other header.
const std::vector<std::string_view>& identity_header_names(bool aliases = false);

/// What a client puts in one header (SPEC 6.3), from a request's lineage.
enum class Put {
  kSession,       ///< the session id
  kRoot,          ///< the root of the parent chain
  kParent,        ///< the parent; only on a child's requests
  kSubagent,      ///< the session id; only when the session is not the root
  kNestedParent,  ///< the parent; only when neither the session nor the parent is the root
  kFinal,         ///< "true"; only on the session's last turn
  kChildText,     ///< HeaderWrite::text; only on a child's requests
};

/// One header a client sends: its name spelled as the client sends it, and what goes in it.
struct HeaderWrite {
  std::string_view name;
  Put put;
  std::string_view text = {};  ///< for Put::kChildText
};

/// How one agent client sends session identity (dyn-replay --session-headers NAME), spelled as
/// captured from the real CLIs (data/agent-headers/captured/README.md) or as the client's docs
/// name them. normalize() of its headers gives back the lineage's session and parent (and the
/// final flag where the family has one) with `produces` as the source; unit test_session checks
/// this round trip for every style.
struct ClientStyle {
  std::string_view name;
  Source produces;
  std::vector<HeaderWrite> writes;  ///< in send order
  std::string_view note;            ///< one line for --help
};

/// Every client style, "none" (no headers) last.
const std::vector<ClientStyle>& client_styles();
/// The style called `name`, or nullptr.
const ClientStyle* find_client_style(std::string_view name);
/// The style names in table order ("dynamo", "claude", ...), for CLI choices.
std::vector<std::string> client_style_names();

/// A request's place in its session tree, as a replay knows it.
struct Lineage {
  std::string session;      ///< the agent's own session id; "" = no identity
  std::string parent;       ///< the immediate parent session ("" for a root)
  std::string root;         ///< the top of the parent chain ("" = the session itself)
  bool final_turn = false;  ///< the session's last turn
};

/// The headers `style` sends for `lineage`, in the style's order. None when lineage.session is
/// empty. Pure; thread-safe.
std::vector<std::pair<std::string, std::string>> write_headers(const ClientStyle& style, const Lineage& lineage);

/// The client styles as text for --help: "name (note); name (note); ...".
std::string describe_client_styles();

/// The families as text, one line each in precedence order ("1 dynamo: session x-dynamo-session-id;
/// parent ..."; aliases as "with --session-header-aliases, else ..."), for `dyn-route normalize
/// --help` and its man page.
std::string describe_families();

}  // namespace dyn::session
