// The session-header flag of every tool that normalizes request headers (SPEC 1.1): dyn-route
// serve, decide and normalize, dyn-trace capture, dyn-mocker.
#pragma once

#include <CLI/CLI.hpp>

#include "dyn/session/normalize.h"

namespace dyn::cmd {

/// --session-header-aliases (env DYN_SESSION_HEADER_ALIASES): also read Codex's older thread_id
/// and a bare session-id / session_id (SPEC 1.1 row 4); off by default, as Dynamo reads neither.
inline void add_session_flags(CLI::App& sub, session::NormalizeOptions& o) {
  sub.add_flag("--session-header-aliases,!--no-session-header-aliases", o.aliases,
               "Also take Codex's older thread_id header, and a bare session-id / session_id when no thread id is "
               "sent, as the session (Dynamo reads neither; off by default)")
      ->envname("DYN_SESSION_HEADER_ALIASES");
}

}  // namespace dyn::cmd
