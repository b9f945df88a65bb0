#!/usr/bin/env bash
# The timeline page in a real browser (headless Chromium, nothing downloaded):
#   1. opened with #point=N or #range=A-B (and with no address at all: the
#      highest moment), its script draws the flame graph of that selection;
#   2. a click and a drag on the chart select a moment and a range.
# The numbers are timeline_demo's (see there). --dump-dom prints the DOM
# after the scripts ran.
# usage: timeline_check.sh TIMELINE_DEMO [WORKDIR]
# Exits 77 (ctest: skipped) without chromium, unless CI is set.
set -euo pipefail

demo=${1:?usage: timeline_check.sh TIMELINE_DEMO [WORKDIR]}
work=${2:-$(mktemp -d)}
mkdir -p "$work"

# shellcheck source=chromium.sh
source "$(dirname "$0")/chromium.sh"

"$demo" "$work/timeline.html" || fail "timeline_demo could not write $work/timeline.html"

# The selection line and the flame graph's frames, as "name=value" lines.
selection() {
  local dom=$1
  grep -o '<p id="selection"[^>]*>[^<]*' "$dom" | head -1
  grep -o '<g class="frame" data-name="[^"]*" data-value="[^"]*"' "$dom" |
    sed 's/.*data-name="\([^"]*\)" data-value="\([^"]*\)"/\1=\2/'
}

expect() {  # FILE TEXT...
  local file=$1
  shift
  for text in "$@"; do grep -qxF -- "$text" "$file" || fail "$file lacks '$text': $(cat "$file")"; done
}

# 1. Selections by address.
for view in "point=1" "range=1-3" ""; do
  name=${view:-default}
  browser --dump-dom --virtual-time-budget=5000 "file://$work/timeline.html${view:+#$view}" \
    >"$work/$name.dom" || fail "chromium could not load timeline.html#$view"
  selection "$work/$name.dom" >"$work/$name.txt"
  echo "--- $name"
  cat "$work/$name.txt"
done
grep -q 'data-mode="point" data-total="4000"' "$work/point=1.txt" || fail "point 1: $(cat "$work/point=1.txt")"
expect "$work/point=1.txt" "all=4000" "main=4000" "site_b=3000" "site_a=1000"
grep -q 'data-mode="range" data-total="500"' "$work/range=1-3.txt" || fail "range: $(cat "$work/range=1-3.txt")"
expect "$work/range=1-3.txt" "all=500" "site_a=500"
grep -q 'site_b=' "$work/range=1-3.txt" && fail "range 1-3 shows site_b, which allocated nothing in it"
grep -q 'data-mode="point" data-total="4000"' "$work/default.txt" ||
  fail "with no selection the highest moment (point 1) is not shown: $(cat "$work/default.txt")"

# 2. A click and a drag on the chart, by the page's own handlers.
sed 's|</body>|<pre id="result">PENDING</pre><script>\
(function () {\
  var out = [], chart = document.getElementById("chart"), info = document.getElementById("selection");\
  var D = JSON.parse(document.getElementById("timeline-data").textContent);\
  function at(i) {\
    var r = chart.getBoundingClientRect();\
    var x = D.left + (D.t[i] - D.t0) / (D.t1 - D.t0) * D.plotW;\
    return r.left + x * r.width / D.width;\
  }\
  function press(type, i) {\
    chart.dispatchEvent(new MouseEvent(type, { bubbles: true, clientX: at(i), clientY: 100 }));\
  }\
  try {\
    press("mousedown", 3); press("mouseup", 3);\
    out.push("CLICK " + info.getAttribute("data-mode") + " " + info.getAttribute("data-total"));\
    press("mousedown", 0); press("mouseup", 2);\
    out.push("DRAG " + info.getAttribute("data-mode") + " " + info.getAttribute("data-total"));\
    var box = document.getElementById("sel-box");\
    out.push("BOX " + (parseFloat(box.getAttribute("width")) > 100 ? "wide" : "narrow"));\
  } catch (e) { out.push("ERROR " + e); }\
  document.getElementById("result").textContent = out.join("\\n");\
})();\
</script></body>|' "$work/timeline.html" >"$work/page.html"
browser --dump-dom --virtual-time-budget=5000 "file://$work/page.html" >"$work/page.dom" ||
  fail "chromium could not load page.html"
sed -n '/<pre id="result">/,/<\/pre>/p' "$work/page.dom" | sed 's/<[^>]*>//g' >"$work/results.txt"
cat "$work/results.txt"
# The click: point 3 (500 live); the drag 0-2 allocated 1000 + 3000 + 500 - 1000.
expect "$work/results.txt" "CLICK point 500" "DRAG range 3500" "BOX wide"
echo "PASS: the timeline selects moments and ranges in $(chromium --version 2>/dev/null)"
