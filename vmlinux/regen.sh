#!/bin/sh
# Regenerates vmlinux.h from the running kernel's BTF. CO-RE relocates field
# accesses at load time, so one committed header serves other kernels too.
set -e
bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$(dirname "$0")/vmlinux.h"
