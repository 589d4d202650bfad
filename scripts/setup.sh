#!/usr/bin/env bash
# Installs the Debian packages dyn needs to build and test, only those missing (idempotent),
# then configures and builds into ./build.
# Usage: scripts/setup.sh [--no-build] [TARGET...]   (TARGETs: build only these, e.g. the tools the
# quickstart needs, optimized without debug info, one translation unit per target; none =
# everything, tests included, RelWithDebInfo file by file). DYN_CMAKE_ARGS: more cmake -D options.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkgs=(build-essential cmake pkg-config libcli11-dev libfmt-dev nlohmann-json3-dev libcpp-httplib-dev
      zlib1g-dev libisal-dev doctest-dev libxxhash-dev libsimdjson-dev jq groff-base curl procps
      clang libclang-rt-14-dev llvm-14)  # the fuzz build: clang, libFuzzer/ASan/UBSan runtimes, llvm-symbolizer
# engines' KV events (vLLM's ZMQ + msgpack format) and the test's independent publisher
pkgs+=(libzmq3-dev cppzmq-dev libmsgpack-cxx-dev python3-zmq python3-msgpack)
# the proxy's upstream client (Boost.Beast/Asio) and its TLS for https upstreams
pkgs+=(libboost-dev libssl-dev openssl)  # openssl: e2e.serve-https-upstream makes its certificate
# the engine model's .npz timing profiles (zip archives of .npy arrays)
pkgs+=(libzip-dev)
# the tools' allocator (jemalloc with transparent huge pages, CMake DYN_JEMALLOC)
pkgs+=(libjemalloc-dev)
# router replicas: bindings in Redis (hiredis client, redis-server for the tests)
pkgs+=(libhiredis-dev redis-server)
# the completion test (e2e.completions) loads and runs each generated script in its own shell
pkgs+=(zsh fish)
# Ninja starts a target's compiles before the libraries it links are built (Make waits for them):
# the quickstart's six one-unit tools then build side by side on both cores
pkgs+=(ninja-build)
# the style checks in the suite (e2e.style-check): scripts/format.sh --check and
# scripts/check-function-size.sh
pkgs+=(clang-format universal-ctags)
# node and npm run the real-client e2e tests (OpenAI/Anthropic SDKs, Codex, OpenCode from npm;
# skipped without them). Asked for by command, not by package: a NodeSource nodejs already ships
# npm and conflicts with Debian's npm package.
command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
[[ "${DYN_SETUP_EXTRA:-}" != "" ]] && read -r -a extra <<<"$DYN_SETUP_EXTRA" && pkgs+=("${extra[@]}")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [[ $(id -u) != 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ "${1:-}" == "--no-build" ]] && exit 0
targets=()
for t in "$@"; do targets+=(--target "$t"); done
if ((${#targets[@]})); then
  # Only some tools (the quickstart's): the same optimisation as the tested build (-O2, NDEBUG),
  # without debug info (-g costs about a quarter of each compile), each target compiled as one
  # translation unit (DYN_UNITY_BUILD; about 60 % less CPU). A later full run reconfigures.
  build_type=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DDYN_UNITY_BUILD=ON)
else
  # Everything, tests included: debug info for the test failures, every file compiled on its own.
  build_type=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDYN_UNITY_BUILD=OFF)
fi
# A new build folder gets Ninja; one configured before with Make keeps its generator (CMake refuses
# to switch generators in place).
generator=()
[[ -e "$root/build/CMakeCache.txt" ]] || generator=(-G Ninja)
cmake -S "$root" -B "$root/build" "${generator[@]}" "${build_type[@]}" ${DYN_CMAKE_ARGS:-} >/dev/null
# -j: every core the machine has (nproc), at least 2.
jobs=$(nproc 2>/dev/null || echo 2); (( jobs < 2 )) && jobs=2
cmake --build "$root/build" -j"$jobs" "${targets[@]}"
