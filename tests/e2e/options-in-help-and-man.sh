# Shows that every option of every binary and subcommand appears in its --help and in its
# generated man page, that every man page passes `groff -man -ww -z`, and that completions exist.
man="$DYN_BUILD/generated/man"
comp="$DYN_BUILD/generated/completions"
for t in dyn-route dyn-trace dyn-replay dyn-bind dyn-bench dyn-mocker; do
  page="$man/$t.1"
  [[ -s "$page" ]] || echo "missing man page $t"
  groff -man -ww -z "$page" 2>&1 | sed "s/^/$t: groff: /"
  for f in "$comp/$t.bash" "$comp/_$t" "$comp/$t.fish"; do [[ -s "$f" ]] || echo "missing $f"; done
  for s in DESCRIPTION OPTIONS EXAMPLES "EXIT STATUS" ENVIRONMENT "SEE ALSO"; do
    grep -q "^\.SH $s" "$page" || echo "$t: man page lacks $s"
  done
  subs=$("$t" --generate=fish | sed -n "s/.*__fish_use_subcommand' -a \([^ ]*\) .*/\1/p")
  for ctx in "" $subs; do
    help=$("$t" $ctx --help)
    opts=$(printf '%s\n' "$help" | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u)
    for o in $opts; do
      grep -qF -- "$(printf '%s' "$o" | sed 's/-/\\-/g')" "$page" || echo "$t $ctx: $o missing from man page"
    done
    n=$(printf '%s\n' "$opts" | grep -c .)
    echo "$t ${ctx:-(top)}: $n options checked" >&2
  done
done
echo "checked all binaries"
