# Shows that examples/pipeline.sh (cat | filter | bind | bench over a gzip trace) runs end to end.
bash "$DYN_ROOT/examples/pipeline.sh"
