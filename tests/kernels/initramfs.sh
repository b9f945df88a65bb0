#!/usr/bin/env bash
# initramfs.sh TREE RELEASE OUT: a busybox initramfs for the kernel unpacked
# in TREE: the modules 9p over virtio needs and overlayfs (a container
# root's, for the tests), in the order modprobe resolves them, decompressed
# for busybox's insmod; and init (guest-init.sh).
set -euo pipefail
tree=$1 release=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/proc" "$work/sys" "$work/dev" "$work/host" "$work/modules"
cp /bin/busybox "$work/bin/busybox"
cp "$here/guest-init.sh" "$work/init"
n=0
for module in 9p 9pnet_virtio virtio_pci overlay; do
  modprobe -d "$tree" -S "$release" --show-depends "$module" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r path; do
  n=$((n + 1))
  name=$(printf '%02d' "$n")-$(basename "$path")
  case $path in
    *.xz) xz -dc "$path" >"$work/modules/${name%.xz}" ;;
    *.zst) zstd -qdc "$path" >"$work/modules/${name%.zst}" ;;
    *) cp "$path" "$work/modules/$name" ;;
  esac
done
(cd "$work" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
