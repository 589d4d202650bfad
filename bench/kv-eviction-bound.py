#!/usr/bin/env python3
"""Per-worker bounds for session-aware KV eviction (issue 18, SPEC 8 --kv-eviction).

Replays the request_end rows a `dyn-replay --sim ... -o FILE` run wrote (their worker, timing,
hash_ids and session) through prefix caches in the model of `dyn-replay --reference`: a request
pins its prompt's full engine blocks from request_received to its end, its hit is its leading
blocks present at its start, and a missing block takes a free block or evicts an unpinned one.
Each policy runs twice: per worker (BLOCKS each, the engines' split) and pooled (workers x
BLOCKS, the yardstick). Policies:
  lru      least recently released first, a request's deeper blocks first (the engines' rule)
  session  blocks a session owns go first once its last turn has ended, then lru (SPEC 8)
  mru      session, then idle sessions most recently paused first (whole sessions, leaf first),
           blocks shared by sessions (a system prompt) last
  belady   the block whose next use (on the same cache) lies furthest ahead first: the bound no
           eviction rule on those caches can pass
The per-worker belady figure is how far clairvoyant eviction on each separate worker can go; it
is optimistic for real engines, which also hold decode and partial blocks and pin a prompt only
from admission.
Usage: bench/kv-eviction-bound.py TRACE --blocks N [--block-size 64] [--policies lru,belady]
"""
import argparse
import collections
import gzip
import heapq
import json

NEVER = float("inf")


def load(path, block_size):
    """request_end rows -> requests with engine-block identities (prefix-chained)."""
    rows = []
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        for line in f:
            o = json.loads(line)
            if o.get("event_type") != "request_end" or o.get("dyn", {}).get("status") != "ok":
                continue
            req, dyn = o["request"], o["dyn"]
            ids, wbs = dyn.get("hash_ids", []), dyn.get("block_size", block_size)
            blocks, h = [], 0
            for j in range(req["input_tokens"] // block_size):
                k = j * block_size // wbs
                h = hash((h, ids[k] if k < len(ids) else -1 - k, (j * block_size % wbs) // block_size))
                blocks.append(h)
            start = req["request_received_ms"]
            rows.append(dict(start=start, end=start + req["total_time_ms"], blocks=blocks, inp=req["input_tokens"],
                             worker=req["worker"]["decode_worker_id"], turn=dyn.get("turn", 0),
                             sess=o.get("agent_context", {}).get("session_id", "")))
    last = collections.defaultdict(int)
    for r in rows:
        last[r["sess"]] = max(last[r["sess"]], r["turn"])
    for r in rows:
        r["final"] = bool(r["sess"]) and r["turn"] == last[r["sess"]]
    return rows


def hit_tokens(reqs, capacity, block_size, policy):
    reqs = sorted(reqs, key=lambda r: r["start"])
    nxt = None
    if policy == "belady":  # rank of each block's next use, from one backward pass
        later, nxt = {}, [None] * len(reqs)
        for rank in range(len(reqs) - 1, -1, -1):
            nxt[rank] = [later.get(h, NEVER) for h in reqs[rank]["blocks"]]
            for h in reqs[rank]["blocks"]:
                later[h] = rank
    blocks = {}  # hash -> [refs, depth, owner (None = shared), key while unpinned, next use]
    heap, ends, held = [], [], [0] * len(reqs)
    finished, paused = set(), {}

    def key(b, t):
        depth, owner, nu = b[1], b[2], b[4]
        if policy == "lru":
            return (t, -depth)
        if policy == "belady":
            return (-nu, -depth)
        if owner is not None and owner in finished:
            return (0, t, -depth)
        if policy == "session" or owner is None:
            return (2, t, -depth)
        return (1, -paused[owner], -depth)  # mru

    def release(i, t):
        r = reqs[i]
        if r["sess"]:
            paused[r["sess"]] = t
            if r["final"]:
                finished.add(r["sess"])
        for h in reversed(r["blocks"][: held[i]]):
            b = blocks[h]
            b[0] -= 1
            if b[0] == 0:
                b[3] = key(b, t)
                heapq.heappush(heap, (b[3], h))

    total = 0
    for rank, r in enumerate(reqs):
        while ends and ends[0][0] <= r["start"]:
            t, i = heapq.heappop(ends)
            release(i, t)
        hit, leading, n = 0, True, 0
        for j, h in enumerate(r["blocks"]):
            nu = nxt[rank][j] if nxt else NEVER
            b = blocks.get(h)
            if b is not None:
                hit += leading
                b[0] += 1
                b[3], b[4] = None, nu
                if b[2] != (r["sess"] or None):
                    b[2] = None
                n = j + 1
                continue
            leading = False
            if len(blocks) >= capacity:
                victim = None
                while heap:
                    k, v = heapq.heappop(heap)
                    if v in blocks and blocks[v][0] == 0 and blocks[v][3] == k:
                        victim = v
                        break
                if victim is None:
                    break  # every block pinned: the rest of this prompt is not cached
                del blocks[victim]
            blocks[h] = [1, j, r["sess"] or None, None, nu]
            n = j + 1
        held[rank] = n
        total += min(hit * block_size, r["inp"])
        heapq.heappush(ends, (max(r["end"], r["start"]), rank))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--blocks", type=int, required=True, help="KV blocks per worker")
    ap.add_argument("--block-size", type=int, default=64, help="engine block size in tokens")
    ap.add_argument("--policies", default="lru,session,mru,belady")
    a = ap.parse_args()
    rows = load(a.trace, a.block_size)
    inp = sum(r["inp"] for r in rows) or 1
    workers = sorted({r["worker"] for r in rows})
    print(f"{len(rows)} requests on {len(workers)} workers x {a.blocks} blocks")
    print(f"{'policy':8} {'per-worker %':>12} {'pooled %':>9}")
    for p in a.policies.split(","):
        per = sum(hit_tokens([r for r in rows if r["worker"] == w], a.blocks, a.block_size, p) for w in workers)
        pooled = hit_tokens(rows, a.blocks * len(workers), a.block_size, p)
        print(f"{p:8} {100 * per / inp:12.2f} {100 * pooled / inp:9.2f}")


if __name__ == "__main__":
    main()
