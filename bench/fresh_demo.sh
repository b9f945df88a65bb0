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
if [ -z "${MIRROR:-}" ]; then
  MIRROR=http://deb.debian.org/debian
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    if [ -s "$f" ]; then MIRROR=$f; break; fi
  done
fi

work=$(mktemp -d)
chmod 0755 "$work"
root=$work/root
cleanup() {
  local status=$? m
  # Unmount before deleting: rm -rf through a bind mount would reach the host.
  for m in dev sys proc; do
    if mountpoint -q "$root/$m"; then umount -R "$root/$m" || true; fi
  done
  if findmnt -rn -o TARGET | grep -q "^$root"; then
    echo "fresh_demo: still mounted, $work left in place" >&2
    exit 1
  fi
  rm -rf --one-file-system "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$SECONDS
mmdebstrap --quiet --variant=minbase --include=git,sudo,ca-certificates bookworm "$root" "$MIRROR"
echo "fresh_demo: bookworm root made in $((SECONDS - start)) s (not counted)"
# A machine's own name resolves (sudo asks).
echo "127.0.1.1 $(hostname)" >>"$root/etc/hosts"
for m in proc sys dev; do
  mount --rbind "/$m" "$root/$m"
  mount --make-rslave "$root/$m"
done

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
