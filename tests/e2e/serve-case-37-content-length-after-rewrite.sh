# Shows case 37 (radixark/miles#851) and RFC 9110 7.6.1 hop-by-hop headers through dyn-route serve
# and dyn-trace capture: the router adds stream_options.include_usage to a streaming chat request
# (the body grows) and the worker still gets exactly one Content-Length equal to the bytes sent and
# no Transfer-Encoding, for a small request and a 300 KB one with multi-byte UTF-8 text. The client
# gets one framing header per response (chunked for streams, Content-Length otherwise, never both),
# the 400 error body intact. Headers that a Connection header names (X-Internal-Hop from the
# worker, X-Client-Hop from the client), Keep-Alive and Proxy-Authorization never cross; an
# end-to-end header (X-End-To-End) does.
source "$DYN_ROOT/tests/e2e/helpers/servers.sh"
c="$DYN_ROOT/tests/fixtures/cases/37-content-length-after-rewrite"
python3 - <<'PY'
import json
text = "Grüße, 日本語のテキスト, ünïcödé " * 8000
text = text[: len(text)]
body = {"model": "m", "stream": True, "max_tokens": 8, "messages": [{"role": "user", "content": text}]}
open("req-stream-big.json", "w", encoding="utf-8").write(json.dumps(body, ensure_ascii=False))
PY
echo "big request: $(wc -c <req-stream-big.json) bytes"
start_scripted w "$c/script.json"
start_router r --worker "$w_url"
start_capture cap --upstream "$w_url"
for front in r cap; do
  url="${front}_url"
  : >w.requests.jsonl
  for req in req-stream req-stream-big req-400 req-plain; do
    f="$c/$req.json"; [[ -f $f ]] || f=$req.json
    curl -sS -N -D hdr.txt -o body.txt -H 'content-type: application/json' -H 'Connection: keep-alive, X-Client-Hop' \
      -H 'X-Client-Hop: client-secret' -H 'Proxy-Authorization: Basic cHJveHk6c2VjcmV0' \
      "${!url}/v1/chat/completions" --data-binary @"$f"
    h=$(tr -d '\r' <hdr.txt)
    status=$(head -1 <<<"$h" | awk '{print $2}')
    te=$(grep -ci '^transfer-encoding: chunked' <<<"$h")
    cl=$(grep -ci '^content-length:' <<<"$h")
    # (The router's own Keep-Alive header is its hop's; the worker's said timeout=2.)
    hop=$(grep -ci -e '^x-internal-hop:' -e '^keep-alive: timeout=2' -e '^proxy-authenticate:' <<<"$h")
    e2e=$(grep -ci '^x-end-to-end: kept' <<<"$h")
    intact=""
    [[ $req == req-400 ]] && intact=", error body intact: $(cmp -s body.txt "$c/error-body.json" && echo yes || echo no)"
    echo "$front $req: client got $status, chunked $te, content-length $cl, hop-by-hop $hop, end-to-end $e2e$intact"
  done
  jq -c '{target, cl: ([.headers[] | select(.[0] | ascii_downcase == "content-length")] | length),
          te: ([.headers[] | select(.[0] | ascii_downcase == "transfer-encoding")] | length),
          length_matches: (.content_length == .body_bytes),
          hop: ([.headers[] | select(.[0] | ascii_downcase | IN("x-client-hop", "proxy-authorization", "keep-alive"))] | length),
          include_usage: (.body.stream_options.include_usage // .body_include_usage)}' w.requests.jsonl |
    grep -vE '"target":"/(health|metrics)"' | sed "s/^/$front worker got /"
done
