#!/usr/bin/env bash
# What the platform targets (platforms/platforms.mk) build and run with, each from its
# registry and installed once: Debian's packages, rustup's targets, and from PyPI zig,
# cargo-zigbuild, maturin and pefile in a virtualenv of their own (outside the clone).
#   usage: toolchains.sh VENV TARGET...
set -euo pipefail
venv=${1:?usage: toolchains.sh VENV TARGET...}
shift

# qemu-user-static and binfmt-support run arm64 programs, debootstrap makes the arm64 root,
# MinGW-w64's gcc builds for Windows and wine64 runs what it built, musl-tools builds the
# musl CPython.
packages=(qemu-user-static binfmt-support debootstrap gcc-mingw-w64-x86-64-win32 wine64
    musl-tools)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' ||
        missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

installed=$(rustup target list --installed)
wanted=()
for target in "$@"; do
    grep -qx "$target" <<<"$installed" || wanted+=("$target")
done
if [ ${#wanted[@]} -gt 0 ]; then
    rustup target add "${wanted[@]}"
fi

# The versions these builds were checked with (docs/platforms.md).
tools=(ziglang==0.17.1 cargo-zigbuild==0.24.1 maturin==1.16.0 pefile==2024.8.26)
if [ "$(cat "$venv/.tools" 2>/dev/null)" != "${tools[*]}" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${tools[@]}"
    echo "${tools[*]}" > "$venv/.tools"
fi
