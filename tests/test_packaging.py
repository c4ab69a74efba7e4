"""The wheel holds one top-level package, ``tuner`` (the built-in search spaces inside it, no
generic ``search_spaces`` beside it), every file of it, both console scripts and the license:
built here with the environment's setuptools from a copy of the checkout's packages, read by
the check CI runs on its own build (.ci/wheel_contents.py, which also installs and runs it)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE")


def _contents_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wheel_contents", ROOT / ".ci/wheel_contents.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _copy_of_the_checkout(to: Path) -> Path:
    """The build's inputs and every top-level package folder (a second top-level package in the
    checkout would be offered to setuptools as it is in the checkout)."""
    to.mkdir()
    for name in SOURCES:
        shutil.copy(ROOT / name, to / name)
    for folder in ROOT.iterdir():
        if (folder / "__init__.py").is_file():
            shutil.copytree(folder, to / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
    return to


def test_the_wheel_holds_only_the_tuner_package_and_all_of_it(tmp_path: Path) -> None:
    source = _copy_of_the_checkout(tmp_path / "source")
    out = tmp_path / "dist"
    build = (
        "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", build, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = out / done.stdout.strip().splitlines()[-1]
    assert _contents_check().wheel_problems(wheel) == []
