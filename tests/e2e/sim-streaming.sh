# Issue 17: dyn-replay --sim streams a workload file on the fixed schedule (rows read as the
# virtual clock reaches them, each request dropped once it and all before it are done), so memory
# follows the cluster, not the trace. Streaming must change nothing: the same file read from
# stdin (loaded whole, stdin cannot be read twice) gives byte-identical rows and the same summary,
# across sessions with recorded gaps and delays, offsets, the request count, speedup, admission,
# session eviction and the yardsticks. The first 3,000 rows of the Mooncake conversation trace,
# sessionized so that affinity and session dependencies act.
set -u
gzip -dc "$DYN_DATA/mooncake-fast25/conversation_trace.jsonl.gz" | head -3000 > raw.jsonl
dyn-trace sessionize raw.jsonl > s.jsonl 2>/dev/null
# Later turns by delay instead of timestamp, interleaved with other sessions' rows.
cat > delay.jsonl <<'ROWS'
{"timestamp": 0, "session_id": "a", "input_length": 600, "output_length": 20, "hash_ids": [1, 2]}
{"timestamp": 10, "session_id": "b", "input_length": 600, "output_length": 20, "hash_ids": [3, 4]}
{"session_id": "a", "delay": 500, "input_length": 1200, "output_length": 20, "hash_ids": [1, 2, 5]}
{"timestamp": 5000, "input_length": 100, "output_length": 5, "hash_ids": [9]}
{"session_id": "b", "delay": 0, "input_length": 1200, "output_length": 20, "hash_ids": [3, 4, 6]}
{"session_id": "a", "delay": 100, "input_length": 1800, "output_length": 20, "hash_ids": [1, 2, 5, 7]}
ROWS
# same FILE FLAGS...: streamed from the file vs loaded from stdin; the rows, the summary (wall
# time aside), and how many requests the streamed run held at most.
same() {
  local f=$1
  shift
  dyn-replay --sim "$f" "$@" > file.out 2> file.err
  dyn-replay --sim - "$@" < "$f" > stdin.out 2> stdin.err
  sed -i 's/ in [0-9.]* s wall ([0-9]* requests\/s, [0-9]*x real time)//' file.err stdin.err
  held=$(sed -n 's/.*workload streamed: at most \([0-9]*\) of \([0-9]*\) requests.*/\1 \2/p' file.err)
  grep -v 'workload streamed' file.err > file.err2
  if cmp -s file.out stdin.out && cmp -s file.err2 stdin.err && ! grep -q 'workload streamed' stdin.err; then
    echo "same: $(wc -l < file.out) rows, held $held ($*)"
  else
    echo "DIFFERENT ($f $*)"
    diff file.err2 stdin.err | head -5
  fi
}
K=(--workers 8 --router-mode kv --router-session-affinity-ttl-secs 300)
same raw.jsonl "${K[@]}"
same s.jsonl "${K[@]}"
same s.jsonl "${K[@]}" --speedup 3 --fixed-schedule-start-offset 100000 --fixed-schedule-end-offset 500000
same s.jsonl "${K[@]}" --fixed-schedule-auto-offset --fixed-schedule-start-offset 50000 --request-count 1500
same s.jsonl "${K[@]}" --num-gpu-blocks-override 3000 --kv-eviction session --admission thunderagent
same s.jsonl "${K[@]}" --num-gpu-blocks-override 3000 --reference pooled --reference belady --benchmark-duration 300
same delay.jsonl --workers 2 --router-mode kv --router-session-affinity-ttl-secs 60
same delay.jsonl --workers 2 --speedup 4 --fixed-schedule-start-offset 5
echo "== the streamed run holds a small part of the trace (sessionized, 8 workers)"
dyn-replay --sim s.jsonl "${K[@]}" 2>&1 >/dev/null | sed -n 's/.*at most \([0-9]*\) of \([0-9]*\) requests.*/\1 \2/p' |
  awk '{ print ($1 * 10 < $2) ? "under a tenth of the rows: yes" : "under a tenth of the rows: NO (" $1 " of " $2 ")" }'
echo "== input that cannot stream is loaded whole, with the same result and no note"
awk 'NR % 2 == 0' s.jsonl > even.jsonl
awk 'NR % 2 == 1' s.jsonl > odd.jsonl
cat even.jsonl odd.jsonl > shuffled.jsonl  # out of timestamp order: sorted stably on load
dyn-replay --sim shuffled.jsonl "${K[@]}" 2>&1 >/dev/null | grep -c 'workload streamed'
dyn-replay --sim shuffled.jsonl "${K[@]}" 2>&1 >/dev/null | grep -o 'not in timestamp order; sorted stably by timestamp'
