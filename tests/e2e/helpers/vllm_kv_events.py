#!/usr/bin/python3
"""An independent vLLM KV event publisher/recorder for the e2e tests (python3-zmq, python3-msgpack).

Written from vLLM's documented event classes (examples/online_serving/kv_events_subscriber.py,
vllm/distributed/kv_events.py), not from dyn's code: msgspec structs with array_like=True and
tag=True encode as [ClassName, field...]; a batch is [ts, events] (data_parallel_rank appended when
set). The publisher sends [topic, seq as 8 bytes big-endian, payload] on a PUB socket and answers
replay requests on a ROUTER socket: [identity, "", start_seq] -> one [identity, "", seq, payload]
per buffered batch with seq >= start_seq, then [identity, "", -1 as 8 signed bytes, ""].

Commands:
  publish ENDPOINT_FILE   bind PUB and ROUTER on 127.0.0.1 (free ports, or the ones named by
                          $PUB_ADDR/$REPLAY_ADDR), write {"endpoint", "replay_endpoint"} to the
                          file, then read one JSON command per stdin line and print "ok SEQ":
                            {"events": [...]}             publish a batch
                            {"events": [...], "hide": 1}  buffer it for replay but do not send it
                            {"events": [...], "lose": 1}  neither send nor buffer it (a lost batch)
                            {..., "encoding": "array" | "map-events" | "map"}  in that layout
                          (array: older vLLM; map-events: events as tagged maps; map: the batch
                          too, current vLLM)
                          event: {"type": "BlockStored", "block_hashes", "parent_block_hash",
                          "token_ids" (or "text": its 4-byte tokens), "block_size", "lora_id",
                          "medium", "lora_name", "group_idx", "kv_cache_spec_kind"} |
                          {"type": "BlockRemoved", "block_hashes", "medium", "group_idx"}
                          | {"type": "AllBlocksCleared"}; or {"type": "StoreText", "text",
                          "block_size", "ids": [...], other BlockStored fields?} = BlockStored of
                          the text's complete blocks; any other type is written as given.
  fetch REPLAY_ENDPOINT   print "SEQ HEX_PAYLOAD" for every batch the replay socket holds
  reencode                for each "SEQ HEX" line: decode (either layout), rebuild the events as the
                          documented classes and encode them again in the same layout; print
                          "SEQ HEX" and the decoded JSON {"layout", "data_parallel_rank", "events"}
  tokens TEXT             print the 4-byte token ids of TEXT (dyn's SPEC 4.2 convention)
"""
import json
import sys
import time

import msgpack
import zmq


# vLLM's classes, as documented (field order is the wire order; `defaults` are the fields declared
# with a default, which msgspec's omit_defaults leaves out of a map when unset). The first six
# BlockStored fields are the older classes (dyn-mocker --kv-events-encoding array); the rest came later
# (vllm/distributed/kv_events.py): lora_name, extra_keys, group_idx, kv_cache_spec_kind/_sliding_window.
class BlockStored:
    fields = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
              "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window")
    older = 6
    defaults = ("extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window")


class BlockRemoved:
    fields = ("block_hashes", "medium", "group_idx")
    older = 2
    defaults = ("group_idx",)


class AllBlocksCleared:
    fields = ()
    older = 0
    defaults = ()


CLASSES = {c.__name__: c for c in (BlockStored, BlockRemoved, AllBlocksCleared)}


def encode_event(ev, layout="array"):
    """array: [tag, fields...] up to the last field set, at least the older classes' fields;
    map-events / map: {"type": tag, field: value}, fields with a default only when set.
    A type vLLM does not have (a newer engine's event) is written as given: [type, values...]."""
    if ev["type"] not in CLASSES:
        rest = {k: v for k, v in ev.items() if k != "type"}
        return [ev["type"]] + list(rest.values()) if layout == "array" else dict(ev)
    cls = CLASSES[ev["type"]]
    if layout == "array":
        n = cls.older
        for i, f in enumerate(cls.fields):
            if ev.get(f) is not None:
                n = max(n, i + 1)
        return [cls.__name__] + [ev.get(f) for f in cls.fields[:n]]
    out = {"type": cls.__name__}
    for f in cls.fields:
        if f in cls.defaults and ev.get(f) is None:
            continue
        out[f] = ev.get(f)
    return out


def encode_batch(ts, events, dp_rank=None, layout="array"):
    evs = [encode_event(e, layout) for e in events]
    if layout == "map":
        body = {"ts": float(ts), "events": evs}
        if dp_rank is not None:
            body["data_parallel_rank"] = dp_rank
    else:
        body = [float(ts), evs]
        if dp_rank is not None:
            body.append(dp_rank)
    return msgpack.packb(body, use_bin_type=True)


def decode_batch(payload):
    """(ts, events, dp_rank, layout): either documented layout, array (older vLLM) or map (current)."""
    body = msgpack.unpackb(payload, raw=False)
    if isinstance(body, dict):
        ts, events, dp, layout = body["ts"], body["events"], body.get("data_parallel_rank"), "map"
    else:
        ts, events, *rest = body
        dp, layout = (rest[0] if rest else None), "array"
    out = []
    for e in events:
        if isinstance(e, dict):
            d = dict(e)
        else:
            cls = CLASSES[e[0]]
            d = {"type": e[0]}
            for f, v in zip(cls.fields, e[1:]):
                d[f] = v
        out.append(d)
    if any(isinstance(e, dict) for e in events) and layout == "array":
        layout = "map-events"
    return ts, out, dp, layout


def text_tokens(text):
    b = text.encode("utf-8")
    b += b"\0" * (-len(b) % 4)
    return [int.from_bytes(b[i:i + 4], "little") for i in range(0, len(b), 4)]


def expand(ev):
    if "text" in ev and ev["type"] == "BlockStored":  # token_ids from a text (case files)
        ev = dict(ev, token_ids=text_tokens(ev.pop("text")))
    if ev["type"] != "StoreText":
        return ev
    bs = ev["block_size"]
    toks = text_tokens(ev["text"])
    n = len(toks) // bs
    ids = ev["ids"][:n]
    out = {k: v for k, v in ev.items() if k not in ("text", "ids")}  # other fields as given
    out.update({"type": "BlockStored", "block_hashes": ids, "parent_block_hash": ev.get("parent_block_hash"),
                "token_ids": toks[:len(ids) * bs], "block_size": bs, "lora_id": ev.get("lora_id"),
                "medium": ev.get("medium", "GPU")})
    return out


def publish(endpoint_file):
    import os
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    rep = ctx.socket(zmq.ROUTER)
    pub_addr, rep_addr = os.environ.get("PUB_ADDR"), os.environ.get("REPLAY_ADDR")
    if pub_addr:
        pub.bind(pub_addr)
        rep.bind(rep_addr)
    else:
        pub.bind_to_random_port("tcp://127.0.0.1")
        rep.bind_to_random_port("tcp://127.0.0.1")
    ep = {"endpoint": pub.getsockopt_string(zmq.LAST_ENDPOINT),
          "replay_endpoint": rep.getsockopt_string(zmq.LAST_ENDPOINT)}
    with open(endpoint_file + ".tmp", "w") as f:
        json.dump(ep, f)
    os.rename(endpoint_file + ".tmp", endpoint_file)
    buffer = []  # (seq, payload)
    seq = 0
    poller = zmq.Poller()
    poller.register(rep, zmq.POLLIN)
    stdin = sys.stdin.buffer.raw if hasattr(sys.stdin.buffer, "raw") else sys.stdin.buffer
    poller.register(stdin.fileno(), zmq.POLLIN)
    pending = b""
    while True:
        for sock, _ in poller.poll(50):
            if sock is rep:
                frames = rep.recv_multipart()
                if len(frames) != 3:
                    continue
                ident, _, start = frames
                start = int.from_bytes(start, "big")
                for s, p in buffer:
                    if s >= start:
                        rep.send_multipart([ident, b"", s.to_bytes(8, "big"), p])
                rep.send_multipart([ident, b"", (-1).to_bytes(8, "big", signed=True), b""])
            else:
                chunk = os.read(stdin.fileno(), 65536)
                if not chunk:
                    return
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if not line.strip():
                        continue
                    cmd = json.loads(line)
                    payload = encode_batch(cmd.get("ts", time.time()), [expand(e) for e in cmd["events"]],
                                           layout=cmd.get("encoding", "array"))
                    if not cmd.get("lose"):
                        buffer.append((seq, payload))
                    if not cmd.get("hide") and not cmd.get("lose"):
                        pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])
                    print("ok", seq, payload.hex(), flush=True)
                    seq += 1


def fetch(replay_endpoint):
    ctx = zmq.Context()
    d = ctx.socket(zmq.DEALER)
    d.connect(replay_endpoint)
    d.send_multipart([b"", (0).to_bytes(8, "big")])
    while d.poll(5000):
        _, s, p = d.recv_multipart()
        s = int.from_bytes(s, "big", signed=True)
        if s == -1:
            return
        print(s, p.hex())
    sys.exit("no answer from " + replay_endpoint)


def reencode():
    for line in sys.stdin:
        s, h = line.split()
        ts, events, dp, layout = decode_batch(bytes.fromhex(h))
        print(s, encode_batch(ts, events, dp, layout).hex())
        print(json.dumps({"layout": layout, "data_parallel_rank": dp, "events": events}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "publish":
        publish(sys.argv[2])
    elif cmd == "fetch":
        fetch(sys.argv[2])
    elif cmd == "reencode":
        reencode()
    elif cmd == "tokens":
        print(json.dumps(text_tokens(sys.argv[2])))
