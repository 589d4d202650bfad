# Helpers for bench scripts that start servers (sourced, not a benchmark): the PIDs they started
# and a stop for all of them, and the port a server writes to its --port-file.
pids=()
# stop_all: SIGTERM every PID in pids (the frontends flush their traces on it), then wait.
stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
# wait_port FILE: prints the port a server wrote to FILE once listening (up to 10 s).
wait_port() {
  local i
  for i in $(seq 1 200); do [[ -s "$1" ]] && { cat "$1"; return 0; }; sleep 0.05; done
  echo "no port in $1" >&2
  return 1
}
