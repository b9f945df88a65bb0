# Sourced by the browser checks: headless Chromium with a fresh profile per
# run (no state, no network, no first-run UI), its log in $work/chromium.log.
# The caller sets `work` (a directory) before sourcing.

missing() {
  if [ -n "${CI:-}" ]; then
    echo "FAIL: $1 is not installed (CI must run the browser test; ./dev.sh installs it)" >&2
    exit 1
  fi
  echo "SKIP: $1 is not installed" >&2
  exit 77
}
command -v chromium >/dev/null || missing chromium

profiles=()
cleanup() { rm -rf "${profiles[@]}"; }
trap cleanup EXIT

browser() {
  local profile
  profile=$(mktemp -d)
  profiles+=("$profile")
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" "$@" 2>>"$work/chromium.log"
}

fail() {
  echo "FAIL: $*" >&2
  echo "--- chromium log (tail) ---" >&2
  tail -20 "$work/chromium.log" >&2 || true
  exit 1
}

: >"$work/chromium.log"
