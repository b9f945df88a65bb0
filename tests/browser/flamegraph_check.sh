#!/usr/bin/env bash
# The flame graph in a real browser (headless Chromium, nothing downloaded):
#   1. the standalone SVG draws something (a screenshot with many colours)
#      and its script starts (it marks the root with data-fg-frames);
#   2. inlined in an HTML page, its own search and zoom (window.flamegraph)
#      give the expected shares and widths; the page writes the results into
#      the DOM, which --dump-dom prints.
# usage: flamegraph_check.sh FLAMEGRAPH_DEMO [WORKDIR]
# Exits 77 (ctest: skipped) without chromium, unless CI is set.
set -euo pipefail

demo=${1:?usage: flamegraph_check.sh FLAMEGRAPH_DEMO [WORKDIR]}
work=${2:-$(mktemp -d)}
mkdir -p "$work"

# shellcheck source=chromium.sh
source "$(dirname "$0")/chromium.sh"

"$demo" "$work/flame.svg" || fail "flamegraph_demo could not write $work/flame.svg"
"$demo" "$work/icicle.svg" icicle
"$demo" "$work/diff.svg" diff
"$demo" "$work/deep.svg" deep  # taller than a screen: its first screen must show the profile

# 1a. Screenshots, decoded by the browser itself (a data: URL keeps the
# canvas readable): non-blank means many colours, much of it not background.
{
  echo '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre id="pixels">PENDING</pre>'
  for kind in flame icicle diff deep; do
    size=1200,340
    [ "$kind" != deep ] || size=1400,900  # the first screen a laptop shows
    browser --screenshot="$work/$kind.png" --window-size=$size "file://$work/$kind.svg" >/dev/null ||
      fail "chromium could not screenshot $kind.svg"
    echo "<img class=\"shot\" alt=\"$kind\" src=\"data:image/png;base64,$(base64 -w0 "$work/$kind.png")\">"
  done
  cat <<'HTML'
<script>
window.addEventListener('load', function () {
  var lines = [];
  document.querySelectorAll('img.shot').forEach(function (img) {
    var c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    var ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    var d = ctx.getImageData(0, 0, c.width, c.height).data, counts = new Map(), most = 0;
    for (var i = 0; i < d.length; i += 4) {
      var key = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2], n = (counts.get(key) || 0) + 1;
      counts.set(key, n);
      if (n > most) most = n;
    }
    var pixels = d.length / 4;
    lines.push('PIXELS ' + img.alt + ' size=' + c.width + 'x' + c.height + ' colours=' + counts.size +
               ' foreground=' + Math.round(100 * (pixels - most) / Math.max(pixels, 1)));
  });
  document.getElementById('pixels').textContent = lines.join('\n');
});
</script></body></html>
HTML
} >"$work/pixels.html"
browser --dump-dom --virtual-time-budget=5000 "file://$work/pixels.html" >"$work/pixels.dom" ||
  fail "chromium could not load pixels.html"
for kind in flame icicle diff deep; do
  line=$(grep -o "PIXELS $kind [^<]*" "$work/pixels.dom" | head -1)
  echo "$line"
  colours=$(sed -n 's/.*colours=\([0-9]*\).*/\1/p' <<<"$line")
  foreground=$(sed -n 's/.*foreground=\([0-9]*\).*/\1/p' <<<"$line")
  [ "${colours:-0}" -ge 16 ] && [ "${foreground:-0}" -ge 20 ] ||
    fail "$kind.png looks blank: ${line:-no pixel statistics}"
done

# 1b. The standalone SVG runs its own script.
browser --dump-dom --virtual-time-budget=5000 "file://$work/flame.svg" >"$work/standalone.dom" ||
  fail "chromium could not load flame.svg"
grep -q 'data-fg-frames="[1-9]' "$work/standalone.dom" || fail "the script did not run in the standalone SVG"

# 2. Inlined in a page, driven through the graph's own functions.
{
  echo '<!DOCTYPE html><html><head><meta charset="utf-8"><title>flamegraph check</title></head><body>'
  sed 1d "$work/flame.svg"  # drop the XML declaration
  cat <<'HTML'
<pre id="result">PENDING</pre>
<script>
(function () {
  var out = [];
  function check(label, ok, detail) { out.push(label + (ok ? '_OK ' : '_FAIL ') + detail); }
  function near(a, b) { return Math.abs(a - b) < 0.05; }
  function geometry(f) {
    return { x: parseFloat(f.rect.getAttribute('x')), w: parseFloat(f.rect.getAttribute('width')),
             shown: f.g.style.display !== 'none' };
  }
  try {
    var fg = window.flamegraph, svg = document.querySelector('svg.fg-root');
    var frames = fg.frames();
    var byName = function (n) {
      return frames.filter(function (f) { return f.name === n && !f.merged; })[0];
    };
    var full = 1180, pad = 10;

    var r = fg.search('handle_request');
    check('SEARCH', r.exact && r.share.toFixed(1) === '33.3', 'share=' + r.share.toFixed(1) + '%');
    var matched = svg.querySelector('.fg-matched').textContent;
    check('MATCHED_TEXT', matched.indexOf('33.33%') >= 0 && matched.indexOf('400 KiB') >= 0,
          JSON.stringify(matched));
    check('HIGHLIGHT', byName('handle_request').rect.getAttribute('fill') === '#e600e6' &&
          byName('load_table').rect.getAttribute('fill') !== '#e600e6', 'handle_request only');
    r = fg.search('main|handle_request');  // nested matches count once
    check('NESTED', r.share.toFixed(2) === '83.33', 'share=' + r.share.toFixed(2) + '%');
    r = fg.search('OPERATOR NEW');  // case-insensitive; two separate frames add up
    check('CASE', r.share.toFixed(1) === '37.5' && r.frames === 2, 'share=' + r.share.toFixed(1) + '%');
    r = fg.search('parse<char const*>(');  // no valid regex: plain text
    check('TEXT', r.share.toFixed(1) === '12.5', 'share=' + r.share.toFixed(1) + '%');
    r = fg.search('tiny_helper_0$');  // only inside the merged block
    check('HIDDEN', r.exact && near(r.value, 8) && r.frames === 1, 'value=' + r.value);
    var box = svg.querySelector('input.fg-search');  // typing in the search box
    box.value = 'Buffer::grow';
    box.dispatchEvent(new Event('input', { bubbles: true }));
    var typed = svg.querySelector('.fg-matched').textContent;
    check('INPUT', typed.indexOf('20.83%') >= 0, JSON.stringify(typed));
    fg.clear();
    check('CLEAR', svg.querySelector('.fg-matched').textContent === '' && box.value === '' &&
          byName('handle_request').rect.getAttribute('fill') !== '#e600e6', 'cleared');

    fg.zoom('handle_request');
    var hr = geometry(byName('handle_request')), grow = geometry(byName('Buffer::grow(unsigned long)'));
    var json = geometry(byName('json::parse<char const*>(char const*, char const*)'));
    var main = geometry(byName('main')), load = geometry(byName('load_table'));
    var worker = geometry(byName('worker_loop'));
    var zoomOk = near(hr.x, pad) && near(hr.w, full) && near(grow.x, pad) && near(grow.w, full * 250 / 400) &&
        near(json.x, pad + full * 250 / 400) && near(json.w, full * 150 / 400) &&
        main.shown && near(main.w, full) && !load.shown && !worker.shown &&
        byName('Buffer::grow(unsigned long)').text.textContent.length > 3 &&
        svg.classList.contains('fg-zoomed');
    check('ZOOM', zoomOk, JSON.stringify({ hr: hr, grow: grow, json: json, main: main, load: load }));

    fg.reset();
    byName('load_table').rect.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    var clicked = geometry(byName('load_table'));
    check('CLICK', near(clicked.w, full) && !geometry(byName('handle_request')).shown,
          JSON.stringify(clicked));
    document.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    var back = geometry(byName('handle_request'));
    check('RESET', back.shown && near(back.w, full * 400 / 1200) && !svg.classList.contains('fg-zoomed'),
          JSON.stringify(back));
  } catch (e) {
    out.push('ERROR ' + e + ' ' + (e.stack || ''));
  }
  document.getElementById('result').textContent = out.join('\n');
})();
</script>
</body></html>
HTML
} >"$work/page.html"

browser --dump-dom --virtual-time-budget=5000 "file://$work/page.html" >"$work/page.dom" ||
  fail "chromium could not load page.html"
# Only the result block: the page's own script text names every check too.
sed -n '/<pre id="result">/,/<\/pre>/p' "$work/page.dom" | sed 's/<[^>]*>//g' >"$work/results.txt"
cat "$work/results.txt"
for expected in "SEARCH_OK share=33.3%" MATCHED_TEXT_OK HIGHLIGHT_OK NESTED_OK CASE_OK TEXT_OK HIDDEN_OK \
  INPUT_OK CLEAR_OK ZOOM_OK CLICK_OK RESET_OK; do
  grep -qF "$expected" "$work/results.txt" || fail "missing $expected (see $work/page.dom)"
done
if grep -qE '_FAIL|ERROR|PENDING' "$work/results.txt"; then
  fail "a check failed (see $work/page.dom)"
fi
echo "PASS: flame graph renders and its search and zoom work in $(chromium --version 2>/dev/null)"
