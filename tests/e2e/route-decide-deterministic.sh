# Shows that dyn-route decide on the Mooncake conversation trace writes one route_decision row per
# input row (12,031) and that two runs with the same seed are byte-identical (kv with affinity, and
# random mode); a different seed changes random placements.
t="$DYN_DATA/mooncake-fast25/conversation_trace.jsonl.gz"
dyn-route decide --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300 --seed 7 "$t" >a.jsonl
dyn-route decide --workers 8 --router-mode kv --router-session-affinity-ttl-secs 300 --seed 7 "$t" >b.jsonl
wc -l <a.jsonl
cmp a.jsonl b.jsonl && echo "kv: identical"
jq -r '.event_type' a.jsonl | sort | uniq -c | sed 's/^ *//'
jq -r 'select(.request.cached_tokens > 0) | 1' a.jsonl | wc -l | sed 's/^/rows with predicted cache hits: /'
dyn-route decide --workers 8 --router-mode random --seed 7 "$t" >r1.jsonl
dyn-route decide --workers 8 --router-mode random --seed 7 "$t" >r2.jsonl
dyn-route decide --workers 8 --router-mode random --seed 8 "$t" >r3.jsonl
cmp r1.jsonl r2.jsonl && echo "random: identical with the same seed"
cmp -s r1.jsonl r3.jsonl || echo "random: another seed differs"
