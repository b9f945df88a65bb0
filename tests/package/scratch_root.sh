# shellcheck shell=bash
# A scratch Debian root for scripts run as root (tests/package/install_test.sh,
# bench/fresh_demo.sh): a private directory, the host's /proc, /sys and /dev
# bound into it, and on exit everything unmounted, then deleted. Sourced.
# scratch_root_begin NAME sets $work (the directory), $root ($work/root) and
# $MIRROR (apt sources for mmdebstrap: as given, else the host's); NAME
# starts its messages.

scratch_root_begin() {
  scratch_name=$1
  if [ -z "${MIRROR:-}" ]; then
    MIRROR=http://deb.debian.org/debian
    local f
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
      if [ -s "$f" ]; then MIRROR=$f; break; fi
    done
  fi
  work=$(mktemp -d)
  chmod 0755 "$work" # for apt's _apt user, who downloads into the root
  root=$work/root
  trap scratch_root_cleanup EXIT
  trap 'exit 130' INT TERM
}

scratch_mounts() { findmnt -rn -o TARGET | awk -v r="$root" 'index($0, r) == 1'; }

scratch_root_cleanup() {
  local status=$? m
  # Unmount before deleting: rm -rf through a bind mount would delete the
  # host's /dev, or write to its /sys.
  for m in dev sys proc; do
    if mountpoint -q "$root/$m"; then umount -R "$root/$m" || true; fi
  done
  if [ -n "$(scratch_mounts)" ]; then
    echo "$scratch_name: still mounted, $work left in place:" >&2
    scratch_mounts >&2
    exit 1
  fi
  rm -rf --one-file-system "$work"
  exit "$status"
}

# What allocscope reads: /proc, BTF and bpffs under /sys, /dev. rslave, so
# that unmounting there never propagates to the host's mounts.
scratch_bind_host() {
  local m
  for m in proc sys dev; do
    mount --rbind "/$m" "$root/$m"
    mount --make-rslave "$root/$m"
  done
}
