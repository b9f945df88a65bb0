#!/usr/bin/env bash
# fetch.sh SUITE PACKAGE CACHE: Debian's kernel that PACKAGE (a metapackage
# such as linux-image-amd64) of SUITE (bookworm, trixie, bullseye) installs
# today, downloaded through an apt configuration of this script's own (the
# machine's sources and lists are never touched), unpacked, its 9p modules
# indexed, and a busybox initramfs made for it. Everything is kept in CACHE;
# prints the kernel's directory there.
set -euo pipefail
suite=$1 package=$2 cache=$3
here=$(cd "$(dirname "$0")" && pwd)

# The cache is written as root: it must be ours alone.
source "$here/../debian_suite.sh"
own_cache "$cache"
suite_apt "$suite" "$cache/apt-$suite"

# The metapackage names the versioned package it installs today (a versioned
# package names itself).
image=$package
[[ $package =~ ^linux-image-[0-9]+\.[0-9]+\.[0-9] ]] || image=$(apt-cache "${apt_opts[@]}" depends --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "$package" | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]+\.[0-9]+\.[0-9]/ { print $2; exit }')
[ -n "$image" ] || { echo "fetch.sh: $package of $suite names no kernel image" >&2; exit 1; }
version=$(apt-cache "${apt_opts[@]}" show "$image" | awk '$1 == "Version:" { print $2; exit }')
tree=$cache/$image-$version
if [ ! -f "$tree/ready" ]; then
  rm -rf "$tree" "$cache/download"
  mkdir -p "$cache/download" "$tree"
  # Newer packages hold the kernel, its modules and their indexes in packages
  # of their own (linux-binary-*, linux-modules-*, linux-base-*) that the
  # image depends on, and the kernel under /usr/lib/modules.
  # "linux-modules-X (= V)" -> "linux-modules-X=V"
  parts=$(apt-cache "${apt_opts[@]}" show "$image=$version" | awk -F': ' '$1 == "Depends" { print $2; exit }' |
    tr ',' '\n' | sed -nE 's/^ *(linux-(binary|modules|base)-[^ ]+) \(= ([^)]+)\).*/\1=\3/p')
  (cd "$cache/download" && apt-get "${apt_opts[@]}" -qq download "$image=$version" $parts >&2)
  for deb in "$cache"/download/*.deb; do dpkg-deb -x "$deb" "$tree"; done
  rm -rf "$cache/download"
  # Debian 13's packages put modules under /usr (merged /usr): depmod and
  # modprobe look in TREE/lib.
  [ -d "$tree/lib/modules" ] || ln -s usr/lib "$tree/lib"
  release=$(ls "$tree/lib/modules")
  depmod -b "$tree" "$release"
  for kernel in "$tree/boot/vmlinuz-$release" "$tree/lib/modules/$release/vmlinuz"; do
    [ -f "$kernel" ] && ln -sf "${kernel#"$tree"/}" "$tree/vmlinuz"
  done
  echo "$release" >"$tree/release"
  touch "$tree/ready"
fi
# The initramfs again whenever what makes it changed (a cache outlives it).
stamp=$(cat "$here/initramfs.sh" "$here/guest-init.sh" | sha256sum | cut -c1-16)
if [ "$(cat "$tree/initrd.stamp" 2>/dev/null)" != "$stamp" ]; then
  "$here/initramfs.sh" "$tree" "$(cat "$tree/release")" "$tree/initrd.gz"
  echo "$stamp" >"$tree/initrd.stamp"
fi
echo "$tree"
