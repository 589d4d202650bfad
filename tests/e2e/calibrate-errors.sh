# Shows that dyn-bench calibrate and fidelity refuse what they cannot use, with the reason: a
# selection matching several configurations is an error listing each by the columns that differ
# (exit 3), a selection of fewer than three ISL/OSL pairs cannot be held out pair by pair (exit 3),
# a --where that is not COLUMN=VALUE or names no column is a usage error (exit 2), and a timing
# profile that cannot describe a step is refused naming the file and the key (exit 3), by
# fidelity and by dyn-replay --sim alike.
set -u
cp "$DYN_DATA/silicon/aic_silicon_subset.csv" silicon.csv
csv=silicon.csv
echo "== several configurations match: listed"
expect_status 3 dyn-bench calibrate "$csv" --where backend=vllm --where model_path=Qwen/Qwen3-32B \
  --where precision= 2>err
cat err
echo "== fewer than three ISL/OSL pairs (H200 TP8 has two)"
expect_status 3 dyn-bench calibrate "$csv" --where system=h200_sxm --where tp_size=8 2>err
cat err
echo "== fidelity: several configurations"
expect_status 3 dyn-bench fidelity "$csv" --where tp_size=8 2>err
head -1 err
echo "== --where without '=' and with an unknown column"
expect_status 2 dyn-bench calibrate "$csv" --where tp_size 2>err
cat err
expect_status 2 dyn-bench fidelity "$csv" --where flavour=x 2>err
cat err
echo "== a profile with a non-monotonic axis, as JSON tables"
cat > bad.json <<'JSON'
{"schema": "dyn.perf_profile.v1", "model": "m", "gpu": "g", "tp": 1, "engine": "e", "engine_version": "1",
 "prefill": {"tokens": [100, 50], "ms": [10, 20]},
 "decode": {"kv_tokens": [0, 1000], "context": [100], "ms": [5, 6]}}
JSON
expect_status 3 dyn-bench fidelity "$csv" --where system=h200_sxm --where tp_size=1 --perf-profile bad.json 2>err
cat err
echo '{"timestamp": 0, "input_length": 64, "output_length": 4}' > w.jsonl
expect_status 3 dyn-replay w.jsonl --sim --perf-profile bad.json 2>err
cat err
echo "== a profile missing its GPU name"
jq -c 'del(.gpu) | .prefill.tokens = [50, 100]' bad.json > nogpu.json
expect_status 3 dyn-replay w.jsonl --sim --perf-profile nogpu.json 2>err
cat err
echo "== a file that is not a zip"
echo "not a zip" > junk.npz
expect_status 3 dyn-mocker --port 0 --perf-profile junk.npz 2>err
cat err
