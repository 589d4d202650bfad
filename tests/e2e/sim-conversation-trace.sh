# Shows that dyn-replay --sim --workers 8 replays the whole Mooncake conversation trace through the
# simulated cluster (KV-aware router), writes one request_end row per request (12,031), with
# prompt-cache hits, and repeats byte for byte.
set -u
trace="$DYN_DATA/mooncake-fast25/conversation_trace.jsonl.gz"
expect_status 0 dyn-replay "$trace" --sim --workers 8 --router-mode kv > a.jsonl 2>a.err
wc -l < a.jsonl
jq -s '{rows: length, sources: (map(.event_source) | unique), ok: (map(select(.dyn.status == "ok")) | length),
        workers: (map(.request.worker.decode_worker_id) | unique),
        hit_pct_above_10: ((map(.request.cached_tokens) | add) / (map(.request.input_tokens) | add) > 0.10),
        ttft_positive: (map(select(.request.ttft_ms > 0)) | length),
        out_tokens_match: ([.[] | select(.request.output_tokens >= 1)] | length)}' -c a.jsonl
grep -o 'simulated 12031 requests (0 errors) on 8 workers' a.err
grep -o 'prompt-cache hit [0-9.]* %' a.err | sed 's/[0-9.]* %/N %/'
dyn-replay "$trace" --sim --workers 8 --router-mode kv 2>/dev/null | cmp - a.jsonl && echo "deterministic"
