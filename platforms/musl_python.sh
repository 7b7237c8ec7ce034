#!/usr/bin/env bash
# A CPython linked against musl, to import the musllinux wheel and run the smoke test on this
# (glibc) machine: no registry reached here ships one (no Alpine, and PyPI and npm have no
# musl interpreter), so it is built once from Debian's source of python3.11 with Debian's
# musl-gcc (musl-tools) into $1, outside the clone, and kept. Without zlib, OpenSSL and libffi
# built for musl it lacks zlib, ssl, ctypes and pip: the wheel is unpacked onto PYTHONPATH
# (platforms/test_musl.sh), and the package needs none of them.
set -euo pipefail
prefix=${1:?usage: musl_python.sh DIR}
if [ -x "$prefix/bin/python3" ]; then
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Debian's source index in a list of its own: the machine's apt sources stay as they are.
mkdir -p "$work/apt/parts" "$work/apt/lists/partial" "$work/src"
cat > "$work/apt/parts/debian-src.sources" <<SOURCES
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
touch "$work/apt/none.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/none.list" -o "Dir::Etc::SourceParts=$work/apt/parts"
    -o "Dir::State::Lists=$work/apt/lists" -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" -qq update
(cd "$work/src" && apt-get "${apt_opts[@]}" -qq source --download-only python3.11)
tar -xzf "$work"/src/python3.11_*.orig.tar.gz -C "$work/src"
cd "$work"/src/Python-3.*/
# musl-gcc is Debian's gcc with musl's specs: asked for its multiarch it names glibc's, which
# configure refuses beside the triplet it detects, and setup.py would then build the
# extension modules against glibc's headers (/usr/include/x86_64-linux-gnu). It names musl's.
cat > "$work/musl-cc" <<'CC'
#!/bin/sh
case "$1" in -print-multiarch | --print-multiarch) echo x86_64-linux-musl; exit 0 ;; esac
exec musl-gcc "$@"
CC
chmod +x "$work/musl-cc"
# -O1: the interpreter only has to import the package and run a few processes. PKG_CONFIG:
# the libraries pkg-config knows here are glibc's.
./configure --quiet --prefix="$prefix" --without-ensurepip --disable-test-modules \
    CC="$work/musl-cc" PKG_CONFIG=/bin/false OPT=-O1
make --quiet -j"$(nproc)" >/dev/null 2>make.log || { tail -40 make.log; exit 1; }
make --quiet install >/dev/null
# What the package and the smoke test import, built (setup.py skips a module it cannot build).
"$prefix/bin/python3" -c "import asyncio, json, logging, subprocess, tempfile, select, sys
print('musl CPython', sys.version.split()[0], 'in', sys.prefix)" || { rm -rf "$prefix"; exit 1; }
