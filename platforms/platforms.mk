# The wheels of other platforms and their checks (docs/platforms.md says what ran where).
# Not part of `make test`: .ci/run runs `make wheels test-platforms` after it and `make lint`.
# Cross builds for Linux and macOS go through zig (PyPI's ziglang and cargo-zigbuild, which
# maturin's --zig uses: it compiles ring's and mimalloc's C for each target and links), Windows's
# through Debian's MinGW-w64; the aarch64 wheel runs in an arm64 Debian root under
# qemu-user, the Windows tests under wine, the musl wheel in a musl CPython built here.
# What is slow to make is kept outside the clone, in PLATFORM_CACHE, so
# a second run, from any clone, is fast: the tools' virtualenv, the cross builds' cargo
# target folder, the arm64 root, the musl CPython and wine's prefix.
PLATFORM_CACHE ?= $(HOME)/.cache/blob-lock-platforms
# Put before each cargo and maturin command of these targets: where several share the
# machine, `make wheels CROSS_WRAP="flock /tmp/cargo.lock nice -n 15"`.
CROSS_WRAP ?=
TOOLS := $(PLATFORM_CACHE)/tools
ARM64_ROOT := $(PLATFORM_CACHE)/arm64-root
MUSL_PYTHON := $(PLATFORM_CACHE)/musl-python
CROSS := env PATH="$(TOOLS)/bin:$$PATH" CARGO_TARGET_DIR="$(PLATFORM_CACHE)/target" $(CROSS_WRAP)
ZIGCARGO := $(CROSS) cargo-zigbuild

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
WHEEL := dist/blob_lock-$(VERSION)-cp39-abi3
WHEEL_AARCH64 := $(WHEEL)-manylinux2014_aarch64.manylinux_2_17_aarch64.whl
WHEEL_MUSL := $(WHEEL)-musllinux_1_2_x86_64.whl

# What users get and this machine can check: Linux on both machines and both C libraries,
# Windows (the gnu target: the msvc one needs Microsoft's tools) and macOS, whose checks
# stop before the link (no macOS SDK can be had here).
PLATFORM_TARGETS := aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl \
	x86_64-pc-windows-gnu x86_64-apple-darwin aarch64-apple-darwin
# Windows wheels link python3.dll: with no Windows Python here, pyo3 writes its import library.
WINDOWS_FEATURES := python,pyo3/generate-import-lib

.PHONY: platform-tools wheels lint-platforms test-platforms test-emulated test-arm64 \
	test-windows test-musl test-units-aarch64 clean-platforms wheel-manylinux-x86_64 \
	wheel-manylinux-aarch64 wheel-musllinux-x86_64 wheel-musllinux-aarch64 wheel-windows-x86_64

# Debian's packages (qemu-user-static, binfmt-support, debootstrap, MinGW-w64's gcc, wine64,
# musl-tools), the rustup targets, and a virtualenv with ziglang, cargo-zigbuild, maturin and
# pefile.
platform-tools:
	platforms/toolchains.sh $(TOOLS) $(PLATFORM_TARGETS) x86_64-pc-windows-msvc

# Every wheel this machine can build, into dist/, each then checked: maturin's own audit
# (--auditwheel check: the glibc symbols and libraries manylinux2014 allows, those
# musllinux_1_2 allows) and platforms/check_wheels.py (every tag there, each binary built for
# its tag's machine, the Windows one linking only python3.dll and Windows' own DLLs and
# exporting PyInit__blob_lock). Each
# wheel-* target runs maturin again: cargo rebuilds only what changed.
MATURIN := $(CROSS) maturin build --quiet --release --out dist
wheels: wheel-manylinux-x86_64 wheel-manylinux-aarch64 wheel-musllinux-x86_64 \
		wheel-musllinux-aarch64 wheel-windows-x86_64
	$(TOOLS)/bin/python platforms/check_wheels.py dist

wheel-manylinux-x86_64: platform-tools
	$(MATURIN) --zig --target x86_64-unknown-linux-gnu --compatibility manylinux2014 --auditwheel check
wheel-manylinux-aarch64: platform-tools
	$(MATURIN) --zig --target aarch64-unknown-linux-gnu --compatibility manylinux2014 --auditwheel check
wheel-musllinux-x86_64: platform-tools
	$(MATURIN) --zig --target x86_64-unknown-linux-musl --compatibility musllinux_1_2 --auditwheel check
wheel-musllinux-aarch64: platform-tools
	$(MATURIN) --zig --target aarch64-unknown-linux-musl --compatibility musllinux_1_2 --auditwheel check
# Windows through Debian's MinGW-w64 (gcc, win32 threads), not zig: maturin's --zig links
# every cdylib of the build with a .def exporting PyInit_blob_lock._blob_lock, and
# crc-fast's fails.
wheel-windows-x86_64: platform-tools
	$(MATURIN) --target x86_64-pc-windows-gnu --features $(WINDOWS_FEATURES)

# Clippy with warnings as errors for each target, with the bindings (all that users get) and
# the tests: every cfg'd path compiled clean. x86_64 glibc is `make lint-rust`'s. The msvc
# target without the clouds and the bindings: ring's C needs Microsoft's tools there, and
# what differs on Windows (the file store) is in the core.
lint-platforms: platform-tools
	set -e; for target in $(PLATFORM_TARGETS); do \
		echo "clippy --target $$target"; \
		case $$target in \
		*windows*) $(CROSS) cargo clippy --quiet --target $$target --all-targets \
			--features $(WINDOWS_FEATURES) -- -D warnings;; \
		*) $(ZIGCARGO) clippy --quiet --target $$target --all-targets --features python \
			-- -D warnings;; \
		esac; \
	done
	echo "clippy --target x86_64-pc-windows-msvc (the core)"
	$(CROSS) cargo clippy --quiet --target x86_64-pc-windows-msvc --all-targets \
		--no-default-features -- -D warnings

test-platforms: lint-platforms test-emulated test-units-aarch64 test-musl

# Under emulation: the aarch64 wheel in the arm64 root (qemu), the core's unit tests on
# Windows (wine).
test-emulated: test-arm64 test-windows

test-arm64: install-test-deps wheel-manylinux-aarch64
	$(PY) platforms/with_moto.py platforms/test_arm64.sh $(ARM64_ROOT) $(WHEEL_AARCH64) $(PY)

# The unit tests of the core, built for arm64 (glibc and musl) and run by qemu: glibc's
# programs with the arm64 root's loader and libraries (-L), musl's static ones as they are.
test-units-aarch64: platform-tools
	platforms/arm64_root.sh $(ARM64_ROOT)
	CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L $(ARM64_ROOT)" \
		$(ZIGCARGO) test --quiet --target aarch64-unknown-linux-gnu --lib
	CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER=qemu-aarch64-static \
		$(ZIGCARGO) test --quiet --target aarch64-unknown-linux-musl --lib

# The core's unit tests on Windows, under wine (its prefix in the cache): the file store's
# rename and LockFileEx paths are the ones that differ there. Debian 12's wine lacks
# bcryptprimitives.dll, which Rust's std imports: a stand-in goes into the prefix.
WINE := env WINEPREFIX=$(PLATFORM_CACHE)/wine WINEDEBUG=-all
WINE_SHIM := $(PLATFORM_CACHE)/wine/drive_c/windows/system32/bcryptprimitives.dll
$(WINE_SHIM): platforms/wine_bcryptprimitives.c
	$(WINE) /usr/lib/wine/wine64 wineboot --init
	x86_64-w64-mingw32-gcc -O2 -shared -o $@ $< -ladvapi32

test-windows: platform-tools $(WINE_SHIM)
	$(WINE) CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=/usr/lib/wine/wine64 \
		$(CROSS) cargo test --quiet --target x86_64-pc-windows-gnu --lib

# musl: the core's unit tests, which run here as they are (static), and the musllinux wheel
# imported by a musl CPython (built once, platforms/musl_python.sh) that runs the smoke test.
test-musl: wheel-musllinux-x86_64
	$(ZIGCARGO) test --quiet --target x86_64-unknown-linux-musl --lib
	platforms/musl_python.sh $(MUSL_PYTHON)
	platforms/test_musl.sh $(MUSL_PYTHON) $(WHEEL_MUSL)

# Everything kept outside the clone (the rustup targets and Debian's packages stay).
clean-platforms:
	rm -rf $(PLATFORM_CACHE)
