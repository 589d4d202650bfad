# An https:// worker: dyn-route serve speaks TLS to it (SNI, certificate and host name checked
# against the system's CA store, here pointed at the test's self-signed certificate with
# SSL_CERT_FILE as OpenSSL reads it). Trusted: two turns answered 200 over TLS. Not trusted: 502
# naming the failed verification, and the router keeps serving.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
command -v openssl >/dev/null || { echo "no openssl" >&2; exit 77; }
openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 2>/dev/null
python3 "$DYN_ROOT/tests/e2e/helpers/https_upstream.py" cert.pem key.pem up.port &
_dyn_pids+=($!)
wait_file up.port
up="https://127.0.0.1:$(cat up.port)"
body='{"model":"m","messages":[{"role":"user","content":"hi"}]}'
for trust in yes no; do
  echo "== certificate trusted: $trust"
  if [[ $trust == yes ]]; then export SSL_CERT_FILE="$PWD/cert.pem"; else export SSL_CERT_FILE="$PWD/none.pem"; fi
  start_router r --worker "$up" --health-interval-ms 60000
  for _ in 1 2; do
    curl -sS -o out.json -w '%{http_code} ' "$r_url/v1/chat/completions" -H 'content-type: application/json' -d "$body"
    jq -r '.choices[0].message.content // .error.message' out.json | sed "s/127.0.0.1:[0-9]*/127.0.0.1:PORT/"
  done
  stop "$r_pid"
done
