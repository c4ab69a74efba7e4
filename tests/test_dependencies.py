"""Nothing hidden in the install: every third-party package the project's code imports is
declared in pyproject.toml (the package's own code in ``dependencies`` or an extra that the
feature needing it names; the tests in the ``test`` extra), read from the installed metadata,
so a fresh ``pip install -e .`` brings everything the code asks for."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
# The distribution whose metadata is read: pyproject's [project] name (not the import name).
DISTRIBUTION = re.search(
    r'^name = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE
).group(1)
# What each part of the repository may import: the package's own code may lean on its runtime
# dependencies and its optional extras (each imported lazily by the feature that needs it);
# the tests and benchmarks on the test extra too.
RUNTIME = ("tuner", "examples")
DEVELOPER = ("tests", "bench")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str | None, set[str]]:
    """extra (None: the base dependencies) -> the distributions it declares."""
    declared: dict[str | None, set[str]] = {}
    for line in importlib.metadata.requires(DISTRIBUTION) or []:
        requirement = Requirement(line)
        marker = str(requirement.marker or "")
        extra = re.search(r'extra == "([^"]+)"', marker)
        declared.setdefault(extra.group(1) if extra else None, set()).add(
            _normalized(requirement.name)
        )
    return declared


def _first_party() -> set[str]:
    """Names a file of the repository answers to (packages, modules, the tests' helpers)."""
    names = {p.name for p in ROOT.iterdir() if p.is_dir()}
    return names | {p.stem for p in ROOT.rglob("*.py") if ".venv" not in p.parts}


def _imports(folder: str) -> Iterator[tuple[str, Path]]:
    """(top-level module, file) of every absolute import in ``folder``'s Python files."""
    for file in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                yield from ((alias.name.split(".")[0], file) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                yield node.module.split(".")[0], file


def _undeclared(folders: tuple[str, ...], allowed: set[str]) -> list[str]:
    distributions = importlib.metadata.packages_distributions()
    local = _first_party()
    missing = []
    for folder in folders:
        if not (ROOT / folder).is_dir():
            continue
        for module, file in _imports(folder):
            if module in sys.stdlib_module_names or module in local or module == "__future__":
                continue
            names = {_normalized(d) for d in distributions.get(module, [module])}
            if not names & allowed:
                missing.append(f"{file.relative_to(ROOT)}: {module} ({', '.join(sorted(names))})")
    return sorted(set(missing))


def test_the_package_imports_only_what_it_declares() -> None:
    declared = _declared()
    allowed = set().union(*(v for k, v in declared.items() if k != "test"))
    assert _undeclared(RUNTIME, allowed) == []


def test_the_tests_and_benchmarks_import_only_what_they_declare() -> None:
    allowed = set().union(*_declared().values())
    assert _undeclared(DEVELOPER, allowed) == []


def test_the_ray_range_is_pinned_to_the_tested_minor_release() -> None:
    """The code leans on Ray internals (see docs/architecture.md): a Ray release outside the
    tested minor range must not install silently."""
    ray = next(
        Requirement(line)
        for line in importlib.metadata.requires(DISTRIBUTION) or []
        if _normalized(Requirement(line).name) == "ray"
    )
    assert ray.specifier.contains(importlib.metadata.version("ray"))
    assert any(spec.operator in ("<", "==", "~=") for spec in ray.specifier), ray


@pytest.mark.parametrize("module", ["scipy", "PIL"])
def test_a_package_imported_by_the_code_is_a_base_dependency(module: str) -> None:
    """The two packages the code imported without declaring them (scipy, Pillow)."""
    distributions = importlib.metadata.packages_distributions()[module]
    assert {_normalized(d) for d in distributions} & _declared()[None]
