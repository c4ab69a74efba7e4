"""The shape of the package, checked from its source: no import cycle, Ray only under
tuner/tune/, and every key of the trial record spelled in tuner/record.py only."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuner import record

PACKAGE = Path(__file__).resolve().parents[1] / "tuner"


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of tuner/."""
    modules = {}
    for file in sorted(PACKAGE.rglob("*.py")):
        parts = file.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return modules


MODULES = _modules()


def _module_level_imports(name: str) -> Iterator[str]:
    """What a module imports when it is imported: module-level statements only (imports
    inside functions run later and cannot close a cycle at import time), ``TYPE_CHECKING``
    blocks left out."""
    file = MODULES[name]
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    for node in _top_level(ast.parse(file.read_text()).body):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.If | ast.Try):
            yield from _top_level(node.body)
            yield from _top_level(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)
        else:
            yield node


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name in MODULES:
        targets = {t for t in _module_level_imports(name) if t in MODULES and t != name}
        # Importing a.b.c imports the packages a and a.b first.
        graph[name] = targets | {p for t in targets for p in _parents(t) if p != name}
    return graph


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES]


def test_no_import_cycle_in_the_package() -> None:
    graph = _graph()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycle = [*path[path.index(name) :], name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        for target in sorted(graph[name]):
            # A package importing its own submodules in __init__ is how packages are made.
            if not target.startswith(name + "."):
                visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def _imports_anywhere(file: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


def test_ray_is_imported_only_under_tuner_tune() -> None:
    importers = {
        name
        for name, file in MODULES.items()
        if any(m == "ray" or m.startswith("ray.") for m in _imports_anywhere(file))
    }
    assert importers and all(name.startswith("tuner.tune") for name in importers), sorted(
        n for n in importers if not n.startswith("tuner.tune")
    )


# ---- every key of the trial record has one spelling --------------------------------------------

KEYS = set(record.SEARCH_KEYS) | set(record.TABLE_KEYS)
# The same words meaning something else in these modules (not a key of a trial's record).
HOMONYMS = {
    "tuner.engine.loop": {"step"},  # the engine's own checkpoint of its loop
    "tuner.engine.state": {"step"},
    "tuner.report.comparison": {"step"},  # an arm of a comparison (the ablation's steps)
    "tuner.report._importance": {"step"},  # an Optuna trial's intermediate value
    "tuner.compare.fidelity": {"kind"},  # a check's kind
    "tuner.report.bench": {"kind"},
    "tuner.commands._flags": {"reports"},  # the default --reports-dir, reports/
    "tuner.experiment._files": {"reports"},  # DEFAULT_REPORTS_DIR
}


def _string_literals(file: Path) -> Iterator[tuple[str, int]]:
    """Code string constants: docstrings and ``__all__`` (names of functions) left out."""
    tree = ast.parse(file.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            skipped.update(id(n) for n in ast.walk(node.value))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
        ):
            yield node.value, node.lineno


@pytest.mark.parametrize("name", sorted(set(MODULES) - {"tuner.record"}))
def test_the_record_keys_are_spelled_only_in_tuner_record(name: str) -> None:
    allowed = HOMONYMS.get(name, set())
    spelled = [
        f"{value!r} at line {line}"
        for value, line in _string_literals(MODULES[name])
        if value in KEYS and value not in allowed
    ]
    assert not spelled, f"{name} spells record keys; import them from tuner.record: {spelled}"


def test_the_record_spells_final_itself() -> None:
    literals = {value for value, _ in _string_literals(MODULES["tuner.record"])}
    assert literals >= KEYS
