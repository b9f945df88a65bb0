#!/bin/bash
# Runs the README's examples as a newcomer would after ./dev.sh demo: every
# "$ " line of its fenced blocks, in order, in one shell, in a scratch
# directory where build/ is this build and tests/workloads/ this tree's.
# `sudo` is dropped (this runs as root) and `allocscope` is build/allocscope.
# A command that fails while a background job it may wait for (the agent)
# runs is tried again for up to 30 s, as a reader would. Then the claims the
# prose makes of the outputs are checked.
# Usage: verify_readme.sh BUILD_DIR SOURCE_DIR
set -u
build=$(realpath "$1")
src=$(realpath "$2")
fail() {
  echo "verify_readme: $*" >&2
  exit 1
}
if [ "$(id -u)" -ne 0 ]; then
  echo "verify_readme: needs root (the examples record with BPF)" >&2
  exit 77
fi

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$work"' EXIT
mkdir -p "$work/tests"
ln -s "$build" "$work/build"
ln -s "$src/tests/workloads" "$work/tests/workloads"
cd "$work" || exit 1

# The README's command lines, one per line, as this machine runs them.
commands=$(awk '/^```/ { inside = !inside; next } inside && /^\$ / { print substr($0, 3) }' "$src/README.md" |
  sed -E 's/^sudo //; s/^allocscope /build\/allocscope /')
[ "$(echo "$commands" | wc -l)" -ge 10 ] || fail "found only these commands in README.md: $commands"

declare -A out
n=0
while IFS= read -r cmd; do
  n=$((n + 1))
  echo "verify_readme: \$ $cmd"
  if [[ $cmd == *'&' ]]; then
    eval "$cmd"
    continue
  fi
  deadline=$((SECONDS + 30))
  until out[$n]=$(eval "$cmd" 2>&1); do
    [ -n "$(jobs -rp)" ] && [ "$SECONDS" -lt "$deadline" ] || fail "failed: $cmd"$'\n'"${out[$n]}"
    sleep 0.5
  done
  printf '%s\n' "${out[$n]}" | head -20
done <<<"$commands"

# output_of PATTERN: the output of the first command matching PATTERN.
output_of() {
  local i=0 cmd
  while IFS= read -r cmd; do
    i=$((i + 1))
    [[ $cmd =~ $1 ]] && { printf '%s\n' "${out[$i]}"; return; }
  done <<<"$commands"
  fail "no README command matches $1"
}
# The claims of the prose; each holds by many standard errors in the
# examples as they are (the false-failure rate of each is below 1e-9).
output_of 'report heap.pb.gz --top 3' | grep -qE ' site_realloc$' ||
  fail "the first example's top table does not list site_realloc"
output_of 'report --diff' | grep -qE ' grew +site_calloc$' || fail "report --diff does not say site_calloc grew"
output_of 'report --leaks' | grep -qE ' suspect +site_leak$' || fail "report --leaks does not name site_leak"
output_of "grep ';parse;'" | grep -q '^<module>;load;' || fail "the Python example's stacks lack its functions"
output_of 'curl' | grep -qE '^allocscope_process_allocated_bytes_total\{pid="[0-9]+",comm="leaky"\} [0-9]+$' ||
  fail "the agent's metrics are not as the README shows them"
echo "verify_readme: the README's $n commands ran and say what the README says"
