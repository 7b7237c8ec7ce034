"""The documentation builds as a user would build it: ``pip install '.[docs]'`` then
``mkdocs build``. The ``docs`` extra must install the theme and every plugin mkdocs.yml
uses, at the versions tests/requirements.txt pins for ``make docs``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]

# What mkdocs itself brings: no package to install for these.
BUILT_IN_THEMES = {"mkdocs", "readthedocs"}
BUILT_IN_PLUGINS = {"search"}


class _Loader(yaml.SafeLoader):
    """mkdocs.yml as data: its tags (``!relative``, ``!ENV``) read as plain values."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _pins(lines: list[str]) -> dict[str, str]:
    return {_name(r): r.strip() for r in lines if r.strip() and not r.lstrip().startswith("#")}


def _used() -> set[str]:
    """The packages mkdocs.yml needs: mkdocs, its theme's, each plugin's, and each
    mkdocstrings handler's."""
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    theme = config.get("theme")
    theme_name = theme.get("name") if isinstance(theme, dict) else theme
    needed = {"mkdocs"}
    if theme_name and theme_name not in BUILT_IN_THEMES:
        needed.add(f"mkdocs-{theme_name}")
    for plugin in config.get("plugins") or []:
        name, settings = next(iter(plugin.items())) if isinstance(plugin, dict) else (plugin, {})
        if name in BUILT_IN_PLUGINS:
            continue
        needed.add(name if name.startswith("mkdocs") else f"mkdocs-{name}")
        for handler in (settings or {}).get("handlers") or {}:
            needed.add(f"{name}-{handler}")  # mkdocstrings-python
    return needed


def test_the_docs_extra_installs_everything_mkdocs_yml_uses():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "docs" in extras, "no docs extra: pip install '.[docs]' cannot build the docs"
    docs = _pins(extras["docs"])
    used = _used()
    assert used >= {"mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python"}, used
    missing = sorted(used - set(docs))
    assert not missing, f"mkdocs.yml uses {missing}, which the docs extra does not install"
    # The same versions as the test command's (make docs builds with those).
    tested = _pins((ROOT / "tests" / "requirements.txt").read_text().splitlines())
    for name in used:
        assert docs[name] == tested[name], (docs[name], tested[name])


def test_development_md_says_how_to_build_the_docs_with_the_extra():
    text = (ROOT / "docs" / "development.md").read_text()
    assert "pip install '.[docs]'" in text and "mkdocs build" in text
