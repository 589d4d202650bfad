# Shows that the house style is checked, not only written down (docs/design.md): the repository
# passes scripts/format.sh --check (every C++ file as .clang-format formats it) and
# scripts/check-function-size.sh (no function in lib/ or cmd/ over 150 lines); and each check
# fails, naming the file (and the function with its length), on a copy with one planted violation.
set -u
echo "== the repository"
expect_status 0 "$DYN_ROOT/scripts/format.sh" --check
expect_status 0 "$DYN_ROOT/scripts/check-function-size.sh" "$DYN_ROOT"
mkdir -p copy
cp -r "$DYN_ROOT/lib" "$DYN_ROOT/cmd" "$DYN_ROOT/.clang-format" copy/
echo "== the copy, untouched"
expect_status 0 "$DYN_ROOT/scripts/format.sh" --check copy
echo "== planted: a misindented line in route/router.cpp"
sed -i '0,/^namespace dyn::route {$/s//&\n   int   planted_misformat ;/' copy/lib/dyn/route/router.cpp
expect_status 1 "$DYN_ROOT/scripts/format.sh" --check copy
echo "== planted: a function of 151 lines in base/"
{
  echo 'namespace dyn {'
  echo 'int planted_long_function(int x) {'
  for i in $(seq 1 149); do echo "  x += $i;"; done
  echo '}'
  echo '}  // namespace dyn'
} >copy/lib/dyn/base/planted.cpp
expect_status 1 "$DYN_ROOT/scripts/check-function-size.sh" copy
echo "== the same function at 150 lines passes"
sed -i '0,/^  x += 1;$/{/^  x += 1;$/d}' copy/lib/dyn/base/planted.cpp
expect_status 0 "$DYN_ROOT/scripts/check-function-size.sh" copy
