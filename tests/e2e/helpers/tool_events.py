#!/usr/bin/python3
"""An independent harness for the tool-events tests: publishes tool events as Dynamo documents
them (docs: "Request Replay Tracing", optional harness tool events): a ZMQ PUSH socket sending
multipart [topic, seq as 8 bytes big-endian, msgpack(record)], the record a map
{schema, event_type, event_time_unix_ms, session_id, parent_session_id?, tool{...}}.

  tool_events.py send ENDPOINT < events.jsonl   one JSON record per line, sent in order
     a line {"raw": [frame, ...]} sends those frames as given (hex strings), for malformed input
Written from the documented format only (python3-zmq, python3-msgpack), not from dyn's code.
"""
import json
import struct
import sys
import time

import msgpack
import zmq


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "send":
        sys.exit(__doc__)
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 5000)
    push.connect(sys.argv[2])
    seq = 0
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        rec = json.loads(line)
        if "raw" in rec:
            push.send_multipart([bytes.fromhex(f) for f in rec["raw"]])
        else:
            push.send_multipart([b"agent-tool-events", struct.pack(">Q", seq), msgpack.packb(rec, use_bin_type=True)])
            seq += 1
    push.close()  # waits up to LINGER for the frames to leave
    ctx.term()


if __name__ == "__main__":
    main()
