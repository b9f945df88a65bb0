#!/usr/bin/env bash
# Times the README's first command as a newcomer meets it: a fresh minimal
# Debian bookworm (mmdebstrap minbase, plus the git that cloned the tree and
# sudo), a clean clone of this tree's HEAD, then `./dev.sh demo` in it, as
# root or (--user) as a user with sudo. Prints where the time went.
#   bench/fresh_demo.sh [--user]
# Needs root, a kernel with BPF and BTF, and the Debian archive. MIRROR: apt
# sources for the root (a file or a URL); default: the host's.
set -euo pipefail
cd "$(dirname "$0")/.."

as_user=0
[ "${1:-}" != --user ] || as_user=1
[ "$(id -u)" -eq 0 ] || { echo "fresh_demo: needs root (mmdebstrap, chroot, BPF)" >&2; exit 1; }
# shellcheck source=tests/package/scratch_root.sh
source tests/package/scratch_root.sh
scratch_root_begin fresh_demo

start=$SECONDS
mmdebstrap --quiet --variant=minbase --include=git,sudo,ca-certificates bookworm "$root" "$MIRROR"
echo "fresh_demo: bookworm root made in $((SECONDS - start)) s (not counted)"
# A machine's own name resolves (sudo asks).
echo "127.0.1.1 $(hostname)" >>"$root/etc/hosts"
scratch_bind_host

home=/root
if [ "$as_user" -eq 1 ]; then
  chroot "$root" useradd -m -s /bin/bash newcomer
  echo 'newcomer ALL=(ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/newcomer"
  home=/home/newcomer
fi
git clone -q --no-hardlinks . "$root$home/allocscope"
[ "$as_user" -eq 0 ] || chroot "$root" chown -R newcomer: "$home/allocscope"

run=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$home" LANG=C.UTF-8 bash -c "cd ~/allocscope && ./dev.sh demo")
[ "$as_user" -eq 0 ] || run=(su - newcomer -c "cd ~/allocscope && ./dev.sh demo")
start=$SECONDS
chroot "$root" "${run[@]}"
elapsed=$((SECONDS - start))
if [ ! -s "$root$home/allocscope/demo.svg" ] || [ ! -s "$root$home/allocscope/demo.pb.gz" ]; then
  echo "fresh_demo: the demo wrote no demo.svg or demo.pb.gz" >&2
  exit 1
fi
owner=$(chroot "$root" stat -c %U "$home/allocscope/demo.pb.gz")
echo "fresh_demo: ./dev.sh demo as $([ "$as_user" -eq 1 ] && echo "a user with sudo" || echo root)" \
  "in a fresh root: $elapsed s on $(nproc) cores; its outputs belong to $owner"
