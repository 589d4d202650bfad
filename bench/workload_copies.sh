# Sourced by bench/kv-tiers.sh and bench/kv-hints.sh (needs jq).
# copies FILE N: the workload N times over, copy c with its own sessions, request ids and hash ids
# (every id + c x (largest + 1)): N times the independent sessions, arriving on the same schedule.
copies() {
  local off
  off=$(jq -s '[.[].hash_ids[]] | max + 1' "$1")
  jq -c --argjson n "$2" --argjson off "$off" '. as $r | range($n) as $c | $r
    | .session_id += "~\($c)" | .hash_ids |= map(. + $c * $off)
    | if .parent_session_id then .parent_session_id += "~\($c)" else . end
    | if .request_id then .request_id += "~\($c)" else . end
    | if .wait_for then .wait_for |= map(. + "~\($c)") else . end' "$1"
}
