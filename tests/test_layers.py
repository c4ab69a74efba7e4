"""No import runs up a layer (docs/architecture.md, "Layers"), read from the source with ast."""

from __future__ import annotations

import ast
from pathlib import Path

from bench.import_graph import (
    LAYER_OF,
    LAYERS,
    Import,
    circles,
    modules,
    package_of,
    scan,
    upward_imports,
)

# Lazy imports allowed up a layer: (importer, imported module) -> why. Keep it short; each entry
# is a debt with its reason, and an entry that no longer matches an import fails below.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    ("tuner", "tuner.api"): "the public face re-exports the API on first use (PEP 562 "
    "__getattr__), so `import tuner` stays light",
}


def _disallowed(imports: list[Import]) -> list[Import]:
    return [
        i
        for i in upward_imports(imports)
        if not (i.lazy and (i.source, i.target) in ALLOWED_UPWARD)
    ]


def test_no_import_runs_up_a_layer() -> None:
    bad = _disallowed(scan())
    assert not bad, "imports that run up a layer (docs/architecture.md, Layers):\n" + "\n".join(
        f"  {i} ({i.source_package}: {_layer(i.source_package)} -> "
        f"{i.target_package}: {_layer(i.target_package)})"
        for i in bad
    )


def test_every_allowed_upward_import_still_exists() -> None:
    upward = {(i.source, i.target) for i in upward_imports(scan()) if i.lazy}
    stale = sorted(set(ALLOWED_UPWARD) - upward)
    assert not stale, f"allow-list entries with no such lazy upward import (remove them): {stale}"


def test_no_module_is_named_like_the_apis_search_function() -> None:
    """``tuner.search`` is the API's function; a ``tuner/search`` package would replace it as
    soon as anything imported it (the Ray-side package is ``tuner/tune``)."""
    assert not [m for m in modules() if m == "tuner.search" or m.startswith("tuner.search.")]


def test_every_package_has_a_layer() -> None:
    packages = {package_of(m) for m in modules()}
    assert packages <= set(LAYER_OF), f"packages in no layer: {sorted(packages - set(LAYER_OF))}"


def test_the_layers_table_of_the_docs_names_every_layer() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line[:2] == "| "}
    for layer, packages in LAYERS.items():
        assert layer in rows, f"docs/architecture.md's Layers table lacks the layer {layer}"
        present = [p for p in packages if f"`{p}`" in rows[layer]]
        assert present, f"docs/architecture.md's {layer} row names none of {packages}"


def test_a_lazy_upward_import_is_caught(tmp_path: Path) -> None:
    """The scan sees an import inside a function as well as one at the top of a module."""
    package = tmp_path / "tuner"
    (package / "engine").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "api.py").write_text("")
    (package / "engine" / "__init__.py").write_text(
        "from tuner import errors\n\ndef f():\n    from tuner.api import search\n"
    )
    (package / "errors.py").write_text("")
    found = upward_imports(scan(tmp_path))
    assert [(i.source, i.target, i.lazy) for i in found] == [("tuner.engine", "tuner.api", True)]


def test_no_two_files_import_each_other() -> None:
    """No circle in the file graph, every import counted: eager, lazy, type-only, and a
    module's import of its own package's ``__init__`` (issue 50: there were 5)."""
    assert circles(scan(parents=True)) == []


def test_a_type_only_circle_through_a_package_init_is_caught(tmp_path: Path) -> None:
    """A circle is found through a lazy import, a type-only one and a package's own
    ``__init__``: the three ways the five circles of issue 50 hid from the package graph."""
    package = tmp_path / "tuner"
    (package / "experiment").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "experiment" / "__init__.py").write_text("from tuner.experiment.load import x\n")
    type_only = "if TYPE_CHECKING:\n    from tuner.experiment.limits import y\n"
    (package / "experiment" / "load.py").write_text(
        f"from typing import TYPE_CHECKING\n{type_only}"
    )
    (package / "experiment" / "limits.py").write_text(
        "def f():\n    from tuner.experiment import z\n"
    )
    assert circles(scan(tmp_path)) == []  # without the package's own __init__: no circle
    assert circles(scan(tmp_path, parents=True)) == [
        ["tuner.experiment", "tuner.experiment.limits", "tuner.experiment.load"]
    ]


def test_no_file_over_600_lines_and_no_function_over_70() -> None:
    """The project's size rule (issue 50) on tuner/, tests/ and bench/: a file's
    lines, and a function's from its ``def`` to its last line (decorators apart)."""
    root, over = Path(__file__).resolve().parents[1], []
    for path in sorted(
        p for folder in ("tuner", "tests", "bench") for p in (root / folder).rglob("*.py")
    ):
        text, name = path.read_text(), path.relative_to(root)
        if len(text.splitlines()) > 600:
            over.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 70:
                    over.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert not over, "over the size rule (600 lines a file, 70 a function):\n" + "\n".join(over)


def _layer(package: str) -> str:
    return list(LAYERS)[LAYER_OF[package]]
