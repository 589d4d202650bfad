# Shows that a sessionized slice of the real Mooncake conversation trace replays against a live
# dyn-mocker with every request accounted for: one ok request_end row per workload row, request
# ids <session>:<turn>, each later turn sent only after the previous turn ended plus its delay
# (closed loop), prompts of exactly input_length tokens hashed into ceil(len/512) sequence
# hashes, and rows sharing leading hash ids sharing leading sequence hashes.
gzip -dc "$DYN_DATA/mooncake-fast25/conversation_trace.jsonl.gz" 2>/dev/null | head -400 | dyn-trace sessionize 2>/dev/null >w.jsonl
dyn-mocker --port 0 --port-file port --speedup-ratio 50 2>mocker.err &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
for _ in $(seq 200); do [[ -s port ]] && break; sleep 0.05; done
expect_status 0 dyn-replay w.jsonl --url "http://127.0.0.1:$(cat port)" --speedup 50 --no-progress >rows.jsonl 2>err.txt
sed -n 's/^dyn-replay: \([0-9]* requests planned: [0-9]* sent ([0-9]* ok, [0-9]* errors), [0-9]* not sent\).*/\1/p' err.txt
echo "workload rows: $(wc -l <w.jsonl)  sessions: $(jq -r .session_id w.jsonl | sort -u | wc -l)  later turns: $(jq -c 'select(.delay != null)' w.jsonl | wc -l)"
echo "rows: $(wc -l <rows.jsonl)  ok: $(jq -c 'select(.dyn.status == "ok")' rows.jsonl | wc -l)  source: $(jq -r .event_source rows.jsonl | sort -u)"
# The same request ids, once each.
jq -r '.session_id' w.jsonl | awk '{ print $1 ":" t[$1]++ }' | sort >want.txt
jq -r '.request.request_id' rows.jsonl | sort >got.txt
cmp -s want.txt got.txt && echo "request ids: every workload row exactly once" || diff want.txt got.txt | head
# Closed loop: start(turn k) >= end(turn k-1) + delay / speedup (1 ms of unix-ms rounding allowed).
jq -r '.session_id' w.jsonl | awk '{ print $1 ":" t[$1]++ }' | paste - <(jq -r '.delay // 0' w.jsonl) |
  jq -R -s 'split("\n") | map(select(length > 0) | split("\t") | {key: .[0], value: (.[1] | tonumber)}) | from_entries' >delays.json
jq -s -r --slurpfile d delays.json '
  (map({key: .request.request_id, value: .}) | from_entries) as $by |
  [ .[] | select(.dyn.turn > 0) |
    . as $r | ($by[(.agent_context.session_id + ":" + ((.dyn.turn - 1) | tostring))]) as $p |
    select($r.request.request_received_ms + 1 < $p.event_time_unix_ms + $d[0][$r.request.request_id] / 50) ] |
  "later turns: \([.[]] | length) sent before previous end + delay"' rows.jsonl
jq -s -r --slurpfile w w.jsonl '
  ($w | map({key: (.hash_ids | tostring), value: .input_length}) | from_entries) as $len |
  [ .[] | select(.request.replay.input_length != $len[(.dyn.hash_ids | tostring)] or
                 (.request.replay.input_sequence_hashes | length) != (.dyn.hash_ids | length)) ] |
  "rows whose prompt length or hash count differs from the workload: \(length)"' rows.jsonl
# s-rows sharing their first two hash ids share the first two sequence hashes.
jq -s -r '[ group_by(.dyn.hash_ids[0:2])[] | select(length > 1) |
  (map(.request.replay.input_sequence_hashes[0:2]) | unique | length) ] |
  "prefix groups: \(length), groups whose shared prefix hashes differ: \(map(select(. > 1)) | length)"' rows.jsonl
# The rows are a Dynamo trace: replayed again directly (SPEC 6.2), every request comes back once,
# with the same sessions and prompt lengths.
expect_status 0 dyn-replay rows.jsonl --url "http://127.0.0.1:$(cat port)" --speedup 50 --no-progress >rows2.jsonl 2>err2.txt
echo "replay of the rows: $(jq -c 'select(.dyn.status == "ok")' rows2.jsonl | wc -l) ok"
# Any row that is not ok goes to stderr (shown when the test fails), with what the replayer said.
jq -c 'select(.dyn.status != "ok") | {request_id: .request.request_id, total_time_ms: .request.total_time_ms, dyn}' rows.jsonl rows2.jsonl >&2
grep -v '^dyn-replay: [0-9]* requests planned' err.txt err2.txt >&2
cmp -s <(jq -r '[.agent_context.session_id, .request.replay.input_length] | @tsv' rows.jsonl | sort) \
       <(jq -r '[.agent_context.session_id, .request.replay.input_length] | @tsv' rows2.jsonl | sort) &&
  echo "same sessions and prompt lengths" || echo "sessions or prompt lengths differ"
