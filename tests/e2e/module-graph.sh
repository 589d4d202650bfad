# Shows that lib/dyn's module graph in lib/README.md is true and enforced: the checker passes on
# the repository, and fails, naming file, line and edge, on a copy with a forbidden include (route
# including the engine's header, which built, linked and passed every test before the checker), on
# a declared use no file includes, on a CMake link the table does not list, and on each way a
# "never" rule can break: through a chain of uses that are each declared, linked and included
# (records using the engine puts it under metrics, serve and dyn-bench), through a CMake link alone
# (serve linking the dyn-trace tools), through an include alone (a header-only use of trace in
# serve), a lib module reaching cli, and in the programs of cmd/ (a tool linking what its row
# forbids, a tool including a module header it does not link).
set -u
check="$DYN_ROOT/scripts/check-module-graph.py"
echo "== the repository"
expect_status 0 python3 "$check" "$DYN_ROOT"
plant() {   # plant NAME: a copy of lib/ and of the program folders' sources and CMakeLists under NAME/
  mkdir -p "$1"
  cp -r "$DYN_ROOT/lib" "$DYN_ROOT/cmd" "$1/"
  mkdir -p "$1/bench" "$1/fuzz"
  cp "$DYN_ROOT"/bench/CMakeLists.txt "$DYN_ROOT"/bench/*.cpp "$1/bench/"
  cp "$DYN_ROOT"/fuzz/CMakeLists.txt "$DYN_ROOT"/fuzz/*.cpp "$DYN_ROOT"/fuzz/*.h "$1/fuzz/"
}
add_include() {   # add_include FILE AFTER NEW: NEW's #include line after AFTER's
  sed -i "0,/^#include \"${2//\//\\/}\"/s//&\n#include \"${3//\//\\/}\"/" "$1"
  grep -q "^#include \"$3\"" "$1" || echo "plant failed: $1"
}
echo "== planted: route/config.cpp includes dyn/engine/config.h"
plant a
add_include a/lib/dyn/route/config.cpp dyn/route/config.h dyn/engine/config.h
expect_status 1 python3 "$check" a
echo "== planted: the table says kv uses tokens"
plant b
sed -i 's/^| kv | \(.*\) | — | cli | |$/| kv | \1 | tokens | cli | |/' b/lib/README.md
expect_status 1 python3 "$check" b
echo "== planted: session links dyn_io"
plant c
sed -i 's/dyn_add_module(session DEPS dyn_base)/dyn_add_module(session DEPS dyn_base dyn_io)/' c/lib/dyn/session/CMakeLists.txt
expect_status 1 python3 "$check" c
echo "== planted: records uses engine (declared, linked and included: only the never rules see it)"
plant d
sed -i 's/^| records | \(.*\) | base, io, session | /| records | \1 | base, io, session, engine | /' d/lib/README.md
sed -i 's/dyn_add_module(records DEPS dyn_base dyn_io dyn_session/& dyn_engine/' d/lib/dyn/records/CMakeLists.txt
sed -i 's/| cli, trace, engine, replay, serve |/| cli, trace, replay, serve |/' d/lib/README.md
add_include d/lib/dyn/records/percentile.cpp dyn/records/percentile.h dyn/engine/config.h
expect_status 1 python3 "$check" d
echo "== planted: serve links dyn_trace (a link alone)"
plant e
sed -i 's/dyn_add_module(serve DEPS dyn_base/& dyn_trace/' e/lib/dyn/serve/CMakeLists.txt
expect_status 1 python3 "$check" e
echo "== planted: serve/response_tap.cpp includes dyn/trace/stats.h (an include alone)"
plant f
add_include f/lib/dyn/serve/response_tap.cpp dyn/serve/response_tap.h dyn/trace/stats.h
expect_status 1 python3 "$check" f
echo "== planted: metrics uses cli (declared, linked and included)"
plant g
sed -i 's/^| metrics | \(.*\) | base, io, records, tokens | /| metrics | \1 | base, io, records, tokens, cli | /' g/lib/README.md
sed -i 's/dyn_add_module(metrics DEPS dyn_base/& dyn_cli/' g/lib/dyn/metrics/CMakeLists.txt
add_include g/lib/dyn/metrics/stats.cpp dyn/records/percentile.h dyn/cli/checks.h
expect_status 1 python3 "$check" g
echo "== planted: dyn-mocker links dyn_serve; dyn-bind includes dyn/engine/config.h without linking it"
plant h
sed -i 's/dyn_add_tool(dyn-mocker DEPS dyn_base/& dyn_serve/' h/cmd/dyn-mocker/CMakeLists.txt
add_include h/cmd/dyn-bind/show_cmd.cpp dyn/base/error.h dyn/engine/config.h
expect_status 1 python3 "$check" h
