#!/usr/bin/env bash
# sid_root.sh CACHE PACKAGE...: a Debian sid (unstable) root with PACKAGE...
# (the runtimes the newest distributions ship: python3.14, python3.15, ...),
# made once with mmdebstrap and kept in CACHE under a name keyed by the
# package list, so that a machine pays for it once; prints the root's path.
# A mirror may hold a sid Release past its Valid-Until: not checked.
set -euo pipefail
cache=$1
shift
# Written as root: the cache must be ours alone.
(umask 077 && mkdir -p "$cache")
if [ -L "$cache" ] || [ "$(stat -c %u "$cache")" != "$(id -u)" ] || [ -n "$(find "$cache" -maxdepth 0 -perm /022)" ]; then
  echo "sid_root.sh: $cache is not a directory of this user's alone; refusing to use it" >&2
  exit 1
fi
key=$(printf '%s\n' "$@" | sort -u | sha256sum | cut -c1-16)
root=$cache/sid-$key
if [ ! -f "$root.ready" ]; then
  rm -rf "$root"
  packages=$(IFS=,; echo "$*")
  mmdebstrap --quiet --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' --include="$packages" \
    sid "$root" http://deb.debian.org/debian >&2
  printf '%s\n' "$@" | sort -u > "$root.packages"
  touch "$root.ready"
fi
echo "$root"
