"""The Python the docs show is Python this package has: every fenced ``python`` block of the
README and the docs parses, and every ``tuner`` name it imports or reads exists (issue 50: the
architecture's Engine API imported a ``probe`` that had become ``short_run``)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    return [
        (f"{doc.relative_to(ROOT)} block {k}", code)
        for doc in DOCS
        for k, code in enumerate(_BLOCK.findall(doc.read_text()), start=1)
    ]


def documented_names(code: str) -> list[tuple[str, str | None]]:
    """``(module, name)`` for each ``tuner`` name the code imports (``name`` None: the module
    itself), and ``("tuner", attr)`` for each ``tuner.attr`` read after ``import tuner``."""
    found: list[tuple[str, str | None]] = []
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tuner":
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "tuner"]
    if ("tuner", None) in found:
        found += [
            ("tuner", node.attr)
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "tuner"
        ]
    return found


def missing_names(code: str) -> list[str]:
    """The documented ``tuner`` names that do not exist (``module.name``)."""
    missing = []
    for module, name in documented_names(code):
        try:
            imported = importlib.import_module(module)
        except ImportError:
            missing.append(module)
            continue
        if name is not None and not hasattr(imported, name):
            try:  # ``from tuner import engine``: a submodule
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    return missing


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[w for w, _ in _blocks()])
def test_every_documented_tuner_name_exists(where: str, code: str) -> None:
    assert missing_names(code) == [], f"{where} names what tuner does not have"


def test_the_docs_show_python_at_all() -> None:
    """The parametrized test above has blocks to read (a renamed fence would skip it)."""
    assert len(_blocks()) >= 4


def test_a_dead_name_is_caught() -> None:
    """The architecture's old Engine API line: ``probe`` no longer exists."""
    code = "from tuner.engine import train, probe, RunResult\nimport tuner\ntuner.nothing_here()\n"
    assert missing_names(code) == ["tuner.engine.probe", "tuner.nothing_here"]
