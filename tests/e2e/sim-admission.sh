# Shows that dyn-replay --sim --admission thunderagent runs the SPEC 9 controller on the virtual
# clock: with agent sessions whose contexts outgrow two small workers, some requests wait
# (dyn.pause_ms > 0) and are released by the scheduler tick, every request still completes, the
# run repeats exactly, rows without admission carry no pause_ms, and bad thresholds are usage errors.
set -u
dyn-trace generate --seed 5 --sessions 12 --session-rate 0 --block-size 64 --turns-min 4 --turns-max 8 \
  --tool-output-tokens 1500 --tool-gap-ms 3000 --subagent-probability 0.2 --wait-for > w.jsonl
sim() {
  dyn-replay --sim w.jsonl --block-size 64 --workers 2 --kv-cache-block-size 64 \
    --num-gpu-blocks-override 512 --router-mode kv --router-session-affinity-ttl-secs 600 "$@" 2>/dev/null
}
sim --admission thunderagent > a.jsonl
sim --admission thunderagent > b.jsonl
cmp -s a.jsonl b.jsonl && echo "deterministic"
echo "rows $(wc -l < w.jsonl) -> $(jq -s 'map(select(.dyn.status == "ok")) | length' a.jsonl) ok"
jq -s '{with_pause_ms: map(select(.dyn | has("pause_ms"))) | length,
        paused: map(select(.dyn.pause_ms > 0)) | length,
        paused_at_least_one_tick: map(select(.dyn.pause_ms > 0)) | all(.request.ttft_ms >= .dyn.pause_ms)}' a.jsonl
# admission places programs (explicit worker): a session moves only when a resume re-placed it
echo "sessions that moved: $(jq -s 'group_by(.agent_context.session_id)
  | map(select(map(.request.worker.decode_worker_id) | unique | length > 1)) | length' a.jsonl)"
sim --admission none > n.jsonl
jq -s 'map(select(.dyn | has("pause_ms"))) | length' n.jsonl
expect_status 2 sim --admission thunderagent --pause-target 0.99
DYN_THUNDERAGENT_PAUSE_THRESHOLD=2 expect_status 2 dyn-replay --sim w.jsonl --admission thunderagent >/dev/null 2>&1
