"""The import graph of ``tuner/``: imports that run up a layer, package knots, one search's path.

    python bench/import_graph.py --label before   # or after; --no-search skips the search

Everything but the path is read with ``ast`` from the source (no module is imported):

- **upward imports**: an import (eager, or lazy inside a function) whose target's layer is above
  its importer's (:data:`LAYERS`, the table of docs/architecture.md). Imports under
  ``if TYPE_CHECKING:`` do not run, so they do not count.
- **knots**: strongly connected components of the package graph (a root module such as
  ``api.py`` is a package of its own), eager and lazy imports alike.
- **circles**: strongly connected components of the *file* graph, every import counted: eager,
  lazy, type-only, and one naming a module's own package (``from tuner.experiment import X``
  in ``tuner/experiment/limits.py`` runs ``experiment/__init__.py``'s names). A type-only
  circle does not fail at run time, but it is still two files that each need the other.
- **the path of one search**: the order in which a real 1-trial smoke search (``python -m tuner
  search smoke_space --num-samples 1 ...``) starts importing each ``tuner`` module (a logging
  finder first in ``sys.meta_path`` is told of each), mapped to packages, repeats in a row
  folded. A *return* is a stop at a package the path has already left. Import order is fixed by
  the code (not by timing), and a lazy import counts only when the search reaches it, so the
  figure is reproducible and measures what one search touches. Only the driver process is read:
  the trial's Ray worker imports the trainable the driver has already imported.

The figures go to reports/benchmarks/import_graph.json under ``--label``, and
reports/benchmarks/import_graph.md is rendered from every label there.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tuner"
REPORT = ROOT / "reports" / "benchmarks" / "import_graph"

# Bottom to top: a package may import its own layer and the layers below it, never above.
# ``tuner`` is the root package (__init__.py: the public face). docs/architecture.md explains
# each layer; keep the two in step.
LAYERS: dict[str, tuple[str, ...]] = {
    "foundation": ("_version", "errors", "units", "usercode", "usercache"),
    "concepts": (
        "tuner",
        "config",
        "techniques",
        "objectives",
        "stats",
        "workloads",
        "halving",  # tuner/halving.py before issue 41's start-up flow: now tuner/tune/halving.py
        "spaces",
        "search_spaces",
    ),
    "engine": ("engine",),
    "records": ("record", "experiment"),
    "measurement": ("measure", "compare", "speed"),
    "decision": ("answer", "decision", "time_to_target", "search_result"),
    "presentation": ("report",),
    "tune": ("tune", "search"),  # search: the Ray-side package's name before issue 41
    "api": ("api",),
    "interface": ("commands", "__main__", "cli"),  # cli: cli.py, folded into commands/ (issue 41)
}
LAYER_OF = {package: i for i, packages in enumerate(LAYERS.values()) for package in packages}


@dataclass(frozen=True)
class Import:
    """One import statement's target, as the importer's source spells it."""

    source: str  # the importing module, e.g. tuner.experiment._load
    target: str  # the imported module, e.g. tuner.tune.options
    line: int
    lazy: bool  # inside a function: runs when the function first runs
    type_only: bool  # under ``if TYPE_CHECKING:``: never runs

    @property
    def source_package(self) -> str:
        return package_of(self.source)

    @property
    def target_package(self) -> str:
        return package_of(self.target)

    @property
    def upward(self) -> bool:
        return LAYER_OF[self.target_package] > LAYER_OF[self.source_package]

    def __str__(self) -> str:
        kind = "lazy " if self.lazy else ""
        return f"{self.source}:{self.line} {kind}imports {self.target}"


def package_of(module: str) -> str:
    """``tuner.tune.run`` -> ``tune``; ``tuner.api`` -> ``api``; ``tuner`` -> ``tuner``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def scan(root: Path = ROOT, *, parents: bool = False) -> list[Import]:
    """Every import of one ``tuner`` module by another (itself excepted; its own parents too
    unless ``parents``: for the layers a package importing its own ``__init__`` is no edge)."""
    known = modules(root)
    found = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, lazy, type_only in _walk(tree.body, lazy=False, type_only=False):
            for target in _targets(node, known):
                own_parent = module.startswith(target + ".")
                if target != module and (parents or not own_parent):
                    found.append(Import(module, target, node.lineno, lazy, type_only))
    return found


def circles(imports: list[Import]) -> list[list[str]]:
    """The file graph's strongly connected components of more than one module, every import
    counted (eager, lazy, type-only; pass ``scan(parents=True)``)."""
    return _components({(i.source, i.target) for i in imports})


def _walk(body: list[ast.stmt], *, lazy: bool, type_only: bool) -> Iterator[tuple]:
    """The import-like nodes of ``body`` with how they run; the statements' nesting decides."""
    for stmt in body:
        if isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            yield from _walk(stmt.body, lazy=lazy, type_only=True)
            yield from _walk(stmt.orelse, lazy=lazy, type_only=type_only)
            continue
        inner = lazy or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Import, ast.ImportFrom)) or _import_module_call(node):
                nested = inner or _in_function(stmt, node)
                yield node, nested, type_only


def _in_function(stmt: ast.stmt, node: ast.AST) -> bool:
    """Whether ``node`` sits inside a function (or lambda) defined within ``stmt``."""
    for fn in ast.walk(stmt):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and any(
            n is node for n in ast.walk(fn)
        ):
            return True
    return False


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_module_call(node: ast.AST) -> bool:
    """``importlib.import_module("tuner.x")`` with a literal name: an import ast can see."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def _targets(node: ast.AST, known: dict[str, Path]) -> list[str]:
    """The ``tuner`` modules ``node`` imports (``from tuner import record`` is tuner.record)."""
    if isinstance(node, ast.Call):
        names = [node.args[0].value]
    elif isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        submodules = [f"{node.module}.{alias.name}" for alias in node.names]
        names = [m if m in known else node.module for m in submodules]
    else:
        names = []
    return sorted({n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")})


def upward_imports(imports: list[Import]) -> list[Import]:
    """The imports that run (eagerly or lazily) up a layer."""
    return [i for i in imports if not i.type_only and i.upward]


def knots(imports: list[Import]) -> list[list[str]]:
    """The package graph's strongly connected components of more than one package."""
    return _components({(i.source_package, i.target_package) for i in imports if not i.type_only})


def _components(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node, largest first."""
    edges = {(a, b) for a, b in edges if a != b}
    if not edges:
        return []
    names = sorted({p for edge in edges for p in edge})
    index = {name: k for k, name in enumerate(names)}
    rows, cols = zip(*((index[a], index[b]) for a, b in edges), strict=True)
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(graph, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for name, label in zip(names, labels, strict=True):
        groups.setdefault(int(label), []).append(name)
    return sorted((g for g in groups.values() if len(g) > 1), key=len, reverse=True)


SEARCH_ARGS = (
    "search smoke_space --num-samples 1 --speed-repeats 0 --remeasure-top 0 --effects-repeats 0"
)
_DRIVER = """
import atexit, json, runpy, sys
out, seen = sys.argv.pop(1), []
class Log:  # first in sys.meta_path: told of every module as its import starts
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "tuner" or name.startswith("tuner."):
            seen.append(name)
sys.meta_path.insert(0, Log)
def dump():
    with open(out, "w") as f:
        json.dump(seen, f)
atexit.register(dump)
sys.argv[0] = "tuner"
runpy.run_module("tuner", run_name="__main__", alter_sys=True)
"""


def search_modules() -> list[str]:
    """The ``tuner`` modules a real 1-trial smoke search's driver imports, in the order begun."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "modules.json"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TUNER_CACHE_DIR": str(Path(tmp) / "c")}
        args = [*SEARCH_ARGS.split(), "--storage", str(Path(tmp) / "runs")]
        cmd = [sys.executable, "-c", _DRIVER, str(out), *args]
        subprocess.run(cmd, cwd=tmp, env=env, check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def path_figures(imported: list[str]) -> dict:
    """Stops (packages in a row folded) and returns (a stop at a package already left)."""
    stops: list[str] = []
    for module in imported:
        package = package_of(module)
        if not stops or stops[-1] != package:
            stops.append(package)
    returns = sum(1 for k, p in enumerate(stops) if p in stops[:k])
    return {
        "stops": len(stops),
        "packages": len(set(stops)),
        "returns": returns,
        "path": stops,
        "modules": len(imported),
    }


def figures(*, with_search: bool) -> dict:
    imports = scan()
    up = upward_imports(imports)
    found = {
        "modules": len(modules()),
        "imports": sum(1 for i in imports if not i.type_only),
        "upward_imports": [str(i) for i in up],
        "upward_count": len(up),
        "knots": knots(imports),
        "circles": circles(scan(parents=True)),
        "commit": _git("rev-parse", "--short", "HEAD"),
    }
    if with_search:
        found["search_path"] = path_figures(search_modules())
    return found


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def render(runs: dict[str, dict]) -> str:
    lines = [
        "# Import graph of `tuner/` (bench/import_graph.py)",
        "",
        "Layers: docs/architecture.md. Upward imports and knots are read with `ast` (eager and",
        "lazy imports; `if TYPE_CHECKING:` ones excluded). The search path: the order in which",
        f"`python -m tuner {SEARCH_ARGS}` (its driver) begins to import each tuner module,",
        "by package, repeats in a row folded; a return is a stop at a package already left.",
        "",
        "| label | commit | modules | imports | upward | knots | file circles | path stops "
        "| returns |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, run in runs.items():
        path = run.get("search_path", {})
        knot_text = "; ".join(", ".join(k) for k in run["knots"]) or "none"
        circle_count = len(run["circles"]) if "circles" in run else "-"
        lines.append(
            f"| {label} | {run['commit']} | {run['modules']} | {run['imports']} "
            f"| {run['upward_count']} | {knot_text} | {circle_count} "
            f"| {path.get('stops', '-')} | {path.get('returns', '-')} |"
        )
    for label, run in runs.items():
        lines += ["", f"## {label}", "", "Upward imports:", ""]
        lines += [f"- `{i}`" for i in run["upward_imports"]] or ["- none"]
        if "circles" in run:
            lines += ["", "File circles (every import: eager, lazy, type-only):", ""]
            lines += [f"- {' <-> '.join(c)}" for c in run["circles"]] or ["- none"]
        if "search_path" in run:
            lines += ["", "Search path: " + " → ".join(run["search_path"]["path"])]
    return "\n".join(lines) + "\n"


_MARK = "<!-- figures: bench/import_graph.py writes below this line -->\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="before | after | ...")
    parser.add_argument("--no-search", action="store_true", help="skip the smoke search")
    args = parser.parse_args()
    json_path = REPORT.with_suffix(".json")
    runs = json.loads(json_path.read_text()) if json_path.exists() else {}
    runs[args.label] = figures(with_search=not args.no_search)
    json_path.write_text(json.dumps(runs, indent=2) + "\n")
    notes = REPORT.with_suffix(".md")
    text = notes.read_text() if notes.exists() else ""
    kept = text.split(_MARK)[0] if _MARK in text else ""  # the hand-written notes above it
    notes.write_text(kept + _MARK + render(runs))
    print(render({args.label: runs[args.label]}))


if __name__ == "__main__":
    main()
