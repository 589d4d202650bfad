# Shows that dyn-mocker streams chat and completions (one SSE event per token, a final usage
# chunk with empty choices), reports cached tokens for a repeated prompt, answers bad requests
# with 400 and an OpenAI-style error, serves /health, /v1/models and /metrics, and exits 0 on SIGTERM.
set -u
dyn-mocker --port 0 --port-file port --speedup-ratio 50 2>mocker.err &
pid=$!
for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat port)"
prompt=$(printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 20))
echo "== chat stream"
curl -sN "$url/v1/chat/completions" -H 'content-type: application/json' \
  -d "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}]}" \
  | sed -n 's/^data: //p' | while read -r l; do
      if [[ $l == "[DONE]" ]]; then echo "[DONE]"; else echo "$l" | jq -c '{o:.object,c:.choices,u:.usage}'; fi
    done
echo "== repeated prompt (completions, not streamed): cached tokens on the second request"
for i in 1 2; do
  curl -s "$url/v1/completions" -d "{\"prompt\":\"$prompt\",\"max_tokens\":3}" | jq -c '{text:.choices[0].text,usage}'
done
echo "== completions stream"
curl -sN "$url/v1/completions" -d '{"prompt":"hi","max_tokens":2,"stream":true}' | sed -n 's/^data: //p' \
  | while read -r l; do [[ $l == "[DONE]" ]] && echo "[DONE]" || echo "$l" | jq -c '.choices[0]|{text,finish_reason}'; done
echo "== errors"
curl -s -o body -w '%{http_code}\n' "$url/v1/chat/completions" -d '{not json'
jq -c . body
curl -s -o body -w '%{http_code}\n' "$url/v1/chat/completions" -d '{"messages":[]}'
jq -c . body
echo "== health, models, metrics"
curl -s "$url/health" | jq -c .
curl -s "$url/v1/models" | jq -c '[.data[].id]'
curl -s "$url/metrics" | grep -E '^dyn_mocker_(requests_total|cached_tokens_total|request_errors_total|generation_tokens_total)'
kill -TERM $pid
expect_status 0 wait $pid
