# Shows that dyn-bench plot writes one self-contained HTML file (inline SVG, no scripts, no network
# references) with every chart, and that headless Chromium renders it to a non-blank screenshot.
cp "$DYN_ROOT/tests/fixtures/bench/affinity-rr.jsonl" rr.jsonl
dyn-bench plot rr.jsonl -o report.html 2>/dev/null
echo "svg charts: $(grep -o '<svg xmlns' report.html | wc -l)"
grep -o '<h2>[^<]*</h2>' report.html
echo "external references or scripts: $(grep -oE '<script|<link|<img|<iframe|(src|href)="https?:' report.html | wc -l)"
echo "timeline bars naming their worker: $(grep -oE 'turn [0-9]+ worker [0-9]+' report.html | wc -l)"
chrome=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$chrome" ]]; then
  echo "chromium is not installed (apt-get install chromium): cannot check rendering" >&2
  exit 77
fi
profile=$(mktemp -d)
"$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --window-size=1000,2400 \
  --screenshot="$PWD/shot.png" "file://$PWD/report.html" >/dev/null 2>&1
rm -rf "$profile"
[[ -s shot.png ]] || { echo "no screenshot written"; exit 1; }
n=$(python3 "$DYN_ROOT/tests/tools/png_colors.py" shot.png)
if (( n > 10 )); then echo "screenshot is not blank"; else echo "screenshot has only $n colours"; fi
