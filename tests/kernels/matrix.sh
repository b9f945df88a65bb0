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
budget=${ALLOCSCOPE_KERNEL_BUDGET:-300}

# name | suite | metapackage | records or refuses | the features allocscope check must find missing |
# the scenarios run (guest.sh: all on 6.1, newest on 7.3, core on trixie's 6.12, smoke on
# bookworm's build of the same 6.12). Longest first: two at a time, the matrix takes about
# 6.1's guest and a smoke guest on one core, 7.3's and a core guest on the other (2026-12-04:
# 602 s with core on both 6.12 kernels).
# (first mainline kernels: uprobe_multi 6.6, uprobe sessions 6.13, multi-byte nop emulation after 6.12
# (6.16 has it); task storage in tracing 5.11, cookies 5.15, bpf_loop and bpf_find_vma 5.17, cgroup
# ancestors 5.14, 10-byte nops rewritten into calls after 6.18). trixie-backports carries Debian's
# newest kernel: every feature, uprobe sessions and rewritten nops included.
KERNELS=(
  "bookworm-6.1|bookworm|linux-image-amd64|records|uprobe_multi,uprobe_session,nop_emulation,optimized_uprobes|all"
  "trixie-backports|trixie-backports|linux-image-amd64|records||newest"
  "trixie-6.12|trixie|linux-image-amd64|records|uprobe_session,nop_emulation,optimized_uprobes|core"
  "bookworm-6.12|bookworm|linux-image-6.12-amd64|records|uprobe_session,nop_emulation,optimized_uprobes|smoke"
  "bullseye-5.10|bullseye|linux-image-amd64|refuses|task_storage,cookies,bpf_loop,bpf_find_vma,ancestor_cgroup,uprobe_multi,uprobe_session,nop_emulation,optimized_uprobes|all"
)

boot() {  # TREE SHARE: the kernel in TREE runs SHARE/run.sh; its status
  local tree=$1 share=$2 rc=0
  # One host thread for both vCPUs: with a thread each, a kernel patching its
  # own text (static keys flip as uprobes come and go) can meet a stale int3
  # on the other vCPU and panic (seen on 6.12.118); single is faster here too.
  timeout --kill-after=10 "$((budget * 5 / 2))" qemu-system-x86_64 -accel tcg,thread=single -cpu max -smp 2 -m 3072 \
    -nographic -no-reboot -kernel "$tree/vmlinuz" -initrd "$tree/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1" \
    -virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$share,mount_tag=matrix,security_model=none" >"$share/console.log" 2>&1 || rc=$?
  # No status: killed at the limit (124, or 137 after --kill-after), or the guest died on its own.
  cat "$share/status" 2>/dev/null || { [[ ${rc:-0} =~ ^(124|137)$ ]] && echo "timeout"; } || echo "none (the guest died)"
}

first_boot_death() {  # SHARE: the first boot's panic line, or its console's last line
  local log=$1/console-first-boot.log
  { grep -m1 -aoE 'Kernel panic[^[:cntrl:]]*' "$log" || tail -n1 "$log" || echo "no console"; } 2>/dev/null | tr -d '\r' | cut -c1-120
}

# One kernel (fetched beforehand: $2.tree): booted, judged. Its lines for the table into $2, its
# failure's evidence to stderr (a failure's line starts with FAIL).
run_kernel() {
  local entry=$1 out=$2 name suite package expect missing scenarios tree share start status seconds release slowest
  local retried=""
  IFS='|' read -r name suite package expect missing scenarios <<<"$entry"
  # Fetched one at a time beforehand (suites share apt's lists, and their lock).
  if ! tree=$(cat "$out.tree"); then
    echo "FAIL  $name: $package of $suite could not be fetched" >"$out"
    return 0
  fi
  share=$(mktemp -d)
  printf '%s\n' "$build" "$source" >"$share/keep"
  printf 'exec bash %q %q %q %q %q\n' "$here/guest.sh" "$build" "$expect" "$missing" "$scenarios" >"$share/run.sh"
  start=$SECONDS
  status=$(boot "$tree" "$share")
  # No guest.log: the guest died before its script began (a panic at boot under TCG, seen once
  # in apparmor_init on a loaded host), so nothing of allocscope ran. One more boot says whether
  # the kernel boots at all; a failure once the script has begun is never retried.
  if [ ! -e "$share/guest.log" ]; then
    mv "$share/console.log" "$share/console-first-boot.log"
    rm -f "$share/status"
    status=$(boot "$tree" "$share")
    retried="; the first boot ended before the guest began ($(first_boot_death "$share")), booted again"
  fi
  seconds=$((SECONDS - start))
  release=$(cat "$tree/release")
  if [ "$status" = 0 ]; then
    echo "ok    $name ($release, $(basename "$tree")): ${expect} as it must ($scenarios scenarios), ${seconds} s$retried" >"$out"
    # A kernel that must refuse runs no scenarios: no log, and no failure.
    slowest=$( (grep -hoE '^\[ +OK +\] [^ ]+ \([0-9]+ ms\)' "$share/integration.log" 2>/dev/null || true) |
      sed -E 's/^\[ +OK +\] ([^ ]+) \(([0-9]+) ms\)/\2 \1/' | sort -rn | awk 'NR <= 4 { printf "%s%s %.0f s", sep, $2, $1 / 1000; sep = ", " }')
    [ -z "$slowest" ] || echo "        slowest: $slowest" >>"$out"
  else
    echo "FAIL  $name ($release): status $status after ${seconds} s$retried" >"$out"
    {
      echo "matrix: $name failed; the guest's log, then the console's end (all kept in $share):"
      cat "$share/guest.log" 2>/dev/null
      tail -n 30 "$share/console.log"
    } >&2
  fi
  [ "$seconds" -le "$budget" ] || echo "        over the ${budget} s budget: ${seconds} s" >>"$out"
  [ "$status" = 0 ] && rm -rf "$share"
  return 0
}

# Guests boot side by side, as many as there are cores (each QEMU runs on one
# host thread): the matrix takes about the time of its slowest kernels, not
# of all of them. ALLOCSCOPE_KERNEL_JOBS=1 boots one at a time.
jobs=${ALLOCSCOPE_KERNEL_JOBS:-$(nproc)}
rm -f "$build/kernel-matrix.txt"
lines=$(mktemp -d)
failed=0 n=0 selected=()
for entry in "${KERNELS[@]}"; do
  name=${entry%%|*}
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  IFS='|' read -r _ suite package _ <<<"$entry"
  "$here/fetch.sh" "$suite" "$package" "$cache" >"$lines/$n.tree" || rm -f "$lines/$n.tree"
  selected+=("$entry")
  n=$((n + 1))
done
for ((i = 0; i < n; i++)); do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_kernel "${selected[$i]}" "$lines/$i" &
done
wait
# A kernel failed when its line says so, or it wrote none (its job died).
results=()
for ((i = 0; i < n; i++)); do
  if [ ! -s "$lines/$i" ] || grep -q '^FAIL' "$lines/$i"; then failed=1; fi
  [ -s "$lines/$i" ] || echo "FAIL  kernel $((i + 1)) of the matrix: no result" >"$lines/$i"
  mapfile -t -O "${#results[@]}" results <"$lines/$i"
done
rm -rf "$lines"
{
  echo "kernel matrix:"
  printf '  %s\n' "${results[@]}"
} | tee "$build/kernel-matrix.txt"
exit $failed
