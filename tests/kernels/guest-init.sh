#!/bin/busybox sh
# The initramfs's init: the host's root over 9p, read-only, with fresh
# /proc, /sys, /dev, /tmp and /run above it and the share for results at
# /run/matrix; runs the share's run.sh in that root and powers off. Paths
# the share's `keep` file names (the build and the source tree) stay
# visible where the fresh /tmp and /run would hide them.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in /modules/*.ko; do insmod "$m" || echo "init: insmod $m failed"; done
opts=trans=virtio,version=9p2000.L,msize=524288
mkdir -p /matrix /keep
if ! mount -t 9p -o "$opts" matrix /matrix || ! mount -t 9p -o "$opts,ro,cache=loose" host /host; then
  echo "init: the host's root or the share could not be mounted"
  poweroff -f
fi
n=0
while read -r path; do
  n=$((n + 1))
  mkdir -p "/keep/$n"
  mount --bind "/host$path" "/keep/$n"
done </matrix/keep
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
mount -t tmpfs tmp /host/tmp
mount -t tmpfs run /host/run
mkdir -p /host/dev/shm /host/dev/pts /host/run/matrix
mount -t tmpfs shm /host/dev/shm
mount -t devpts devpts /host/dev/pts
mount -t bpf bpf /host/sys/fs/bpf
mount -t cgroup2 cgroup2 /host/sys/fs/cgroup
mount -t tracefs tracefs /host/sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /host/sys/kernel/debug 2>/dev/null
mount --bind /matrix /host/run/matrix
n=0
while read -r path; do
  n=$((n + 1))
  mkdir -p "/host$path" 2>/dev/null
  mount --bind "/keep/$n" "/host$path"
done </matrix/keep
ip link set lo up
echo "init: $(uname -r) up"
HOME=/tmp PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot /host /bin/bash /run/matrix/run.sh \
  >/matrix/guest.log 2>&1
echo "$?" >/matrix/status
sync
poweroff -f
