# Issue 18: a streamed tool call's first token comes after prefill like any other first token,
# on every API dyn-mocker serves (OpenAI chat, Anthropic messages, Responses). dyn-mocker used to
# send the tool call's name (chat tool_calls header, Anthropic content_block_start tool_use,
# Responses output_item.added function_call) as soon as it accepted the request, so a 20k-token
# tool turn showed a TTFT of ~5 ms while a text turn showed ~420 ms.
#
# For each API, four streamed requests with unique prompts (no prefix-cache hit): a tool turn and
# a text turn with a 20,000-token prompt, a tool turn with a 250-token prompt. The first token is
# the first event that reveals the reply: the tool's name or a piece of text (what dyn-replay and
# dyn-route's response tap time). Checks (timing is only ever a lower bound, so load on the machine
# cannot make them fail): every long-prompt TTFT is at least 80 % of the SPEC 8 prefill time of its
# prompt; the tool turn's TTFT is within 0.67x-1.5x of the text turn's; the long tool turn's TTFT
# exceeds the short one's by at least half the prefill time between them. Figures go to stderr.
set -u
cat >replies.jsonl <<'EOF'
{"match": "TOOL-chat-long", "tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}}
{"match": "TOOL-chat-short", "tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}}
{"match": "TOOL-messages-long", "tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}}
{"match": "TOOL-messages-short", "tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}}
{"match": "TOOL-responses-long", "tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}}
{"match": "TOOL-responses-short", "tool_call": {"name": "read_file", "arguments": {"path": "notes.txt"}}}
{"text": "Here is a plain answer."}
EOF
dyn-mocker --port 0 --port-file port --replies replies.jsonl 2>mocker.err &
pid=$!
for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.05; done
expect_status 0 python3 - "$(cat port)" <<'EOF'
import http.client, json, sys, time

port = int(sys.argv[1])

def prefill_ms(tokens, chunk=8192):
    # SPEC 8: chunked prefill, one step per 8,192-token chunk.
    total = 0.0
    while tokens > 0:
        t = min(tokens, chunk)
        total += 4.209989e-07 * t * t + 1.518344e-02 * t + 16.50142
        tokens -= t
    return total

def body(api, text):
    if api == "chat":
        return "/v1/chat/completions", {"model": "m", "stream": True, "max_tokens": 64,
                                        "messages": [{"role": "user", "content": text}]}
    if api == "messages":
        return "/v1/messages", {"model": "m", "stream": True, "max_tokens": 64,
                                "messages": [{"role": "user", "content": text}]}
    return "/v1/responses", {"model": "m", "stream": True, "max_output_tokens": 64, "input": text}

def reveals(api, ev):
    # The first event that reveals the reply: a tool's name or a piece of text.
    if api == "chat":
        for c in ev.get("choices", []):
            d = c.get("delta", {})
            if d.get("content") or d.get("tool_calls"):
                return True
        return False
    t = ev.get("type")
    if api == "messages":
        return (t == "content_block_start" and ev["content_block"]["type"] == "tool_use") or \
               (t == "content_block_delta")
    return (t == "response.output_item.added" and ev["item"]["type"] == "function_call") or \
           t in ("response.output_text.delta", "response.function_call_arguments.delta")

def ttft(api, text):
    path, b = body(api, text)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.monotonic()
    conn.request("POST", path, json.dumps(b), {"content-type": "application/json"})
    resp = conn.getresponse()
    first, kind = None, None
    while True:
        line = resp.readline()
        if not line:
            break
        now = time.monotonic()
        line = line.decode().strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        ev = json.loads(line[5:])
        if first is None and reveals(api, ev):
            first = (now - t0) * 1000
            kind = "tool" if "read_file" in line else "text"
    conn.close()
    return first, kind

long_tokens, short_tokens = 20000, 250
fails = 0
for api in ("chat", "messages", "responses"):
    res = {}
    for name, tag, tokens in (("tool-long", f"TOOL-{api}-long", long_tokens),
                              ("text-long", f"TEXT-{api}-long", long_tokens),
                              ("tool-short", f"TOOL-{api}-short", short_tokens)):
        # Unique leading bytes: no block of this prompt is cached from an earlier request.
        text = (tag + " " + "x" * (4 * tokens))[: 4 * tokens]
        res[name] = ttft(api, text)
    floor = prefill_ms(long_tokens)
    gap = prefill_ms(long_tokens) - prefill_ms(short_tokens)
    tl, kl = res["tool-long"]
    xl, kx = res["text-long"]
    ts, ks = res["tool-short"]
    print(f"{api}: tool turn {tl:.1f} ms, text turn {xl:.1f} ms, short tool turn {ts:.1f} ms "
          f"(SPEC 8 prefill of 20k tokens {floor:.1f} ms)", file=sys.stderr)
    checks = [
        (f"{api}: the long turns reply with a tool call and with text", kl == "tool" and kx == "text" and ks == "tool"),
        (f"{api}: tool turn TTFT >= 80% of the 20k-token prefill", tl >= 0.8 * floor),
        (f"{api}: text turn TTFT >= 80% of the 20k-token prefill", xl >= 0.8 * floor),
        (f"{api}: tool turn TTFT within 0.67x-1.5x of the text turn's", 0.67 <= tl / xl <= 1.5),
        (f"{api}: long tool turn TTFT - short tool turn TTFT >= half the prefill difference", tl - ts >= 0.5 * gap),
    ]
    for what, ok in checks:
        print(("PASS " if ok else "FAIL ") + what)
        fails += not ok
sys.exit(1 if fails else 0)
EOF
kill -TERM $pid
expect_status 0 wait $pid
