#!/usr/bin/env bash
# Prefix index throughput (issue 54), what Dynamo's lib/kv-router/benches/mooncake_bench.rs does
# for its indexers (docs/blogs/flash-indexer: 170M ops/s on 24 cores, about 7M per core): the
# Mooncake conversation trace is partitioned over workers at random (seeded), each worker's
# requests run through dyn's engine model (lib/dyn/engine, 16,384 blocks a worker, on a virtual
# clock) to get its KV events, and the copies of that fleet (distinct workers and hashes) are
# merged into one timeline of operations: a lookup (PrefixIndex::overlaps of a request's
# blocks, at its arrival) or a KV event (a stored / removed batch from one worker, at the end of
# the step that made it; a worker's events of one step are applied in one PrefixIndex::apply_events
# call, as its KV event batch arrives, and still count one op each). bench/index_throughput_bench replays it against one kv::PrefixIndex at
# rising compression until achieved ops/s stop tracking offered (below 90 %); each step is the
# median of PASSES replays. Each timed replay starts from an empty index whose tables have their
# working size (filled and cleared once before, as a running router's are; `--cold 1` starts from a
# new index). One thread = one core (it spins between due times); T threads (default 2, this
# machine's cores) share the index under one mutex, as dyn-route's router serializes index access
# under its lock, so they add contention, not capacity. The per-core figure is the highest median
# of operations per CPU-second of the replaying thread: at saturation the core's throughput, which
# preemption on a shared machine does not change (wall-clock achieved rates are printed beside).
# Outputs, not only counts: every lookup's overlaps (per worker) equal a naive reference index's
# (per-worker hash sets, LRU lists and TTL in approximate mode), and every timed single-thread
# replay reproduces that pass's checksum of overlaps.
# The approximate index (no events: insert() with 120 s TTL and a 16,384-block LRU budget, what
# dyn-route runs without --worker-kv-events) is measured the same way (no goal).
# Anchors: route_core_bench on the same trace (the whole routing core, some 2M index ops/s); and
# this machine's memory (index_throughput_bench's "anchor memory" line): random updates of 16-byte
# cells in a table of the event-fed index's size, prefetched as the index prefetches, in runs of
# a lookup's or an event batch's blocks, and the ops/s that alone would allow at the timeline's
# blocks per op when ops overlap; and the memory's latency (a pointer chase through that table),
# which an op applied one at a time (its cells loading only once it starts, as the router applies
# them) waits at least once: 1e9 / latency ops/s is the most one core can do that way.
# Default fleet: 8 workers x 8 copies (64 workers, 375k ops a replay); `--copies 1` is 8 workers.
# Goal: event-fed, one thread: at least 7,000,000 ops/s per core.
# Ends with one verdict line: PASS, or MISS naming the goal (exit 1).
# Usage: bench/index-throughput.sh [BUILD_DIR] [PASSES] [extra index_throughput_bench flags]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
passes="${2:-3}"
shift $(($# > 2 ? 2 : $#))
tmp="$(mktemp -d /tmp/dyn-bench-index.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
gzip -dcf "$root/data/mooncake-fast25/conversation_trace.jsonl.gz" >"$tmp/trace.jsonl"

"$build/bench/route_core_bench" "$tmp/trace.jsonl" 3 8 | sed 's/^/anchor route_core_bench: /'
"$build/bench/index_throughput_bench" "$tmp/trace.jsonl" --passes "$passes" "$@" | tee "$tmp/out"

# Both modes' checks ran and found every lookup equal to the reference's.
[[ $(grep -c '^check .*, 0 mismatches$' "$tmp/out") == 2 ]] || { echo "MISS lookups equal the reference index's"; exit 1; }
rate=$(sed -n 's/^RESULT event_fed ops_per_core=\([0-9]*\)$/\1/p' "$tmp/out")
[[ -n $rate ]] || { echo "MISS bench produced no result"; exit 1; }
if ((rate >= 7000000)); then
  echo PASS
else
  echo "MISS event-fed index >= 7000000 ops/s per core (got $rate)"
  exit 1
fi
