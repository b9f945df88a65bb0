#!/bin/sh
# verify_unit.sh UNIT BINARY: systemd-analyze verify on UNIT with its
# /usr/bin/allocscope replaced by BINARY. systemd exits 0 on unknown keys
# and bad values it ignores, so any message fails the test.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|/usr/bin/allocscope|$2|" "$1" > "$dir/allocscope-agent.service"
out=$(systemd-analyze verify --man=no "$dir/allocscope-agent.service" 2>&1) || { echo "$out"; exit 1; }
[ -z "$out" ] || { echo "$out"; exit 1; }
