"""Nothing hidden in the install: every third-party package the project's code imports is
declared in pyproject.toml (the package's own code in ``dependencies`` or an extra that the
feature needing it names; the tests in the ``test`` extra), read from the installed metadata,
so a fresh ``pip install -e .`` brings everything the code asks for."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
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


# The GPU machine (bench/README.md "gpu_suite"): its image's packages, plus what .gpu/ carries
# (bench/gpu_pack.sh builds .gpu/ from exactly that list). A runtime dependency in neither stops
# the GPU run at its first import: the H100 run's search lost a device call to platformdirs.
GPU_IMAGE = ROOT / "bench" / "data" / "gpu_image_packages.txt"
GPU_CARRIED = ROOT / "bench" / "data" / "gpu_carried_packages.txt"


def _listed(path: Path) -> set[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {_normalized(line) for line in lines if line}


def _runtime_requirements() -> list[Requirement]:
    """The base dependencies, and what the extras they name (``ray[tune]``) add, from the
    installed metadata."""
    base = [
        Requirement(line)
        for line in importlib.metadata.requires(DISTRIBUTION) or []
        if _base(Requirement(line))
    ]
    added = []
    for requirement in base:
        for extra in requirement.extras:
            for line in importlib.metadata.requires(requirement.name) or []:
                needed = Requirement(line)
                if needed.marker and needed.marker.evaluate({"extra": extra}):
                    added.append(needed)
    return base + added


def _base(requirement: Requirement) -> bool:
    """Not an extra's requirement (those carry an ``extra == ...`` marker)."""
    return not requirement.marker or requirement.marker.evaluate({"extra": ""})


def _gpu_gaps(available: set[str]) -> list[str]:
    return sorted({_normalized(r.name) for r in _runtime_requirements()} - available)


def test_every_runtime_dependency_is_on_the_gpu_image_or_carried_in_dot_gpu() -> None:
    assert _gpu_gaps(_listed(GPU_IMAGE) | _listed(GPU_CARRIED)) == []


@pytest.mark.parametrize("dropped", ["platformdirs", "tensorboardx"])
def test_a_dependency_neither_the_image_nor_dot_gpu_brings_is_a_gap(dropped: str) -> None:
    """Before the H100 run, .gpu/ carried no platformdirs: this check names it."""
    carried = _listed(GPU_CARRIED)
    assert dropped in carried
    assert _gpu_gaps(_listed(GPU_IMAGE) | (carried - {dropped})) == [dropped]


def test_the_cli_knows_the_module_of_every_runtime_dependency() -> None:
    """tuner.errors.RUNTIME_PACKAGES (module -> distribution) names exactly pyproject's base
    dependencies, each under the module it is imported as."""
    from tuner.errors import RUNTIME_PACKAGES

    named = {_normalized(Requirement(p).name) for p in RUNTIME_PACKAGES.values()}
    assert named == _declared()[None]
    distributions = importlib.metadata.packages_distributions()
    for module, package in RUNTIME_PACKAGES.items():
        assert _normalized(Requirement(package).name) in {
            _normalized(d) for d in distributions[module]
        }, module


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        # pandas loads on first use since the usage errors answer before it (issue 40).
        ("pandas", ["report", "--check", str(ROOT / "reports" / "examples" / "input_space-cpu")]),
        ("numpy", ["--version"]),
        ("torch", ["train"]),
    ],
    ids=["at-run-time", "building-the-parser", "torch"],
)
def test_a_missing_dependency_is_one_line_naming_it_and_the_fix(
    module: str, argv: list[str]
) -> None:
    """The H100 run's search stopped on a traceback (no platformdirs); a package hidden from a
    fresh process (None in sys.modules) is now one line, exit 1."""
    from tuner.errors import RUNTIME_PACKAGES, MissingPackage

    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        f"from tuner.commands import main; raise SystemExit(main({argv!r}))"
    )
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path}, check=False,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    package = RUNTIME_PACKAGES[module]
    assert lines[0].startswith(f"error: tuner needs the package '{package}'")
    assert f"pip install '{package}'" in lines[0]
    missing = MissingPackage.of(ModuleNotFoundError(name="platformdirs"))
    assert missing is not None and "'platformdirs'" in str(missing)
    assert MissingPackage.of(ModuleNotFoundError(name="tuner.not_a_module")) is None
