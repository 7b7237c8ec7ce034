"""The structural rules of ARCHITECTURE.md that can be checked, checked: the CLI is built on
the public API only; pyo3 only in the bindings (src/python), so that the lock core builds,
tests and simulates without Python; the stores know nothing of protocols or leases."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
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


def test_every_file_architecture_names_exists():
    """ARCHITECTURE.md's map names files and folders in backticks (`store/gate.rs`,
    `cas.rs`, `cli/`): each must still be there, so that a rename or a removal that forgets
    the map fails here instead of leaving it to drift."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    names = set(re.findall(r"`([\w./-]+(?:\.rs|\.py|\.md|/))`", text))
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files = set(listed) | {str(pathlib.PurePosixPath(f).parent) for f in listed}
    missing = [
        n
        for n in sorted(names)
        if not any(f == n.rstrip("/") or f.endswith("/" + n.rstrip("/")) for f in files)
    ]
    assert len(names) > 40, sorted(names)
    assert not missing, f"ARCHITECTURE.md names what is not there: {missing}"
