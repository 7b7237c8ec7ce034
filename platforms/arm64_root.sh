#!/usr/bin/env bash
# An arm64 Debian (bookworm) root whose programs run under qemu-user emulation: where the
# aarch64 wheel is installed and tested (platforms/test_arm64.sh). Made once into $1 (outside
# the clone: debootstrap's second stage runs emulated, minutes on 2 cores) and kept.
set -euo pipefail
root=${1:?usage: arm64_root.sh DIR}
# The kernel runs arm64 programs through qemu only once binfmt_misc is mounted and
# qemu-aarch64 registered there (with the F flag: the chroot needs no copy of qemu).
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
if [ -e "$root/.complete" ]; then
    exit 0
fi
rm -rf "$root"
mkdir -p "$(dirname "$root")"
# minbase: no init, no man pages; python3-venv for the tests' virtualenv, procps for pkill
# and ps, which the process tests use.
debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,procps \
    bookworm "$root" http://deb.debian.org/debian
touch "$root/.complete"
