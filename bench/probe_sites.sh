#!/usr/bin/env bash
# probe_sites.sh [CALLS]: the cost of one probed site by its instruction
# (probe_sites.c), untraced and with bpftrace's empty program on each site.
# Needs root and bpftrace. A site the kernel refuses to probe costs what an
# unprobed one does: bpftrace's own warnings (kept in the log) say which.
set -euo pipefail
calls=${1:-100000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/probe_sites" "$(dirname "$0")/probe_sites.c"
echo "untraced:"
"$work/probe_sites" "$calls"
bpftrace -e "uprobe:$work/probe_sites:site_nop1 {} uprobe:$work/probe_sites:site_nop5 {}
             uprobe:$work/probe_sites:site_nop10 {}" >"$work/bpftrace.log" 2>&1 &
tracer=$!
for _ in $(seq 100); do grep -q "Attaching" "$work/bpftrace.log" && break; sleep 0.1; done
sleep 1
echo "probed (kernel $(uname -r)):"
"$work/probe_sites" "$calls"
kill -INT "$tracer"
wait "$tracer" || true
grep -iE "warn|error|fail" "$work/bpftrace.log" || true
