#!/usr/bin/env bash
# The aarch64 wheel installed in the arm64 Debian root (platforms/arm64_root.sh) and tested
# there under qemu-user emulation: the smoke test, then the lock, keep_alive, semaphore and
# CLI tests on local files and on S3 (platforms/selection.py says what is left out). Run under
# platforms/with_moto.py: moto runs on this machine at native speed and the emulated tests
# reach it over loopback (a chroot shares the network).
#   usage: python platforms/with_moto.py platforms/test_arm64.sh ROOT WHEEL HOST_PYTHON
#   (HOST_PYTHON: this machine's, to download the test tools' wheels)
set -euo pipefail
root=$1 wheel=$2 host_python=$3
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/platforms/arm64_root.sh" "$root"

# Runs a command in the root, with /proc and /dev mounted in a mount namespace of its own
# (gone when it ends: nothing to unmount, whatever happens).
in_root() {
    unshare --mount --propagation private sh -c \
        'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && exec chroot "$0" "$@"' \
        "$root" env -i PATH=/opt/tests-venv/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
        PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/opt/blob-lock/platforms \
        ${BLOB_LOCK_TEST_MOTO:+BLOB_LOCK_TEST_MOTO=$BLOB_LOCK_TEST_MOTO} "$@"
}

# The test tools in a virtualenv of the root, once: their arm64 wheels downloaded by this
# machine's pip (an emulated pip resolving from PyPI is slow), installed by the root's.
tools=("pytest>=8" "pytest-timeout>=2.3" "pytest-xdist==3.8.*" "boto3")
stamp="$root/opt/tests-venv/.tools"
if [ "$(cat "$stamp" 2>/dev/null)" != "${tools[*]}" ]; then
    rm -rf "$root/opt/tests-venv" "$root/opt/wheelhouse"
    "$host_python" -m pip download --quiet --only-binary=:all: --platform manylinux2014_aarch64 \
        --python-version 3.11 --implementation cp -d "$root/opt/wheelhouse" "${tools[@]}"
    in_root python3 -m venv /opt/tests-venv
    in_root /opt/tests-venv/bin/pip install --quiet --no-index --find-links /opt/wheelhouse \
        "${tools[@]}"
    echo "${tools[*]}" > "$stamp"
fi

# The wheel as a user installs it, and the tests as the clone has them.
cp "$wheel" "$root/opt/"
in_root pip install --quiet --no-index --no-deps --force-reinstall "/opt/$(basename "$wheel")"
rm -rf "$root/opt/blob-lock"
mkdir -p "$root/opt/blob-lock"
cp -r "$here/tests" "$here/platforms" "$here/docs" "$here/pyproject.toml" "$here/README.md" \
    "$root/opt/blob-lock/"

in_root python3 -c 'import platform; print("in the arm64 root:", platform.machine(), platform.libc_ver())'
in_root sh -c 'cd /opt/blob-lock && python tests/processes/smoke.py'
in_root sh -c 'cd /opt/blob-lock && python -m pytest -q -p selection -p no:cacheprovider -n 2 \
    --durations=10 tests/python/test_smoke.py tests/python/test_lock.py \
    tests/python/test_semaphore.py tests/python/test_cli.py tests/python/test_cli_semaphore.py'
