# Shows that when the trace file system fills up (a 256 KiB tmpfs filled with a file) dyn-route
# serve keeps serving every request, says so once on stderr with the path and the OS error, counts
# the rows it drops (dyn_trace_rows_dropped_total), and resumes writing once space is back; the
# segment stays readable (gzip -t: the partial member of the failed write is cut off). Needs root
# for mount; exits 77 (skipped) where mounting is not permitted.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
mkdir -p fs
if ! mount -t tmpfs -o size=256k tmpfs fs 2>/dev/null; then
  echo "cannot mount a tmpfs here (needs root)" >&2
  exit 77
fi
trap '_dyn_cleanup; umount fs 2>/dev/null' EXIT
start_mocker w0
start_router r --worker "$w0_url" --request-trace --request-trace-file-path "$PWD/fs/tr" \
  --request-trace-file-buffer-bytes 1 --request-trace-file-flush-interval-ms 60000
send() {
  local i code ok=0
  for i in $(seq 1 "$1"); do
    code=$(curl -sS -o /dev/null -w '%{http_code}' -H 'content-type: application/json' "$r_url/v1/chat/completions" \
      -d '{"model":"mock-model","max_tokens":2,"messages":[{"role":"user","content":"hello"}]}')
    [[ $code == 200 ]] && ok=$((ok + 1))
  done
  echo "$ok/$1 answered 200"
}
echo "before the disk fills: $(send 3)"
dd if=/dev/zero of=fs/filler bs=4k 2>/dev/null
# The trace file's last page still has room for a few rows; 30 rows are sure to overflow it.
echo "disk full: $(send 30)"
dropped=$(curl -sS "$r_url/metrics" | awk '/^dyn_trace_rows_dropped_total/{print $2}')
echo "rows dropped: $([[ $dropped -gt 0 ]] && echo yes || echo no)"
rm fs/filler
echo "space back: $(send 2)"
stop "$r_pid"
echo "error lines on stderr: $(grep -c 'trace writer.*No space left on device' r.log)"
echo "recovery note names the same count: $(grep -c "writes succeed again; $dropped trace rows were dropped" r.log)"
gzip -t fs/tr.*.jsonl.gz && echo "gzip -t: ok"
rows=$(dyn-trace cat fs/tr.*.jsonl.gz | wc -l)
echo "rows on disk + rows dropped = 35 requests: $([[ $((rows + dropped)) == 35 ]] && echo yes || echo "no ($rows + $dropped)")"
