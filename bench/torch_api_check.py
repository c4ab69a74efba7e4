"""Every `torch.a.b` name the code uses must exist in this Python's torch.

python bench/torch_api_check.py tuner bench tests   # exit 1 and one line per missing name

bench/gpu_rehearse.sh runs it under the GPU image's torch (2.11.0), where it finds APIs newer
than that on paths the CPU dry run never takes (CUDA streams, memory stats, fused optimizers).
Static: names reached through a variable or getattr are not seen.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import torch


def dotted(node: ast.AST) -> str | None:
    """``torch.cuda.Stream`` for that attribute chain; None for one not rooted at ``torch``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "torch":
        return ".".join(["torch", *reversed(parts)])
    return None


def names_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        # Every prefix of a chain is visited too (torch.cuda, torch.cuda.Stream): all must exist.
        name = dotted(node) if isinstance(node, ast.Attribute) else None
        if name:
            found.add(name)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            found.update(f"{node.module}.{a.name}" for a in node.names)
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("torch"))
    return found


def resolves(name: str) -> bool:
    """Attribute by attribute, importing submodules that a parent does not import itself."""
    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ImportError:
            return False
    return True


def main(roots: list[str]) -> int:
    names: dict[str, set[str]] = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            for name in names_in(path):
                names.setdefault(name, set()).add(str(path))
    missing = {n: where for n, where in names.items() if not resolves(n)}
    print(f"torch {torch.__version__}: {len(names)} torch names, {len(missing)} missing")
    for name, where in sorted(missing.items()):
        print(f"  missing {name}  ({', '.join(sorted(where))})")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["tuner"]))
