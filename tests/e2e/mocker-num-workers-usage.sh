# Shows that dyn-mocker --num-workers refuses what several engines in one process cannot do
# (usage errors, exit 2, naming the flag): no engines at all, HTTP ports counted past 65535 from
# --port, and a KV event address the engines cannot each bind (an ipc:// path, a tcp port counted
# past 65535); tcp://HOST:* and a numbered tcp port are fine.
for args in "--num-workers 0" "--num-workers 3 --port 65534" \
  "--num-workers 2 --kv-events-endpoint ipc:///tmp/dyn-mocker-kv" \
  "--num-workers 2 --kv-events-endpoint tcp://127.0.0.1:65535" \
  "--num-workers 2 --kv-events-endpoint tcp://127.0.0.1:* --kv-events-replay-endpoint ipc:///tmp/dyn-r"; do
  echo "== dyn-mocker $args"
  # shellcheck disable=SC2086
  expect_status 2 dyn-mocker $args 2>&1 | head -1
done
