#!/usr/bin/env bash
# matrix.sh BUILD [NAME...]: allocscope on the kernels Debian users run, each
# booted under QEMU (TCG: no KVM is needed) with this machine's root shared
# read-only, running real recordings against exact truth inside (guest.sh).
# Kernels are downloaded once into ALLOCSCOPE_KERNEL_CACHE (default
# ~/.cache/allocscope/kernels). Exit status 0 when every kernel did what it
# must: record truthfully in every mode, or refuse in one line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
shift
source=$(cd "$here/../.." && pwd)
# CI may run without HOME: the user's home from the password database then.
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${ALLOCSCOPE_KERNEL_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/allocscope/kernels}
# Seconds per kernel, boot to power-off: over it is reported; a guest still
# running at 2.5 times it has hung, and fails.
budget=${ALLOCSCOPE_KERNEL_BUDGET:-240}

# name | suite | metapackage | records or refuses | the features allocscope check must find missing
# (first mainline kernels: uprobe_multi 6.6, uprobe sessions 6.13, multi-byte nop emulation after 6.12
# (6.16 has it); task storage in tracing 5.11, cookies 5.15, bpf_loop and bpf_find_vma 5.17, cgroup
# ancestors 5.14). trixie-backports carries Debian's newest kernel: every feature, uprobe sessions included.
KERNELS=(
  "bookworm-6.1|bookworm|linux-image-amd64|records|uprobe_multi,uprobe_session,nop_emulation"
  "bookworm-6.12|bookworm|linux-image-6.12-amd64|records|uprobe_session,nop_emulation"
  "trixie-6.12|trixie|linux-image-amd64|records|uprobe_session,nop_emulation"
  "trixie-backports|trixie-backports|linux-image-amd64|records|"
  "bullseye-5.10|bullseye|linux-image-amd64|refuses|task_storage,cookies,bpf_loop,bpf_find_vma,ancestor_cgroup,uprobe_multi,uprobe_session,nop_emulation"
)

boot() {  # TREE SHARE: the kernel in TREE runs SHARE/run.sh; its status
  local tree=$1 share=$2
  # One host thread for both vCPUs: with a thread each, a kernel patching its
  # own text (static keys flip as uprobes come and go) can meet a stale int3
  # on the other vCPU and panic (seen on 6.12.118); single is faster here too.
  timeout --kill-after=10 "$((budget * 5 / 2))" qemu-system-x86_64 -accel tcg,thread=single -cpu max -smp 2 -m 3072 \
    -nographic -no-reboot -kernel "$tree/vmlinuz" -initrd "$tree/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1" \
    -virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$share,mount_tag=matrix,security_model=none" >"$share/console.log" 2>&1 || true
  cat "$share/status" 2>/dev/null || echo "timeout"
}

rm -f "$build/kernel-matrix.txt"
results=() failed=0
for entry in "${KERNELS[@]}"; do
  IFS='|' read -r name suite package expect missing <<<"$entry"
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  if ! tree=$("$here/fetch.sh" "$suite" "$package" "$cache"); then
    failed=1
    results+=("FAIL  $name: $package of $suite could not be fetched")
    continue
  fi
  share=$(mktemp -d)
  printf '%s\n' "$build" "$source" >"$share/keep"
  printf 'exec bash %q %q %q %q\n' "$here/guest.sh" "$build" "$expect" "$missing" >"$share/run.sh"
  start=$SECONDS
  status=$(boot "$tree" "$share")
  seconds=$((SECONDS - start))
  release=$(cat "$tree/release")
  if [ "$status" = 0 ]; then
    results+=("ok    $name ($release, $(basename "$tree")): ${expect} as it must, ${seconds} s")
    # A kernel that must refuse runs no scenarios: no log, and no failure.
    slowest=$( (grep -hoE '^\[ +OK +\] [^ ]+ \([0-9]+ ms\)' "$share/integration.log" 2>/dev/null || true) |
      sed -E 's/^\[ +OK +\] ([^ ]+) \(([0-9]+) ms\)/\2 \1/' | sort -rn | awk 'NR <= 4 { printf "%s%s %.0f s", sep, $2, $1 / 1000; sep = ", " }')
    [ -z "$slowest" ] || results+=("        slowest: $slowest")
  else
    failed=1
    results+=("FAIL  $name ($release): status $status after ${seconds} s")
    echo "matrix: $name failed; the guest's log, then the console's end (all kept in $share):" >&2
    cat "$share/guest.log" >&2 2>/dev/null
    tail -n 30 "$share/console.log" >&2
  fi
  [ "$seconds" -le "$budget" ] || results+=("        over the ${budget} s budget: ${seconds} s")
  [ "$status" != 0 ] || rm -rf "$share"
done
{
  echo "kernel matrix:"
  printf '  %s\n' "${results[@]}"
} | tee "$build/kernel-matrix.txt"
exit $failed
