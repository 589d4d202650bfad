# Shows that scripts/make-quickstart-slice.sh never damages the bundled workload: without a
# built dyn-trace it says what is missing (exit 4), and when a step fails midway (a dyn-trace that
# exits 3 after printing part of its output) it fails with that status; either way the slice keeps
# its bytes and no temporary file is left beside it. A real run reproduces the bundled file.
slice="$DYN_ROOT/data/quickstart/conversation-slice.jsonl"
before=$(sha256sum <"$slice")
expect_status 4 bash "$DYN_ROOT/scripts/make-quickstart-slice.sh" "$PWD/no-build" 2>&1 | sed "s|$PWD|DIR|"
mkdir -p broken/bin
printf '#!/bin/sh\necho "{\\"session_id\\":\\"s1\\",\\"timestamp\\":5}"\nexit 3\n' >broken/bin/dyn-trace
chmod +x broken/bin/dyn-trace
expect_status 3 bash "$DYN_ROOT/scripts/make-quickstart-slice.sh" "$PWD/broken" >/dev/null 2>&1
[[ "$(sha256sum <"$slice")" == "$before" ]] && echo "slice unchanged"
ls "$DYN_ROOT/data/quickstart/" | grep -c 'conversation-slice.jsonl\.' || true
bash "$DYN_ROOT/scripts/make-quickstart-slice.sh" "$DYN_BUILD" 2>/dev/null | sed "s|$DYN_ROOT/||"
[[ "$(sha256sum <"$slice")" == "$before" ]] && echo "regenerated slice identical"
