# Shows -o (issue 21.1) on what is not a regular file: a character device (/dev/null stays a
# device), a FIFO (its reader gets the rows; it stays a FIFO), a process substitution
# (-o >(wc -l)), and a symlink (the target is replaced, the link stays a link); a regular file is
# still written through a temporary file renamed into place. Ctrl-C (SIGINT) while -o is being
# written leaves no F.tmp.PID behind, for a streaming tool (dyn-trace cat) and for dyn-replay
# --sim; the tool dies of the signal (exit 130).
c="$DYN_ROOT/tests/fixtures/cases/42-jsonl-utf8-bom/workload-plain.jsonl"
kind() { stat -c %F "$1"; }
mknod cdev c 1 3 2>/dev/null || ln -s /dev/null cdev  # /dev/null's numbers; a link to it when not root
expect_status 0 dyn-trace cat -o cdev "$c"; echo "char device: still $(kind "$(readlink -f cdev)")"
mkfifo fifo
(cat fifo >from-fifo.txt) &
expect_status 0 dyn-trace cat -o fifo "$c"; echo "fifo: still $(kind fifo)"
wait
echo "fifo reader got $(wc -l <from-fifo.txt) rows"
expect_status 0 dyn-trace cat -o >(wc -l >from-procsub.txt) "$c"
for i in $(seq 1 50); do [[ -s from-procsub.txt ]] && break; sleep 0.05; done
echo "process substitution got $(cat from-procsub.txt) rows"
mkdir real
echo old >real/target.jsonl
ln -s real/target.jsonl link.jsonl
expect_status 0 dyn-trace cat -o link.jsonl "$c"; echo "symlink: link.jsonl is still a $(kind link.jsonl), target has $(wc -l <real/target.jsonl) rows"
ls real
expect_status 0 dyn-trace cat -o plain.jsonl "$c"; echo "regular file: $(kind plain.jsonl), $(wc -l <plain.jsonl) rows"
echo "temporary files left: $(ls -A | grep -c '\.tmp\.')"
# SIGINT mid-write. A background job starts with SIGINT ignored; the wrapper restores the default
# as a terminal's Ctrl-C would find it.
sigint_default='import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])'
mkfifo slow
(head -2 "$c"; sleep 30) >slow &
writer=$!
python3 -c "$sigint_default" dyn-trace cat --line-buffered -o out.jsonl slow 2>/dev/null &
pid=$!
for i in $(seq 1 100); do ls out.jsonl.tmp.* >/dev/null 2>&1 && break; sleep 0.05; done
echo "while cat runs: temporary files $(ls out.jsonl.tmp.* 2>/dev/null | wc -l)"
kill -INT "$pid"; expect_status 130 wait "$pid"; echo "cat after SIGINT: temporary files $(ls -A | grep -c '\.tmp\.'), out.jsonl exists: $([[ -e out.jsonl ]] && echo yes || echo no)"
kill "$writer" 2>/dev/null; wait "$writer" 2>/dev/null
# dyn-replay --sim over a workload that takes a while to simulate (200,000 rows: about 1.5 s on
# a quiet machine; 40,000 finished before the SIGINT below arrived).
python3 - <<'PY' >big.jsonl
import json
for i in range(200000):
    print(json.dumps({"timestamp": i, "session_id": "s%d" % (i % 500), "input_length": 2048,
                      "output_length": 64, "hash_ids": [i % 500 * 10 + k for k in range(4)]}))
PY
python3 -c "$sigint_default" dyn-replay --sim --workers 4 -o sim.jsonl big.jsonl 2>/dev/null &
pid=$!
for i in $(seq 1 200); do ls sim.jsonl.tmp.* >/dev/null 2>&1 && break; sleep 0.02; done
sleep 0.3
kill -INT "$pid"; expect_status 130 wait "$pid"
echo "dyn-replay --sim after SIGINT: temporary files $(ls -A | grep -c '\.tmp\.')"
