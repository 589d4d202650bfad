# Shows that the repository stands alone: no tracked file reads the sibling "shared" folder the
# project was first written against (data, cases and the specification live in data/,
# tests/fixtures/ and docs/), every "SPEC N" / "SPEC N.M" that help texts, man pages, sources and
# docs cite is a numbered section of docs/spec.md, and every data file the tests name exists.
# Each check is first run on a planted offender, so a check that stopped finding anything fails.
set -u
w="$PWD"
cd "$DYN_ROOT"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard >"$w/files"
else   # an unpacked tarball: every file outside build output
  find . -path ./.git -prune -o -path './build*' -prune -o -path ./quickstart-out -prune -o -type f -print0 |
    sed -z 's|^\./||' >"$w/files"
fi
cd "$w"
# The patterns are built from pieces so that this script does not match itself.
up="\.\./"; sh="shared"
pattern="((${up})+${sh}\b|DYN_${sh^^}\b|/work/${sh}\b)"
reads_shared() {   # reads_shared ROOT FILELIST0: prints file:line of every reference
  (cd "$1" && xargs -0 grep -HnIE "$pattern" -- <"$2" 2>/dev/null)
}
mkdir -p planted/tests
printf 'x="$root/%s/data/trace.jsonl"\n' "..${sh:+/}$sh" >planted/tests/bad.sh
printf 'tests/bad.sh\0' >planted.list
echo "== planted offender is found"
reads_shared "$w/planted" "$w/planted.list" | sed 's/:.*//'
echo "== files in the repository that read the shared folder (none expected)"
reads_shared "$DYN_ROOT" "$w/files"

# SPEC references -> headings "## N." / "### N.M" of docs/spec.md.
spec_sections() { grep -oE '^##+ [0-9]+(\.[0-9]+)?' "$1" | sed -E 's/^#+ //; s/\.$//' | sort -u; }
cited() {   # cited ROOT FILELIST0: every SPEC number cited, with the first file citing it
  (cd "$1" && xargs -0 grep -HoIE 'SPEC( section)? [0-9]+(\.[0-9]+)?' -- <"$2" 2>/dev/null) |
    sed -E 's/SPEC( section)? //' | sort -t: -k2,2 -u
}
printf '## 1. One\n### 1.1 Sub\n' >planted/spec.md
printf 'see SPEC 1.1 and SPEC 1.2 and SPEC section 1\n' >planted/tests/cite.txt
printf 'tests/cite.txt\0' >cite.list
echo "== planted unresolved SPEC reference is found"
cited "$w/planted" "$w/cite.list" | while IFS=: read -r f n; do spec_sections planted/spec.md | grep -qx "$n" || echo "$f: SPEC $n"; done
echo "== SPEC references with no section in docs/spec.md (none expected)"
[[ -f "$DYN_ROOT/docs/spec.md" ]] || echo "docs/spec.md missing"
grep -zE '^(cmd|lib|man|docs|examples|scripts|README|tests/e2e|bench)' files >cite-files
cited "$DYN_ROOT" "$w/cite-files" | while IFS=: read -r f n; do
  spec_sections "$DYN_ROOT/docs/spec.md" | grep -qx "$n" || echo "$f: SPEC $n"
done
echo "== sections cited: $(cited "$DYN_ROOT" "$w/cite-files" | wc -l | awk '{print ($1 > 20) ? "more than 20" : $1}')"

# Paths under $DYN_DATA / $DYN_CASES named by the e2e scripts exist.
echo "== data and case paths named by e2e scripts that do not exist (none expected)"
grep -ohE '\$(DYN_DATA|DYN_CASES)/[A-Za-z0-9._/-]+' "$DYN_ROOT"/tests/e2e/*.sh | sort -u |
  while read -r p; do
    f="${p/\$DYN_DATA/$DYN_DATA}"; f="${f/\$DYN_CASES/$DYN_CASES}"
    [[ -e "$f" ]] || echo "$p"
  done
