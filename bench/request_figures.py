"""SPEC 7 figures of one run's request_end rows, for the admission benches (not a benchmark).

python3 bench/request_figures.py FILE [SCALE] prints one JSON line: requests (all rows), ok,
req_per_s, p90_ttft_ms, hit_pct, reprefill_tokens. SCALE multiplies times (a live run sped up by
SCALE reports on the workload's clock). Re-prefilled tokens: the leading blocks already seen
earlier in the run (what an infinite cache would hold) that the worker computed again.
Percentiles by linear interpolation.
"""
import json
import math
import sys


def pct(vals, q):
    s = sorted(vals)
    n = len(s)
    if n == 0:
        return None
    p = (n - 1) * q / 100
    i = math.floor(p)
    return s[i] + (s[i + 1] - s[i]) * (p - i) if i + 1 < n else s[i]


def figures(path, scale=1.0):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    r = [x for x in rows if x.get("event_type") == "request_end" and x.get("dyn", {}).get("status") == "ok"]
    t0 = min(x["request"]["request_received_ms"] for x in r)
    t1 = max(x["event_time_unix_ms"] for x in r)
    seen, re = set(), 0
    for x in sorted(r, key=lambda x: (x["request"]["request_received_ms"], x["request"]["request_id"])):
        bs = x["dyn"].get("block_size", 0)
        ids = x["dyn"].get("hash_ids", [])
        lead = next((k for k, h in enumerate(ids) if h not in seen), len(ids))
        re += max(0, min(lead * bs, x["request"]["input_tokens"]) - x["request"]["cached_tokens"])
        seen.update(ids)
    return {"requests": len(rows), "ok": len(r), "req_per_s": len(r) / ((t1 - t0) / 1000 * scale),
            "p90_ttft_ms": pct([x["request"]["ttft_ms"] for x in r], 90) * scale,
            "hit_pct": 100 * sum(x["request"]["cached_tokens"] for x in r) / sum(x["request"]["input_tokens"] for x in r),
            "reprefill_tokens": re}


if __name__ == "__main__":
    print(json.dumps(figures(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)))
