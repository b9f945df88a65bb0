#!/usr/bin/env bash
# The allocscope .deb installed into a fresh minimal Debian bookworm
# (mmdebstrap; its Depends from the archive, as a user's apt would resolve
# them) and used there: --version, a man page, real recordings and a report.
# Needs root, a kernel with BPF and BTF, and the Debian archive.
#   tests/package/install_test.sh dist/allocscope_VERSION_amd64.deb
# MIRROR: apt sources for the root (a file or a URL); default: the host's.
set -euo pipefail

fail() {
  echo "install_test: FAIL: $*" >&2
  exit 1
}

if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 allocscope_VERSION_amd64.deb" >&2
  exit 2
fi
[ "$(id -u)" -eq 0 ] || fail "needs root (mmdebstrap, chroot, BPF)"
[ -r /sys/kernel/btf/vmlinux ] || fail "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
deb=$(realpath "$1")
# shellcheck source=tests/package/scratch_root.sh
source "$(dirname "$0")/scratch_root.sh"
scratch_root_begin install_test

start=$SECONDS
echo "install_test: mmdebstrap bookworm (minbase) from $MIRROR, then apt-get install $(basename "$deb")"
export ALLOCSCOPE_DEB=$deb
# shellcheck disable=SC2016 # the hooks' $1 (the root) and $ALLOCSCOPE_DEB are mmdebstrap's shell's
mmdebstrap --variant=minbase --include=man-db --aptopt='APT::Install-Recommends "false"' \
  --customize-hook='cp "$ALLOCSCOPE_DEB" "$1/root/"' \
  --customize-hook='chroot "$1" sh -c "cd /root && apt-get install -y ./allocscope_*_amd64.deb && rm allocscope_*_amd64.deb"' \
  bookworm "$root" "$MIRROR" || fail "mmdebstrap or the installation failed"
echo "install_test: root made and allocscope installed in $((SECONDS - start)) s"

scratch_bind_host
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

version=$(in_root allocscope --version) || fail "allocscope --version failed"
[[ $version =~ ^allocscope\ [0-9]+\.[0-9]+ ]] || fail "allocscope --version printed '$version'"
echo "install_test: ok: $version"

[ -f "$root/lib/systemd/system/allocscope-agent.service" ] || fail "no /lib/systemd/system/allocscope-agent.service"
echo "install_test: ok: agent unit installed"

page=$(in_root man -P cat allocscope-record 2>&1) || fail "man allocscope-record did not render: $page"
[[ $page == *record* ]] || fail "man allocscope-record rendered no page: $page"
echo "install_test: ok: man allocscope-record renders ($(wc -l <<<"$page") lines)"

# About 170 MiB in strings of 1 to 6 KiB, kept: perl's allocations go
# through Perl_safesysmalloc, a symbol of the stripped /usr/bin/perl.
# shellcheck disable=SC2016 # perl's code
workload=(perl -e 'my @k; push @k, "x" x (1000 + $_ % 5000) for 1 .. 50000; print scalar(@k), "\n"')
# Stack counts of a folded file, summed.
folded_total() { awk '{ n += $NF } END { print n + 0 }' "$root$1"; }

in_root allocscope record -q --probes -o /root/probes.pb.gz -o /root/probes.folded -- "${workload[@]}" >/dev/null ||
  fail "allocscope record (probes) failed"
total=$(folded_total /root/probes.folded)
[ "$total" -gt 0 ] || fail "the recording sampled nothing"
grep -q 'Perl_' "$root/root/probes.folded" || fail "no frame of perl's code in the recording"
report=$(in_root allocscope report /root/probes.pb.gz --top 5) || fail "allocscope report failed"
echo "$report"
grep -q 'Perl_' <<<"$report" || fail "no perl function in the report's top 5"
echo "install_test: ok: recorded perl, $total bytes sampled, reported"

# The preload library where the binary looks for it.
in_root allocscope record -q --preload -o /root/preload.folded -- "${workload[@]}" >/dev/null ||
  fail "allocscope record --preload failed"
total=$(folded_total /root/preload.folded)
[ "$total" -gt 0 ] || fail "the recording with --preload sampled nothing"
grep -q 'Perl_' "$root/root/preload.folded" || fail "no frame of perl's code in the recording with --preload"
echo "install_test: ok: recorded perl with --preload, $total bytes sampled"

echo "install_test: passed in $((SECONDS - start)) s"
