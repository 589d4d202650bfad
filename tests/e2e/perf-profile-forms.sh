# Shows that every user of the engine model takes --perf-profile in the forms people have and that
# without it nothing changes: dyn-replay --sim reads Dynamo's profiler output as a directory and
# as its two raw_data.npz files (the same timings either way), the mocker's converted npz and
# dyn's JSON profile; each profile changes the simulated times; dyn-route decide's end estimate
# and dyn-trace sessionize's service time follow the profile too; the default (no profile) is the
# polynomial, unchanged.
set -u
shipped="$DYN_DATA/silicon/profiles/h200_llama31_8b_fp8_tp1_vllm"
pair="$shipped/selected_prefill_interpolation/raw_data.npz,$shipped/selected_decode_interpolation/raw_data.npz"
# A small workload: 40 requests 50 ms apart, growing prompts, no shared prefix.
for i in $(seq 0 39); do
  isl=$((512 + i * 256))
  echo "{\"timestamp\": $((i * 50)), \"input_length\": $isl, \"output_length\": 64, \"hash_ids\": [$(seq -s, $((i * 100 + 1)) $((i * 100 + (isl + 511) / 512)))]}"
done > w.jsonl
sim() { dyn-replay w.jsonl --sim --sim-epoch-unix-ms 0 "$@" 2>sim.err || cat sim.err >&2; }
mean_ttft() { jq -s 'map(.request.ttft_ms) | add / length | . * 100 | round / 100'; }
echo "== default: the polynomial"
sim | mean_ttft
echo "== the shipped profiler output: directory and file pair give the same rows"
sim --perf-profile "$shipped" > dir.jsonl
sim --perf-profile "$pair" > pair.jsonl
cmp -s dir.jsonl pair.jsonl && echo "same rows"
mean_ttft < dir.jsonl
echo "== the mocker's converted npz (written here with Python's zipfile: prefill 10 ms + 0.01 ms/token, decode 5 ms)"
/usr/bin/python3 - <<'PY'
import struct, zipfile
def npy(values, shape):
    head = "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % (str(tuple(shape)) if len(shape) != 1 else "(%d,)" % shape[0])
    head += " " * ((64 - (10 + len(head) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + struct.pack("<%dd" % len(values), *values)
with zipfile.ZipFile("conv.npz", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("prefill_isl.npy", npy([0, 10000], [2]))
    z.writestr("prefill_ttft_ms.npy", npy([10, 110], [2]))
    z.writestr("decode_active_kv_tokens.npy", npy([0, 1e6], [2]))
    z.writestr("decode_context_length.npy", npy([1, 1e5], [2]))
    z.writestr("decode_itl.npy", npy([5, 5, 5, 5], [2, 2]))
PY
sim --perf-profile conv.npz > conv.jsonl
# the first request's TTFT is its own prefill step: 10 + 0.01 x 512 = 15.12 ms
jq -s -c '.[] | select(.request.request_id == "row-0") | .request.ttft_ms' conv.jsonl
mean_ttft < conv.jsonl
echo "== dyn's JSON profile"
cat > p.json <<'JSON'
{"schema": "dyn.perf_profile.v1", "model": "m", "gpu": "g", "tp": 1, "engine": "e", "engine_version": "1",
 "step_ms": {"base": 20, "prefill_step": 0, "prefill_token": 0.01, "prefill_attention": 0, "prefill_seq": 0,
             "decode_seq": 0, "kv_token": 0}}
JSON
# the first request's TTFT: 20 + 0.01 x 512 = 25.12 ms
sim --perf-profile p.json > json.jsonl
jq -s -c '.[] | select(.request.request_id == "row-0") | .request.ttft_ms' json.jsonl
mean_ttft < json.jsonl
echo "== dyn-route decide: the end estimate follows the profile (its 20 ms steps keep requests in flight"
echo "   longer than the polynomial's ~6 ms: more decode blocks loaded on the workers), without and with"
decide() {
  dyn-route decide w.jsonl --workers 3 --router-mode kv --explain "$@" 2>/dev/null |
    jq -s '[.[].dyn.explain.workers[] | select(.worker == 0) | .decode_blocks] | add'
}
decide
decide --perf-profile p.json
echo "== dyn-trace sessionize: delays from the profile's service time"
printf '%s\n' '{"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}' \
  '{"timestamp": 5000, "input_length": 1536, "output_length": 10, "hash_ids": [1, 2, 3]}' > t.jsonl
dyn-trace sessionize t.jsonl 2>/dev/null | jq -c 'select(.delay) | .delay'
dyn-trace sessionize t.jsonl --perf-profile p.json 2>/dev/null | jq -c 'select(.delay) | .delay'
