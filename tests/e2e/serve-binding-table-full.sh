# Shows that a full binding table (--router-max-bindings 3 here; the default is SPEC 2.1's 65,536,
# exercised at full size by bench/binding-table-limit.sh) answers a new session 503 with a clear
# OpenAI-style body while bound sessions keep working, counts the refusal in
# dyn_router_binding_table_full_total, and admits new sessions again once bindings expire.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
start_mocker w0 --worker-id 0 --speedup-ratio 50
start_mocker w1 --worker-id 1 --speedup-ratio 50
start_router r --worker "$w0_url" --worker "$w1_url" --router-session-affinity-ttl-secs 15 --router-max-bindings 3
for s in a b c; do echo "$s: $(chat "$r_url" "{\"x-session-id\":\"$s\"}" '[{"role":"user","content":"hi"}]')"; done
echo "d: $(chat "$r_url" '{"x-session-id":"d"}' '[{"role":"user","content":"hi"}]' | cut -d' ' -f2)"
jq -c '.error' body.txt
m=$(grow '[{"role":"user","content":"hi"}]' 1)
echo "a turn 2: $(chat "$r_url" '{"x-session-id":"a"}' "$m" | cut -d' ' -f2)"
echo "no session (no binding needed): $(chat "$r_url" '{}' '[{"role":"user","content":"hi"}]' | cut -d' ' -f2)"
echo "refusals counted: $(curl -sS "$r_url/metrics" | awk '/^dyn_router_binding_table_full_total/{print $2}')"
echo "bindings: $(curl -sS "$r_url/v1/bindings" | jq -c '[.bindings[].key]')"
# Wait until the TTL (15 s: long enough that a loaded machine or a sanitizer build lists a, b, c
# before it; 5 s was not) has emptied the table, then a new session is admitted again.
for _ in $(seq 1 400); do [[ $(curl -sS "$r_url/v1/bindings" | jq '.bindings | length') == 0 ]] && break; sleep 0.1; done
echo "after the TTL, d: $(chat "$r_url" '{"x-session-id":"d"}' '[{"role":"user","content":"hi"}]' | cut -d' ' -f2)"
