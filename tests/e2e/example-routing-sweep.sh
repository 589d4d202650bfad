# Shows that examples/routing-sweep.sh (the scripted routing experiment) runs and prints its
# table: six simulated runs over the bundled Mooncake slice, reproducible by seed.
bash "$DYN_ROOT/examples/routing-sweep.sh"
