"""What the built wheel and sdist must hold (run by .ci/wheel_check.sh): one top-level package,
``tuner``, with every file of the package folder, the console scripts and the license; the sdist
the files a rebuild needs.

Every file under ``tuner/`` is what a run reads of its own: its modules, the built-in search
spaces (listed from the installed package folder), and any data file added there later. The
package ships no data files today (the embedded ``digits`` data come from scikit-learn), and
setuptools leaves a non-``.py`` file out of the wheel unless it is declared as package data: so a
data file added without that declaration fails here, not on a user's machine.

Usage: python .ci/wheel_contents.py WHEEL SDIST
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tuner"
SCRIPTS = ("train-tuner", "tuner")
SDIST_FILES = ("pyproject.toml", "README.md", "LICENSE")


def package_files() -> set[str]:
    """The package folder's files, as paths inside a wheel (``tuner/spaces.py``)."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / PACKAGE).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def distribution_name() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^name = "([^"]+)"', text, re.MULTILINE).group(1)  # type: ignore[union-attr]


def wheel_problems(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info"))
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    tops = {name.split("/")[0] for name in names} - {info}
    problems = []
    if tops != {PACKAGE}:
        problems.append(f"wheel: top-level {sorted(tops)}, expected only {PACKAGE!r}")
    problems += [f"wheel: missing {name}" for name in sorted(package_files() - names)]
    if metadata["Name"] != distribution_name():
        problems.append(f"wheel: Name {metadata['Name']!r}, pyproject says {distribution_name()!r}")
    problems += [
        f"wheel: no console script {script}"
        for script in SCRIPTS
        if not re.search(rf"^{re.escape(script)} = ", entry_points, re.MULTILINE)
    ]
    if f"{info}/licenses/LICENSE" not in names:
        problems.append("wheel: no LICENSE in its .dist-info/licenses")
    return problems


def sdist_problems(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        names = {name.partition("/")[2] for name in archive.getnames()}
    needed = package_files() | set(SDIST_FILES)
    return [f"sdist: missing {name}" for name in sorted(needed - names)]


def main(argv: list[str]) -> int:
    wheel, sdist = (Path(arg) for arg in argv)
    problems = wheel_problems(wheel) + sdist_problems(sdist)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        count = len(package_files())
        print(f"{wheel.name}: top level {PACKAGE} only, all {count} files of {PACKAGE}/, ", end="")
        print(f"scripts {', '.join(SCRIPTS)}, LICENSE; {sdist.name}: the sources to rebuild it")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
