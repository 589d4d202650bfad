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
# free_port: a TCP port free on 127.0.0.1 now (for servers that take no --port 0: nginx).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# tree_sum PID FILE AWK: the sum over PID and its children processes (nginx's workers) of the
# number AWK prints from /proc/P/FILE.
tree_sum() {
  local p t=0
  for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    t=$((t + $(awk "$3" /proc/"$p"/"$2" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
# cpu PID: utime + stime of PID and its children, in clock ticks.
cpu() { tree_sum "$1" stat '{print $14 + $15}'; }
# cpu_snap PID: one "TID NS" line per thread of PID and of its children (nginx's workers): the
# nanoseconds it has run, user and kernel (/proc/P/task/T/schedstat), not utime + stime's 10 ms
# clock ticks, which at one request a second left a run of nginx one tick or none.
cpu_snap() {
  local p f x
  for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    for f in /proc/"$p"/task/*/schedstat; do
      read -r x _ <"$f" 2>/dev/null || continue
      f=${f%/schedstat}
      echo "${f##*/} $x"
    done
  done
}
# cpu_between BEFORE AFTER: CPU seconds the threads in two cpu_snap files ran between them (a
# thread started since counts whole; one that ended since, idle handler threads, counts nothing).
cpu_between() { awk 'NR == FNR { b[$1] = $2; next } { t += $2 - ($1 in b ? b[$1] : 0) } END { printf "%.6f\n", t / 1e9 }' "$1" "$2"; }
# rss PID: resident KiB of PID and its children.
rss() { tree_sum "$1" status '$1 == "VmRSS:" {v = $2} END {print v + 0}'; }
# start_nginx WORK UPSTREAM_PORT: the nginx baseline of the serve benchmarks in front of
# 127.0.0.1:UPSTREAM_PORT, on a free port; sets n_pid and n_url once it answers.
start_nginx() {
  local port
  port=$(free_port)
  nginx_conf "$1" "$2" "$port"
  nginx -c "$1/nginx.conf" -g 'daemon off;' 2>"$1/nginx.start" &
  pids+=($!)
  n_pid=$!
  n_url="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do curl -sf -o /dev/null "$n_url/health" && break; sleep 0.05; done
}
# nginx_conf WORK UPSTREAM_PORT LISTEN_PORT: the nginx configuration, written to WORK/nginx.conf:
# Debian's nginx as people run it in front of an engine (upstream keepalive, HTTP/1.1 upstream,
# no response or request buffering), so a proxy's cost compares to it.
nginx_conf() {
  local user_line=""
  [[ $EUID == 0 ]] && user_line="user root root;"
  cat >"$1/nginx.conf" <<EOF
$user_line
worker_processes auto;
pid $1/nginx.pid;
error_log $1/nginx.err warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $1/nginx-body;
  proxy_temp_path $1/nginx-proxy;
  upstream mocker { server 127.0.0.1:$2; keepalive 512; }
  server {
    listen 127.0.0.1:$3;
    client_max_body_size 64m;
    client_body_buffer_size 1m;
    location / {
      proxy_pass http://mocker;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 600s;
    }
  }
}
EOF
}
