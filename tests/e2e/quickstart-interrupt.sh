# Shows that Ctrl-C on scripts/quickstart.sh stops everything at once (issue 50): SIGINT to its
# process group, as a terminal sends it, in the middle of the first run's replay ends the script
# within 2 s with exit status 130, saying "quickstart: interrupted" (not that a run failed), and
# leaves none of its workers, routers or replays running. SIGINT is restored to its default first:
# a shell starts background jobs with SIGINT ignored, and Ctrl-C reaches a foreground script.
export DYN_QUICKSTART_SPEEDUP=20
export DYN_QUICKSTART_SESSIONS=4
export DYN_SETUP_SKIP=1
sigint_default='import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])'
python3 -c "$sigint_default" setsid bash "$DYN_ROOT/scripts/quickstart.sh" "$PWD/out" >log.txt 2>&1 &
pid=$!
for i in $(seq 1 200); do [[ -s out/round-robin/router.port && -e out/round-robin/replay.log ]] && break; sleep 0.05; done
sleep 1  # requests in flight
pgrep -f "port-file $PWD/out/" >/dev/null && echo "workers and router running before Ctrl-C"
t0=$(date +%s%N)
kill -INT -- "-$pid"
wait "$pid"
rc=$?
took=$((($(date +%s%N) - t0) / 1000000))
echo "exit status $rc, within 2 s: $([[ $took -le 2000 ]] && echo yes || echo "no ($took ms)")"
grep -o 'quickstart: interrupted; every process it started is stopped' log.txt
echo "says a run failed: $(grep -c 'failed' log.txt)"
pgrep -f -- "$PWD/out/" >/dev/null && echo "processes left running" || echo "no processes left"
