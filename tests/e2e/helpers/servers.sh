# Helpers for e2e tests that start real servers on 127.0.0.1 (sourced, not a test). Every process
# started here is stopped when the test's shell exits, whatever happens.
_dyn_pids=()
# _dyn_kill [-SIG] PID...: signals each PID that is still a child of this shell. A PID whose
# process has ended may already belong to another test's process: pid_max is 32,768 here and a
# ctest -j2 run spawns more processes than that, so an unguarded kill at exit of a server stopped
# earlier can stop another test's router (which then leaves without a word in its log).
_dyn_kill() {
  local sig=-TERM p
  [[ $1 == -* ]] && { sig=$1; shift; }
  for p in "$@"; do
    [[ $(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) == "$$" ]] && kill "$sig" "$p" 2>/dev/null
  done
  return 0
}
_dyn_cleanup() {
  local p
  _dyn_kill "${_dyn_pids[@]}"
  for p in "${_dyn_pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap _dyn_cleanup EXIT

# wait_file FILE: waits (up to 10 s) until FILE is non-empty.
wait_file() {
  local i
  for i in $(seq 1 200); do [[ -s "$1" ]] && return 0; sleep 0.05; done
  echo "timed out waiting for $1" >&2
  return 1
}

# A sanitizer build (DYN_SANITIZE set in the build's CMakeCache) runs several times slower, and a
# server's first request there pays for instrumented one-time set-up (about 2 s under TSan, more
# than the router's 1 s /health timeout, so the router would mark a fresh worker down). There each
# mocker answers one /health before the test goes on, and the router waits longer for a poll.
_dyn_sanitized=false
grep -qE '^DYN_SANITIZE:STRING=.+' "$DYN_BUILD/CMakeCache.txt" 2>/dev/null && _dyn_sanitized=true

# start_mocker NAME [ARGS...]: starts dyn-mocker on a free port; sets NAME_url and NAME_pid.
start_mocker() {
  _start_server "$1" 1 dyn-mocker "${@:2}" || return 1
  local url="${1}_url"
  if $_dyn_sanitized; then curl -sS -o /dev/null -m 60 "${!url}/health"; fi
}

# start_router NAME [ARGS...]: starts dyn-route serve on a free port; sets NAME_url and NAME_pid.
start_router() {
  local slow=()
  # Sanitized binaries answer health polls slowly; a test that sets its own timeout keeps it
  # (the flag may be given once).
  $_dyn_sanitized && [[ " $* " != *" --health-timeout-ms "* ]] && slow=(--health-timeout-ms 20000)
  _start_server "$1" 2 dyn-route serve "${@:2}" "${slow[@]}"
}

# _start_server NAME N WORD... ARG...: runs the N command WORDs, then --port 0 --port-file
# NAME.port, then the ARGs, in the background (log NAME.log, stopped at exit); sets NAME_url and
# NAME_pid once the port is known.
_start_server() {
  local name=$1 n=$2; shift 2
  rm -f "$name.port"
  "${@:1:n}" --port 0 --port-file "$name.port" "${@:n+1}" >"$name.log" 2>&1 &
  local pid=$!
  _dyn_pids+=("$pid")
  wait_file "$name.port" || return 1
  printf -v "${name}_url" 'http://127.0.0.1:%s' "$(cat "$name.port")"
  printf -v "${name}_pid" '%s' "$pid"
}

# stop PID: SIGTERM and wait (the frontends flush their traces on SIGTERM).
stop() {
  _dyn_kill "$1"
  wait "$1" 2>/dev/null
  return 0
}

# chat URL SESSION_HEADERS_JSON MESSAGES_JSON [MAX_TOKENS]: one streamed chat completion through
# curl; prints the x-dyn-worker header value ("-" when absent) and the HTTP status.
chat() {
  local url=$1 headers=$2 messages=$3 max=${4:-4}
  local args=() k v
  while IFS=$'\t' read -r k v; do args+=(-H "$k: $v"); done < <(jq -r 'to_entries[] | [.key, .value] | @tsv' <<<"$headers")
  curl -sS -N -D hdr.txt -o body.txt "${args[@]}" -H 'content-type: application/json' \
    "$url/v1/chat/completions" \
    -d "{\"model\":\"mock-model\",\"stream\":true,\"max_tokens\":$max,\"messages\":$messages}"
  local w
  w=$(tr -d '\r' <hdr.txt | awk -F': ' 'tolower($1)=="x-dyn-worker"{print $2}')
  echo "${w:--} $(head -1 hdr.txt | awk '{print $2}')"
}

# grow MESSAGES_JSON TURN: appends an assistant reply and the next user message (deterministic).
grow() {
  jq -c --arg t "$2" '. + [{"role":"assistant","content":("reply " + $t + " " + ("lorem ipsum dolor sit amet " * 8))},
                           {"role":"user","content":("turn " + $t + " question " + ("consectetur adipiscing elit " * 6))}]' <<<"$1"
}

# start_scripted NAME SCRIPT.json: starts tests/tools/scripted_server.py (a worker answering as a
# case's script.json says) on a free port, logging each request it gets to NAME.requests.jsonl;
# sets NAME_url and NAME_pid.
start_scripted() {
  _start_server "$1" 2 python3 "$DYN_ROOT/tests/tools/scripted_server.py" "$2" --log "$1.requests.jsonl"
}

# start_capture NAME [ARGS...]: starts dyn-trace capture on a free port; sets NAME_url and NAME_pid.
start_capture() {
  _start_server "$1" 2 dyn-trace capture "${@:2}"
}
