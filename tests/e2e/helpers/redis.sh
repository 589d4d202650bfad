# Helpers for e2e tests that need a Redis server (sourced after servers.sh, not a test): Debian's
# redis-server on a free loopback port, no persistence, stopped when the test's shell exits.

# need_redis: exits 77 (skip, with the reason) when redis-server or redis-cli is missing.
need_redis() {
  local p
  for p in redis-server redis-cli; do
    command -v "$p" >/dev/null || { echo "$p is not installed (scripts/setup.sh installs redis-server)" >&2; exit 77; }
  done
}

# start_redis NAME [PORT]: starts redis-server on 127.0.0.1 (a free port unless PORT is given,
# e.g. to restart on the same one); sets NAME_port and NAME_pid once it answers PING.
start_redis() {
  local name=$1 port=${2:-} i
  if [[ -z $port ]]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  fi
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$PWD" >>"$name.log" 2>&1 &
  local pid=$!
  _dyn_pids+=("$pid")
  for i in $(seq 1 200); do
    [[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]] && break
    sleep 0.05
  done
  [[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]] || { echo "redis-server did not start" >&2; return 1; }
  printf -v "${name}_port" '%s' "$port"
  printf -v "${name}_pid" '%s' "$pid"
}
