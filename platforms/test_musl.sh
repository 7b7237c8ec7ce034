#!/usr/bin/env bash
# The musllinux x86_64 wheel in a musl CPython (platforms/musl_python.sh): imported, checked
# to be running on musl's loader, then the smoke test (tests/processes/smoke.py: a lock held,
# refused to a second process and taken by it, through `python -m blob_lock`). That Python
# has no pip (no zlib): the wheel, a zip, is unpacked onto PYTHONPATH.
#   usage: test_musl.sh MUSL_PYTHON_PREFIX WHEEL
set -euo pipefail
prefix=$1 wheel=$2
here=$(cd "$(dirname "$0")/.." && pwd)
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
python3 -m zipfile -e "$wheel" "$site"
run() {
    env -i PATH=/usr/bin:/bin HOME="$site" PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 \
        "$prefix/bin/python3" "$@"
}
run -c '
import blob_lock._blob_lock as native, platform
libc = {line.split()[-1] for line in open("/proc/self/maps") if "libc.so" in line}
assert libc and all("musl" in path for path in libc), f"not on musl: {libc}"
print("musl CPython", platform.python_version(), "on", *libc, "imports", native.__file__)'
cd "$here"
run tests/processes/smoke.py
