# Shows that traces of Dynamo's trajectory era read as the session era in every tool that reads a
# row's session: dyn-bind check and show, dyn-bench report --per-session, dyn-trace convert,
# stats and filter, and dyn-route decide give the same output for a session-era trace and for the
# same trace in each older schema: session_type_id/session_id/trajectory_id/parent_trajectory_id
# (session_id named the whole run) and trajectory_id/parent_trajectory_id/trajectory_final alone.
# Live, dyn-route serve and normalize take the trajectory headers the Hermes and Pi plugins send
# as the session headers.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
# One run: a main agent (4 turns) with two subagents (2 turns each), and a lone agent, over two
# workers that do not keep sessions in place.
mkdir -p session b c
python3 - >session/t.jsonl <<'PY'
import hashlib, json
turns = [("main", None, 0), ("main", None, 1), ("sub-a", "main", 1), ("sub-b", "main", 0), ("lone", None, 1),
         ("sub-a", "main", 0), ("sub-b", "main", 0), ("main", None, 0), ("lone", None, 0), ("main", None, 1)]
seen = {}
for i, (s, p, w) in enumerate(turns):
    n = seen.get(s, 0); seen[s] = n + 1
    start = 1700000000000 + 1000 * i
    ac = {"session_id": "run-7:" + s}
    if p: ac["parent_session_id"] = "run-7:" + p
    if s == "lone" and n == 1: ac["session_final"] = True
    hashes = [int(hashlib.sha256(f"{s}/{k}".encode()).hexdigest()[:12], 16) for k in range(n + 2)]
    print(json.dumps({"schema": "dynamo.request.trace.v1", "event_type": "request_end", "event_time_unix_ms": start + 500,
                      "event_source": "router", "agent_context": ac,
                      "request": {"request_id": f"{s}:{n}", "model": "m", "input_tokens": 64 * len(hashes),
                                  "output_tokens": 8, "cached_tokens": 0, "request_received_ms": start, "ttft_ms": 50.0,
                                  "total_time_ms": 500.0, "worker": {"decode_worker_id": w},
                                  "replay": {"trace_block_size": 64, "input_length": 64 * len(hashes),
                                             "input_sequence_hashes": hashes}}}))
PY
# b: the session-type generation (session_id = the run, trajectory_id = the agent); c: trajectories alone.
jq -c '.agent_context |= ({session_type_id: "swe", session_id: "run-7", trajectory_id: .session_id}
        + (if .parent_session_id then {parent_trajectory_id: .parent_session_id} else {} end)
        + (if .session_final then {trajectory_final: .session_final} else {} end))' session/t.jsonl >b/t.jsonl
jq -c '.agent_context |= ({trajectory_id: .session_id}
        + (if .parent_session_id then {parent_trajectory_id: .parent_session_id} else {} end)
        + (if .session_final then {trajectory_final: .session_final} else {} end))' session/t.jsonl >c/t.jsonl
jq -c .agent_context b/t.jsonl | sed -n 3p
jq -c .agent_context c/t.jsonl | sed -n 3p
for d in session b c; do
  (cd "$d" &&
    { dyn-bind check --ttl-secs 300 t.jsonl >check.out || true; } &&
    dyn-bind show t.jsonl >show.out &&
    dyn-bench report --per-session --format json t.jsonl 2>/dev/null | jq -c '.dyn.per_session' >bench.out &&
    dyn-trace convert --from dynamo t.jsonl 2>/dev/null >convert.out &&
    dyn-trace stats --format jsonl t.jsonl >stats.out &&
    dyn-trace filter --session run-7:main --with-subagents t.jsonl | jq -r .request.request_id >filter.out &&
    dyn-route decide --workers 2 --seed 1 --router-session-affinity-ttl-secs 300 t.jsonl 2>/dev/null |
      jq -c '[.request.request_id, .agent_context, .request.worker.decode_worker_id, .dyn.binding]' >decide.out)
done
echo "== session era"
echo "bind check: $(wc -l <session/check.out) violations over keys $(jq -r .key session/check.out | sort -u | paste -sd' ')"
jq -r '.key' session/show.out | paste -sd' '
echo "bench sessions: $(jq -r '[.[] | .session_id + "<" + (.parent_session_id // "-")] | join(" ")' session/bench.out)"
echo "convert sessions: $(jq -r '.session_id + "<" + (.parent_session_id // "-")' session/convert.out | sort -u | paste -sd' ')"
echo "filter main with subagents: $(paste -sd' ' session/filter.out)"
head -3 session/decide.out
echo "== older schemas: the same outputs"
for d in b c; do
  for o in check show bench convert stats filter decide; do
    cmp -s "session/$o.out" "$d/$o.out" && r=same || r=DIFFERENT
    printf '%s %s: %s\n' "$d" "$o" "$r"
  done
done | awk '{k = $1; r[k] = r[k] " " $2 $3} END {for (k in r) print k ":" r[k]}' | sort

echo "== live: the trajectory headers of the Hermes and Pi plugins"
start_mocker w --speedup-ratio 100
start_router r --worker "$w_url" --request-trace --request-trace-file-path tr --request-trace-file-format jsonl
for h in "x-dynamo-trajectory-id: pi-1" "x-dynamo-trajectory-id: pi-1:child|x-dynamo-parent-trajectory-id: pi-1|x-dynamo-trajectory-final: true" \
         "x-dynamo-trajectory-id: old|x-dynamo-session-id: new"; do
  args=(); IFS='|' read -ra hs <<<"$h"; for x in "${hs[@]}"; do args+=(-H "$x"); done
  curl -sS -o /dev/null "${args[@]}" -H 'content-type: application/json' "$r_url/v1/chat/completions" \
    -d '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
done
stop "$r_pid"
jq -c .agent_context tr
printf '%s\n' '{"headers":{"X-Dynamo-Trajectory-ID":"hermes-3","X-Dynamo-Parent-Trajectory-ID":"hermes-1"}}' |
  dyn-route normalize | jq -c '[.agent_context, .source]'
