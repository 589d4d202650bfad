# Exit statuses as checked expectations (not a test; run.sh sources it and exports the function to
# every script): a script says the status it wants where it runs the command, and a different one
# fails the test naming the command, instead of the script echoing "exit $?" into its stdout golden.

# expect_status WANT COMMAND [ARG...]: runs COMMAND (its output goes where the caller redirects it;
# an assignment before expect_status reaches COMMAND's environment) and returns 0 when it exits
# WANT. Otherwise the test fails: "COMMAND: exit GOT, want WANT" is appended to $DYN_EXPECT_LOG
# (run.sh prints it and fails the test whatever the goldens say) and the shell running it exits 1.
# In a pipeline or $(...) only that subshell exits, so the log is what makes the failure certain.
expect_status() {
  local want=$1 got
  shift
  "$@"
  got=$?
  [[ $got == "$want" ]] && return 0
  printf 'expect_status: %s: exit %s, want %s\n' "$*" "$got" "$want" >>"${DYN_EXPECT_LOG:-/dev/stderr}"
  exit 1
}
