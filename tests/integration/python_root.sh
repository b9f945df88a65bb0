#!/usr/bin/env bash
# python_root.sh CACHE: a Debian 13 (trixie) root with its python3.13, made
# once with mmdebstrap (about 40 s and 30 MB from Debian's archive) and kept
# in CACHE; prints the root's path.
set -euo pipefail
cache=$1
# Written as root: the cache must be ours alone.
(umask 077 && mkdir -p "$cache")
if [ -L "$cache" ] || [ "$(stat -c %u "$cache")" != "$(id -u)" ] || [ -n "$(find "$cache" -maxdepth 0 -perm /022)" ]; then
  echo "python_root.sh: $cache is not a directory of this user's alone; refusing to use it" >&2
  exit 1
fi
root=$cache/trixie-python3.13
if [ ! -f "$root.ready" ]; then
  rm -rf "$root"
  mmdebstrap --quiet --variant=apt --include=python3.13 trixie "$root" http://deb.debian.org/debian >&2
  touch "$root.ready"
fi
echo "$root"
