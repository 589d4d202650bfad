#!/usr/bin/env python3
"""Agent sessions for bench/fleet-faults.sh: a client that never retries.

    fleet_client.py --urls URL[,URL...] --sessions N --turns T --max-tokens M --expect FILE --out ROWS.jsonl

Runs N sessions at once, each T streamed chat turns in order (the conversation grows every turn,
header x-session-id), turn t of session s on router URL (s + t) mod len(URLS). Each turn is one
request, never retried. Writes one JSON row per turn: session, turn, status, worker (x-dyn-worker),
complete (a [DONE] after a finish and a usage, no error event), text_ok (the streamed text equals
FILE's text, which dyn-mocker streams for any prompt of M tokens: a duplicated or lost token
changes it), chunks, error.
"""
import argparse
import http.client
import json
import threading
import urllib.parse


def turn(url, session, t, messages, max_tokens, expect):
    u = urllib.parse.urlparse(url)
    row = {"session": session, "turn": t, "status": 0, "worker": None, "complete": False, "text_ok": False,
           "chunks": 0, "error": None}
    body = json.dumps({"model": "mock-model", "stream": True, "stream_options": {"include_usage": True},
                       "max_tokens": max_tokens, "messages": messages})
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        c.request("POST", "/v1/chat/completions", body,
                  {"content-type": "application/json", "x-session-id": session})
        r = c.getresponse()
        row["status"] = r.status
        row["worker"] = r.getheader("x-dyn-worker")
        raw = r.read().decode("utf-8", "replace")
        c.close()
    except Exception as e:  # a broken stream is a client-visible error: counted, never retried
        row["error"] = type(e).__name__ + ": " + str(e)
        return row, ""
    text, finished, usage, done, err = [], False, False, False, False
    for ev in raw.split("\n\n"):
        ev = ev.strip()
        if not ev.startswith("data:"):
            continue
        data = ev[5:].strip()
        if data == "[DONE]":
            done = True
            continue
        try:
            j = json.loads(data)
        except ValueError:
            err = True
            continue
        if "error" in j:
            err = True
            row["error"] = j["error"].get("type")
        for ch in j.get("choices") or []:
            d = ch.get("delta") or {}
            if d.get("content"):
                text.append(d["content"])
                row["chunks"] += 1
            if ch.get("finish_reason"):
                finished = True
        if j.get("usage"):
            usage = True
    got = "".join(text)
    row["complete"] = r.status == 200 and done and finished and usage and not err
    row["text_ok"] = got == expect
    return row, got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", required=True)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--expect", required=True)
    ap.add_argument("--prefix", default="s")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    urls = a.urls.split(",")
    expect = open(a.expect, encoding="utf-8").read()
    rows, lock = [], threading.Lock()

    def session(s):
        sid = f"{a.prefix}{s}"
        msgs = [{"role": "system", "content": "You are a careful coding agent."}]
        for t in range(a.turns):
            msgs.append({"role": "user", "content": f"session {sid} turn {t}: " + "fix the cache please " * 10})
            row, got = turn(urls[(s + t) % len(urls)], sid, t, msgs, a.max_tokens, expect)
            with lock:
                rows.append(row)
            msgs.append({"role": "assistant", "content": got or "(no answer)"})

    threads = [threading.Thread(target=session, args=(s,)) for s in range(a.sessions)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    with open(a.out, "w") as f:
        for r in sorted(rows, key=lambda r: (r["session"], r["turn"])):
            f.write(json.dumps(r, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
