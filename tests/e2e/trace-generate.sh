# Shows that dyn-trace generate writes a seeded agent-session workload that the workload loader
# accepts: same seed same bytes, growing contexts whose hash ids extend the previous turn,
# subagents with their parent, every row after the rows it waits for (so a replay in any load mode
# can follow them), and rows dyn-route decide routes without complaint.
set -u
dyn-trace generate --seed 3 --sessions 4 --block-size 64 --turns-min 3 --turns-max 5 \
  --subagent-probability 0.4 --wait-for --summary -o a.jsonl 2>summary.txt
dyn-trace generate --seed 3 --sessions 4 --block-size 64 --turns-min 3 --turns-max 5 \
  --subagent-probability 0.4 --wait-for > b.jsonl 2>/dev/null
cmp -s a.jsonl b.jsonl && echo "same seed: identical"
dyn-trace generate --seed 4 --sessions 4 --block-size 64 > c.jsonl
cmp -s a.jsonl c.jsonl || echo "other seed: different"
cat summary.txt
# per row: session, parent, turn start (timestamp or delay), input length, block count, wait_for
jq -c '[.session_id, (.parent_session_id // ""), (if .timestamp != null then "t" else "d" end),
        .input_length, (.hash_ids | length), (.wait_for // [])]' a.jsonl
# each later turn extends the previous turn's complete blocks
jq -s 'group_by(.session_id) | map(. as $t | [range(1; $t | length) as $i
  | ($t[$i - 1].input_length / 64 | floor) as $full
  | ($t[$i].hash_ids[:$full] == $t[$i - 1].hash_ids[:$full])] | all) | all' a.jsonl
# every wait_for names an earlier row (dyn-replay refuses one naming a later row), and a subagent
# comes after the parent turn it waits for, so its first turn follows that turn in every load mode
jq -s '[.[].request_id] as $ids | [to_entries[] | .key as $k | (.value.wait_for // [])[] | . as $w | ($ids | index([$w])) < $k]
  | all' a.jsonl
dyn-replay --sim a.jsonl --block-size 64 --kv-cache-block-size 64 --workers 2 --concurrency 2 2>/dev/null | wc -l
dyn-route decide --workers 2 --block-size 64 --kv-cache-block-size 64 --router-mode kv a.jsonl | wc -l
