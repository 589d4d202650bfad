# Sourced by bench/kv-tiers.sh, bench/kv-hints.sh, bench/kv-hints-live.sh and bench/sim-scale.sh (needs jq).
# copies FILE N: the workload N times over, copy c with its own sessions, request ids and hash ids
# (every id + c x (largest + 1)): N times the independent sessions, arriving on the same schedule.
# Rows without a session (the Mooncake trace's) stay without one. A fractional N (12.5) makes the
# last copy of every 1/frac-th row, spread evenly over the file (row i kept when
# floor(i x frac) > floor((i - 1) x frac)): N times the load on the same schedule.
copies() {
  local off
  off=$(jq -s '[.[].hash_ids[]] | max + 1' "$1")
  jq -c --argjson n "$2" --argjson off "$off" '. as $r | input_line_number as $i
    | ($n | floor) as $whole | ($n - $whole) as $frac
    | range($n | ceil) as $c | select($c < $whole or (($i * $frac) | floor) > ((($i - 1) * $frac) | floor)) | $r
    | if .session_id then .session_id += "~\($c)" else . end | .hash_ids |= map(. + $c * $off)
    | if .parent_session_id then .parent_session_id += "~\($c)" else . end
    | if .request_id then .request_id += "~\($c)" else . end
    | if .wait_for then .wait_for |= map(. + "~\($c)") else . end' "$1"
}
# workload_size FILE TB: "W B" for a workload whose hash ids cover TB tokens each: W its distinct
# prompt blocks at the engines' 64-token blocks (the working set), B its largest request's blocks
# (prompt + output), which one worker's G1 must hold.
workload_size() {
  jq -s -r --argjson k $(($2 / 64)) '"\([.[].hash_ids[]] | unique | length * $k) \(
    [.[] | (.input_length + (.output_length // 0) + 63) / 64 | floor] | max)"' "$1"
}
