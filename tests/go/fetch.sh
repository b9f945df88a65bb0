#!/usr/bin/env bash
# fetch.sh VERSION CACHE [SUITE]: Debian's Go VERSION (golang-VERSION-go and
# -src of SUITE: trixie, the newest Debian release, unless named; sid has
# the releases the newest distributions ship), downloaded through an apt
# configuration of its own (tests/debian_suite.sh), unpacked into CACHE
# once, and its go command's path printed. The tests build their Go
# workloads with them beside the machine's own Go (bookworm's 1.19): Go's
# tables, prologues and allocators change between releases. Debian's go
# commands are static: sid's run here.
set -euo pipefail
version=$1 cache=$2 suite=${3:-trixie}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../debian_suite.sh"
own_cache "$cache"
suite_apt "$suite" "$cache/apt-$suite"
packages=("golang-$version-go" "golang-$version-src")
release=$(apt-cache "${apt_opts[@]}" show "${packages[0]}" 2>/dev/null | awk '$1 == "Version:" && !v { v = $2 } END { print v }' || true)
[ -n "$release" ] || { echo "fetch.sh: $suite has no ${packages[0]}" >&2; exit 1; }
tree=$cache/go-$version-$release
# One fetch at a time (two builds may share the cache).
exec 9>"$cache/lock"
flock 9
if [ ! -f "$tree/ready" ]; then
  rm -rf "$tree" "$cache/download"
  mkdir -p "$cache/download" "$tree"
  (cd "$cache/download" && apt-get "${apt_opts[@]}" -qq download "${packages[@]/%/=$release}" >&2)
  for deb in "$cache"/download/*.deb; do dpkg-deb -x "$deb" "$tree"; done
  rm -rf "$cache/download"
  touch "$tree/ready"
  # Older releases of this Go are no longer used.
  for old in "$cache"/go-"$version"-*; do [ "$old" = "$tree" ] || rm -rf "$old"; done
fi
go=$tree/usr/lib/go-$version/bin/go
"$go" version >/dev/null
echo "$go"
