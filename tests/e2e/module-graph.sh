# Shows that lib/dyn's module graph in lib/README.md is true and enforced: the checker passes on
# the repository, and fails, naming file, line and edge, on a copy with a forbidden include (route
# including the engine's header, which built, linked and passed every test before the checker), on
# a declared use no file includes, and on a CMake link the table does not list.
set -u
check="$DYN_ROOT/scripts/check-module-graph.py"
echo "== the repository"
expect_status 0 python3 "$check" "$DYN_ROOT"
plant() {   # plant NAME: a copy of lib/ under NAME/
  mkdir -p "$1"
  cp -r "$DYN_ROOT/lib" "$1/"
}
echo "== planted: route/config.cpp includes dyn/engine/config.h"
plant a
sed -i '0,/^#include "dyn\/route\/config.h"/s//&\n#include "dyn\/engine\/config.h"/' a/lib/dyn/route/config.cpp
expect_status 1 python3 "$check" a
echo "== planted: the table says kv uses tokens"
plant b
sed -i 's/^| kv | \(.*\) | — | |$/| kv | \1 | tokens | |/' b/lib/README.md
expect_status 1 python3 "$check" b
echo "== planted: session links dyn_io"
plant c
sed -i 's/dyn_add_module(session DEPS dyn_base)/dyn_add_module(session DEPS dyn_base dyn_io)/' c/lib/dyn/session/CMakeLists.txt
expect_status 1 python3 "$check" c
