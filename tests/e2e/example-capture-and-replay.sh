# Shows that examples/capture-and-replay.sh runs: a three-turn session captured through
# dyn-trace capture (cached tokens grow on the third turn), then replayed with dyn-replay
# against a fresh worker with every turn ok.
bash "$DYN_ROOT/examples/capture-and-replay.sh"
