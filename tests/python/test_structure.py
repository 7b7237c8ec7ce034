"""The structural rules of ARCHITECTURE.md that can be checked, checked: the CLI is built on
the public API only; pyo3 only in the bindings (src/python), so that the lock core builds,
tests and simulates without Python; the stores know nothing of protocols or leases; neither
the Python package nor src/ has an import cycle; each integration of the package (mops,
Prefect, joblib) is a package holding its helpers, and the core imports none of them;
ARCHITECTURE.md names only paths that are there, and a glossary word names one concept in
the Rust identifiers."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "blob_lock"


def test_the_cli_uses_public_names_only():
    private = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("blob_lock"):
                module = node.module or ""
                if module.startswith("blob_lock.cli"):
                    continue
                parts = module.split(".")[1:]
                names = [a.name for a in node.names]
                if any(p.startswith("_") for p in parts) or any(
                    n.startswith("_") and n != "__version__" for n in names
                ):
                    private.append(f"{path.name}:{node.lineno}: from {module} import {names}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("blob_lock.") and not a.name.startswith("blob_lock.cli"):
                        if any(p.startswith("_") for p in a.name.split(".")[1:]):
                            private.append(f"{path.name}:{node.lineno}: import {a.name}")
    assert not private, "the CLI imports private names:\n" + "\n".join(private)


def rust_files(under: pathlib.Path) -> list[pathlib.Path]:
    return sorted(under.rglob("*.rs"))


def test_pyo3_only_in_the_bindings():
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in rust_files(ROOT / "src")
        if "python" not in p.relative_to(ROOT / "src").parts[:1]
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\bpyo3\b", line) and not line.lstrip().startswith("//")
    ]
    assert not found, "pyo3 outside src/python: " + ", ".join(found)


def test_stores_import_neither_protocols_nor_leases():
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in rust_files(ROOT / "src" / "store")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"crate::(protocol|lease)\b", line) and not line.lstrip().startswith("//")
    ]
    assert not found, "src/store depends on protocol/ or lease/: " + ", ".join(found)


def _architecture_paths() -> list[tuple[str, list[str]]]:
    """Each path ARCHITECTURE.md names in backticks (`src/store/request/gate.rs`, `cli/`), with the
    folders it may be read from: the repository root, and in a paragraph that opens with a
    bold path (`**`src/lease/`**: ...`), that path's folder (`held/` there is
    src/lease/held/)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    pattern = r"`([\w./-]+(?:\.rs|\.py|\.md|/))`"
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        bases = [""]
        heading = re.match(r"\*\*(.*?)\*\*", paragraph)
        for named in re.findall(pattern, heading.group(1)) if heading else []:
            folder = named if named.endswith("/") else str(pathlib.PurePosixPath(named).parent)
            if (ROOT / folder).is_dir():
                bases.append(folder.rstrip("/") + "/")
        found += [(name, bases) for name in re.findall(pattern, paragraph)]
    return found


def test_every_file_architecture_names_exists():
    """ARCHITECTURE.md's map names files and folders in backticks: each must be there as
    written, from the repository root (`src/python/lock/`, not `python/lock/`, which would
    be the package's), or from the folder that its paragraph's bold heading names. So a
    rename or a removal that forgets the map fails here instead of leaving it to drift."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = set(listed)
    for f in listed:
        files |= {str(parent) + "/" for parent in pathlib.PurePosixPath(f).parents}
    named = _architecture_paths()
    missing = sorted(
        {name for name, bases in named if not any(base + name in files for base in bases)}
    )
    assert len(named) > 40, named
    assert not missing, f"ARCHITECTURE.md names what is not there (from the root): {missing}"


def _python_imports() -> dict[str, set[str]]:
    """Each module of the package (the native one by its stub), with the modules of the
    package it imports anywhere in it (a function's deferred import is a dependency all the
    same)."""
    modules = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi")]):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    found.add(sub if sub in modules else base)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_python_import_cycle():
    """No module of the package imports, directly or through others, one that imports it.
    A package's ``__init__`` that imports its own submodules is not counted as a cycle
    with them (``from pkg import sub`` is an edge to ``sub`` only), as Python resolves it."""
    graph = _python_imports()
    # The graph sees deferred imports and the native module (so it can see a cycle at all).
    assert "blob_lock._credentials._aws" in graph["blob_lock._credentials._bridge"]
    assert "blob_lock._blob_lock" in graph["blob_lock._credentials"]
    cycles = _cycles(graph)
    assert not cycles, "import cycles in python/blob_lock:\n" + "\n".join(cycles)


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle of an import graph met in a depth-first walk, as `a -> b -> a`."""
    cycles: list[str] = []
    done: set[str] = set()
    path: list[str] = []

    def visit(m: str) -> None:
        if m in path:
            cycles.append(" -> ".join([*path[path.index(m) :], m]))
            return
        if m in done:
            return
        path.append(m)
        for n in sorted(graph.get(m, ())):
            visit(n)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
    return cycles


# The package's integrations, each a package of its own (python/blob_lock/<name>/), and the
# library each adapts, by the name it is imported under.
INTEGRATIONS = {"mops": "thds", "prefect": "prefect", "joblib": "joblib"}


def _integration_of(module: str) -> str | None:
    """The integration a module of the package belongs to (`blob_lock.prefect._held`:
    prefect); None for the core."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in INTEGRATIONS else None


def test_no_core_module_imports_an_integration():
    """The core (every module outside the integrations' packages: the locks, the CLI, the
    metrics modules) imports no integration, deferred imports included: an integration can
    then be changed, or be missing its library, without the core noticing."""
    graph = _python_imports()
    assert "blob_lock.joblib._calls" in graph["blob_lock.joblib"], "the check reads the graph"
    found = [
        f"{m} -> {n}"
        for m in sorted(graph)
        if _integration_of(m) is None
        for n in sorted(graph[m])
        if _integration_of(n) is not None
    ]
    assert not found, "core modules that import an integration:\n" + "\n".join(found)


def _libraries(path: pathlib.Path) -> set[str]:
    """The top-level names of what a module imports from outside the package."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - {"blob_lock"}


def test_each_integration_holds_its_helpers():
    """Each integration is a package (`import blob_lock.prefect` as before), and what only it
    uses is inside: a module that only one integration's modules import, directly or
    through others only it uses, and every module that imports the library it adapts
    (Prefect, joblib, thds-mops). So the top of the package is the core alone."""
    graph = _python_imports()
    not_packages = [n for n in INTEGRATIONS if not (PACKAGE / n / "__init__.py").is_file()]
    assert not not_packages, f"integrations that are not a package of their own: {not_packages}"
    # The integration that alone imports a module, found from the integrations down: a
    # module is an integration's when every module that imports it is.
    owner = {m: _integration_of(m) for m in graph}
    changed = True
    while changed:
        changed = False
        for m in graph:
            importers = {owner[n] for n in graph if m in graph[n]}
            if owner[m] is None and len(importers) == 1 and None not in importers:
                owner[m], changed = importers.pop(), True
    outside = [
        f"{m} (only blob_lock.{owner[m]} uses it)"
        for m in sorted(graph)
        if owner[m] is not None and _integration_of(m) is None
    ]
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for name, library in INTEGRATIONS.items():
            if library in _libraries(path) and _integration_of(module) != name:
                outside.append(f"{module} (imports {library}, blob_lock.{name}'s library)")
    assert not outside, "an integration's helpers outside its package:\n" + "\n".join(outside)


def test_python_keeps_no_copy_of_the_scheme_table():
    """The schemes of lock URIs are written in src/store/config/schemes.rs only; Python asks
    the native side (``store_kind``, ``cloud_of``). A scheme alias as a string of its own, or
    a scheme's ``://`` prefix to compare URIs with, is a copy that can drift (a cloud URI
    then taken for a local one, its credential chain skipped)."""
    table_rs = (ROOT / "src" / "store" / "config" / "schemes.rs").read_text()
    rows = re.findall(r"schemes: &\[([^\]]*)\]", table_rs)
    assert rows, "src/store/config/schemes.rs has no table of schemes"
    schemes = set(re.findall(r'"([a-z0-9]+)"', " ".join(rows)))
    assert {"s3a", "abfss", "gs"} <= schemes, schemes
    kinds = {"s3", "azure", "gcs", "file", "memory"}  # the names store_kind returns
    copies = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        # Strings that a table or a test of a URI holds: compared, kept in a collection, or
        # given to startswith/get/partition (not text built with an f-string, nor the name
        # of a program such as the Azure CLI's `az`).
        held = {
            id(child)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Compare, ast.Dict, ast.Set, ast.Tuple, ast.List))
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"startswith", "endswith", "get", "partition"}
            )
            for child in ast.iter_child_nodes(node)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if id(node) not in held:
                continue
            text = node.value.lower()
            prefix = re.fullmatch(r"([a-z0-9]+)://+", text)
            if (prefix and prefix.group(1) in schemes) or text in schemes - kinds:
                copies.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not copies, "a copy of the scheme table in Python:\n" + "\n".join(copies)


def test_the_native_stub_declares_every_result():
    """What the native module returns is typed in its stub: no result is a bare dict, whose
    keys a type checker cannot hold to anything."""
    stub = (PACKAGE / "_blob_lock.pyi").read_text()
    returns = re.findall(r"\)\s*->\s*([^:]+):", stub)
    untyped = [r for r in returns if re.search(r"\b(dict|Dict|Mapping)\[str,\s*(Any|object)\]", r)]
    assert returns and not untyped, untyped


# tests/ by kind: the Rust tests, the Python tests, the servers and stand-ins both run
# against, the proxies between a lock and its store, the programs the tests start, the
# soak (`make soak`, outside `make test`).
KINDS = {"rust", "python", "servers", "proxies", "processes", "soak"}


def test_tests_are_grouped_by_kind():
    """tests/ holds its kinds and what installs them, each file of a kind in its folder."""
    tests = ROOT / "tests"
    top = {p.name for p in tests.iterdir() if not p.name.startswith((".", "__"))}
    assert top == KINDS | {"requirements.txt"}, sorted(top)
    stray = [
        str(p.relative_to(tests))
        for p in tests.rglob("*")
        if (p.suffix == ".rs" and p.parts[len(tests.parts)] != "rust")
        or (p.name.startswith("test_") and p.parts[len(tests.parts)] != "python")
    ]
    assert not stray, f"tests outside their kind's folder: {stray}"


def test_every_rust_test_is_a_cargo_target():
    """A Rust test file that Cargo.toml does not name would never run: tests/rust/ is not
    where cargo looks by itself."""
    cargo = (ROOT / "Cargo.toml").read_text()
    named = set(re.findall(r'^path = "tests/rust/(\w+)\.rs"$', cargo, re.M))
    files = {p.stem for p in (ROOT / "tests" / "rust").glob("*.rs")}
    assert files and files == named, f"files: {sorted(files)}, Cargo.toml: {sorted(named)}"


def test_docs_development_lists_every_test_file():
    """docs/development.md's table of tests names every file and folder of each kind."""
    doc = (ROOT / "docs" / "development.md").read_text()
    entries = [
        p
        for kind in sorted(KINDS)
        for p in sorted((ROOT / "tests" / kind).iterdir())
        if not p.name.startswith((".", "__")) and p.suffix != ".pyc"
    ]
    names = [str(p.relative_to(ROOT)) + ("/" if p.is_dir() else "") for p in entries]
    missing = [name for name in names if f"`{name}`" not in doc]
    assert len(names) > 50 and not missing, (
        "not in docs/development.md's table of tests: " + ", ".join(missing)
    )


# The rooms of src/ from the top floor down, as ARCHITECTURE.md's picture draws them.
FLOORS = [
    ["python"],
    ["doctor", "race", "inventory", "write_once", "semaphore"],
    ["lease"],
    ["inspect"],
    ["protocol"],
    ["store"],
    [
        *("lockfile", "metrics", "timing", "clock", "errors", "runtime"),
        *("owed", "per_process", "thread_signals", "nearest", "mutation"),
    ],
]


def test_rust_rooms_import_only_rooms_below_them():
    """Each file of src/ imports (`crate::room`) only rooms on lower floors, or its own
    room; on the ground floor, its neighbours too. A room not on a floor fails, too."""
    floor = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}
    ground = len(FLOORS) - 1
    up, homeless = [], set()
    for path in rust_files(ROOT / "src"):
        parts = path.relative_to(ROOT / "src").parts
        room = parts[0].removesuffix(".rs")
        if room == "lib":
            continue
        if room not in floor:
            homeless.add(room)
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            grouped = re.findall(r"\bcrate::\{([^}]*)\}", code)
            targets = re.findall(r"\bcrate::([a-z_]+)", code)
            targets += [m for g in grouped for m in re.findall(r"(?:^|,)\s*([a-z_]+)", g)]
            for target in targets:
                if target not in floor:
                    continue  # a name lib.rs re-exports (crate::Result)
                same = target == room or floor[room] == floor[target] == ground
                if not same and floor[target] <= floor[room]:
                    up.append(f"{path.relative_to(ROOT)}:{n}: {room} -> {target}")
    assert not homeless, f"rooms on no floor (add them to FLOORS and the picture): {homeless}"
    assert not up, "imports that run up or across:\n" + "\n".join(up)


def _rust_code(path: pathlib.Path) -> str:
    """A Rust file without its comments, string and character literals (so that a `//`
    inside a string cuts no code, and a path written in a message names no file)."""
    lines = []
    for line in path.read_text().splitlines():
        line = re.sub(r"'(?:\\.|[^'\\])'", "' '", line)
        line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
        lines.append(line.split("//", 1)[0])
    return "\n".join(lines)


def _rust_paths(group: str) -> list[list[str]]:
    """The paths a `use` group names (`{a, b::{c, d as e}, self}`: a, b::c, b::d and [])."""
    found, depth, item = [], 0, ""
    for c in group[1:-1] + ",":
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c != "," or depth:
            item += c
            continue
        item = re.sub(r"\s+as\s+\w+$", "", item.strip())
        head, _, rest = item.partition("{")
        base = [p for p in head.split("::") if p and p not in {"self", "*"}]
        found += [base + sub for sub in _rust_paths("{" + rest)] if rest else [base]
        item = ""
    return found


def _rust_imports() -> dict[str, set[str]]:
    """Each file of src/ with the files of src/ its `crate::` paths name: in a `use` or
    written out where they are used, in its tests too (comments aside). A path names the file
    of its longest module: `crate::lease::held::Lease` is src/lease/held/mod.rs; a name that
    lib.rs re-exports (`crate::Result`) names none. A folder's mod.rs that declares its
    submodules (`mod held;`) is no import of them, as in Python."""
    modules = {}
    for path in rust_files(ROOT / "src"):
        parts = path.relative_to(ROOT / "src").with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "mod" else parts
        if parts != ("lib",):
            modules[parts] = str(path.relative_to(ROOT))

    def file_of(names: list[str]) -> str | None:
        return next(
            (
                modules[tuple(names[:n])]
                for n in range(len(names), 0, -1)
                if tuple(names[:n]) in modules
            ),
            None,
        )

    graph: dict[str, set[str]] = {}
    for name in modules.values():
        code = _rust_code(ROOT / name)
        found = set()
        for m in re.finditer(r"\bcrate((?:\s*::\s*\w+)*)(\s*::\s*\{)?", code):
            base = re.findall(r"\w+", m.group(1))
            paths = [base]
            if m.group(2):
                start, depth = m.end() - 1, 0
                for end in range(start, len(code)):
                    depth += {"{": 1, "}": -1}.get(code[end], 0)
                    if not depth:
                        break
                paths = [base + p for p in _rust_paths(code[start : end + 1])]
            found |= {file_of(p) for p in paths}
        graph[name] = {f for f in found if f is not None and f != name}
    return graph


def test_no_rust_import_cycle():
    """No file of src/ reaches itself through the `crate::` paths it names and those of the
    files they name: not on the ground floor, where rooms may import each other (the floors'
    check lets that pass), nor among one room's files. Arrows point one way (ARCHITECTURE.md):
    Rust compiles a cycle, and the picture would no longer say which stands on which."""
    graph = _rust_imports()
    # The graph sees `use` lists and paths written out in the code (so it can see a cycle).
    assert "src/inspect.rs" in graph["src/lease/lock/mod.rs"], graph["src/lease/lock/mod.rs"]
    assert "src/runtime.rs" in graph["src/owed.rs"], graph["src/owed.rs"]
    cycles = _cycles(graph)
    assert not cycles, "import cycles in src/:\n" + "\n".join(cycles)


def test_architecture_draws_the_floors_in_order():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    picture = text[text.index("```text") : text.index("```", text.index("```text") + 7)]

    def at(room: str) -> int:
        folder = (ROOT / "src" / room).is_dir()
        found = re.search(rf"src/{room}/" if folder else rf"(?<!\w){room}\.rs", picture)
        assert found, f"ARCHITECTURE.md's picture does not show {room}"
        return found.start()

    for upper, lower in zip(FLOORS, FLOORS[1:]):
        assert max(at(r) for r in upper) < min(at(r) for r in lower), (upper, lower)


# -- one word per concept (ARCHITECTURE.md, "Words") ------------------------------------------

# Where identifiers may say "slot": the semaphore, its bindings, and what counts its slots
# (a slot's lifecycle and lease, the metrics, the seeded bugs), and the Rust tests of them.
SLOT_PLACES = (
    "src/semaphore/",
    "src/python/semaphore.rs",
    "src/lease/lifecycle.rs",
    "src/lease/held/mod.rs",
    "src/metrics/",
    "src/python/metrics.rs",
    "src/mutation.rs",
    "tests/rust/semaphore.rs",
    "tests/rust/semaphore_config.rs",
    "tests/rust/requests.rs",
    "tests/rust/simulation.rs",
    "tests/rust/model.rs",
    "tests/rust/sim/",
)
# `Lease::let_go` and its bindings: the glossary's "let go" (stop renewing, no release).
LET_GO_PLACES = ("src/lease/held/mod.rs", "src/python/lock/mod.rs", "tests/rust/")


def _identifiers(path: pathlib.Path) -> list[tuple[int, str, list[str], str]]:
    """Each identifier of a Rust file outside comments and string literals: its line, the
    name, its words (snake_case and CamelCase split, lower case), and what follows it."""
    found = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        code = re.sub(r'"(?:\\.|[^"\\])*"', '""', line).split("//", 1)[0]
        for m in re.finditer(r"\b[A-Za-z_][A-Za-z0-9_]*", code):
            name = m.group(0)
            words = [
                w.lower()
                for part in name.split("_")
                for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", part)
            ]
            found.append((n, name, words, code[m.end() : m.end() + 2]))
    return found


def _misnamed() -> list[str]:
    bad = []
    for path in rust_files(ROOT / "src") + rust_files(ROOT / "tests" / "rust"):
        where = str(path.relative_to(ROOT))
        bindings = where.startswith("src/python/")
        for n, name, words, _after in _identifiers(path):
            at = f"{where}:{n}: {name}"
            joined = "_".join(words)
            # "turn": BlobLock's one acquisition per object (the bindings keep its flag);
            # the semaphore's wait after vacating a slot is its cooldown.
            if {"turn", "turns"} & set(words) and not bindings:
                bad.append(f"{at} (a turn is BlobLock's; the semaphore's pause is its cooldown)")
            # "record": a log record (the bindings' queue of them, the `log` crate's type
            # that the simulation's collector takes); our own last release is a receipt.
            log_crates = name == "Record"
            if {"record", "records", "recorded"} & set(words) and not (bindings or log_crates):
                bad.append(f"{at} (a record is a log record; a release leaves a receipt)")
            # "let go": stop renewing without releasing, `Lease::let_go` and its callers;
            # any end of holding is to vacate.
            if re.search(r"(^|_)let_go(_|$)", joined) and (
                name != "let_go" or not where.startswith(LET_GO_PLACES)
            ):
                bad.append(f"{at} (let go: stop renewing without releasing; else vacate)")
            # "claim": claim_memo's. A lock object's life is its lifecycle.
            if {"claim", "claims", "claimed", "unclaim"} & set(words) and not bindings:
                bad.append(f"{at} (a claim is claim_memo's; a lock's life is its lifecycle)")
            # "slot": a semaphore's slot.
            if {"slot", "slots"} & set(words):
                if not where.startswith(SLOT_PLACES):
                    bad.append(f"{at} (a slot is a semaphore's)")
    return bad


def test_a_glossary_word_names_one_concept_in_rust_identifiers():
    """ARCHITECTURE.md's "Words" give each concept one word. Checked in the Rust sources'
    identifiers (src/, tests/rust/; comments and strings aside): no "turn" outside the
    bindings (it is BlobLock's), no "record" outside them (a log record's), "let_go" only as
    `Lease::let_go` and its callers, no "claim" (claim_memo's, a Python name), and "slot"
    only where a semaphore's slots are (not a request's pass of its store's load)."""
    identifiers = [i for p in rust_files(ROOT / "src" / "semaphore") for i in _identifiers(p)]
    assert any(name == "Cooldown" for _, name, _, _ in identifiers), "the check reads names"
    bad = _misnamed()
    assert not bad, "a glossary word used for another concept:\n" + "\n".join(bad)


def test_the_lifecycle_logs_under_its_own_name():
    """The lifecycle's transitions are logged under `blob_lock::lifecycle` (Python's
    `blob_lock.lifecycle` logger), not under a claim."""
    targets = {
        t
        for p in rust_files(ROOT / "src")
        for t in re.findall(r'target:\s*"([^"]+)"', p.read_text())
    }
    assert "blob_lock::lifecycle" in targets and "blob_lock::claim" not in targets, targets


def test_the_platform_selection_leaves_out_tests_that_exist():
    # platforms/selection.py leaves the signal tests out of the emulated run by name: one
    # renamed would quietly run under qemu again, where its signal can be lost.
    tree = ast.parse((ROOT / "platforms/selection.py").read_text())
    named = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "SIGNALLED" for t in node.targets)
    )
    defined = {
        node.name
        for path in (ROOT / "tests/python").glob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    }
    assert named and named <= defined, f"no such test: {sorted(named - defined)}"
