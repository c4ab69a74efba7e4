"""The user's own code, named by a reference (``module:function``, ``path/to/file.py:function``,
or ``@name:function`` for an object a notebook registered), so a run config stays plain text
that travels to Ray workers. The one place that turns a reference into a callable, calls it,
and tells a failure in one line with the user's message and ``file:line``. No torch here.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from tuner.errors import TunerError, error_line

__all__ = [
    "UserCodeError",
    "absolute_file_ref",
    "call_user",
    "is_ref",
    "load_file_module",
    "py_modules",
    "register",
    "registered",
    "resolve",
    "resolve_holder",
    "restore",
]

_REGISTERED: dict[str, Any] = {}  # "@name" -> an object with the user's functions (a notebook)
_FILE_MODULE_PREFIX = "_tuner_user_"


class UserCodeError(TunerError):
    """The user's factory failed or returned the wrong thing (a usage error: exit 2)."""


def is_ref(text: str) -> bool:
    """Whether ``text`` names user code (``module:function``); timm names have no colon."""
    module, sep, attr = text.rpartition(":")
    return bool(sep and module and attr.isidentifier())


def absolute_file_ref(text: str) -> str:
    """``text`` with a relative ``file.py:function`` made absolute (Ray workers run in other
    folders); anything else unchanged."""
    module_part, _, attr = text.rpartition(":")
    if not is_ref(text) or not _is_file(module_part) or Path(module_part).is_absolute():
        return text
    return f"{Path(module_part).expanduser().resolve()}:{attr}"


def _is_file(module_part: str) -> bool:
    return module_part.endswith(".py") or "/" in module_part or "\\" in module_part


def register(name: str, holder: Any) -> str:
    """Make ``holder`` (a notebook's object with ``build_model`` / ``build_data``) nameable as
    ``@name`` in this process (Ray trainables carry :func:`registered`); returns ``@name``."""
    key = f"@{name}"
    _REGISTERED[key] = holder
    return key


def registered() -> dict[str, Any]:
    """The objects registered in this process (what a Ray trainable must carry)."""
    return dict(_REGISTERED)


def restore(objects: dict[str, Any]) -> None:
    """Register ``objects`` here again (a Ray worker, from what the driver's trainable carried)."""
    _REGISTERED.update(objects)


def resolve(ref: str, *, what: str) -> Callable[..., Any]:
    """The callable that ``ref`` names; ``what``: the setting that holds it (``model``)."""
    module_part, _, attr = ref.rpartition(":")
    holder = _holder(module_part, ref=ref, what=what)
    found = getattr(holder, attr, None)
    if not callable(found):
        raise UserCodeError(
            f"{what}={ref!r}: {module_part} has no function {attr!r}; define it or fix the name."
        )
    return found


def resolve_holder(module_part: str) -> Any:
    """The module or registered object that ``module_part`` (before the colon) names."""
    return _holder(module_part, ref=module_part, what="space")


def _holder(module_part: str, *, ref: str, what: str) -> Any:
    if module_part.startswith("@"):
        if module_part not in _REGISTERED:
            raise UserCodeError(
                f"{what}={ref!r}: {module_part} is not registered in this process; pass the "
                "object to tuner.search/tuner.train again, or use an importable module."
            )
        return _REGISTERED[module_part]
    if _is_file(module_part):
        path = Path(module_part).expanduser()
        if path.is_file():
            return load_file_module(path, what=f"{what}={ref!r}:")
        # On a node without the file, Ray's runtime environment (py_modules) has shipped it.
        if importlib.util.find_spec(path.stem) is None:
            raise UserCodeError(f"{what}={ref!r}: file {path} does not exist; check the path.")
        module_part = path.stem
    try:
        return importlib.import_module(module_part)
    except Exception as exc:
        where = _where(exc, None)
        raise UserCodeError(
            f"{what}={ref!r}: module {module_part} does not import ({_line(exc)}{where}); "
            "check the name and that it is on PYTHONPATH."
        ) from exc


def load_file_module(path: str | Path, *, what: str) -> ModuleType:
    """Import a ``.py`` file once per process (spaces and user factories share the import)."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise UserCodeError(f"{what} file {path} does not exist; check the path.")
    name = f"{_FILE_MODULE_PREFIX}{path.stem}_{abs(hash(str(path)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"{what} file {path} cannot be imported as Python.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise UserCodeError(
            f"{what} file {path} failed to import: {_line(exc)}{_where(exc, path)}."
        ) from exc
    return module


def call_user(fn: Callable[..., Any], *args: Any, what: str, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; what it raises becomes one line with its message and where."""
    name = getattr(fn, "__qualname__", None) or f"{type(fn).__name__}.forward"
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise UserCodeError(
            f"{what}: {name}() does not take these arguments ({exc}); it must accept "
            f"{len(args)} positional argument(s)"
            + (f" and the keywords {', '.join(kwargs)}" if kwargs else "")
            + "."
        ) from None
    except ValueError:
        pass  # a builtin without a signature: just call it
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        source = inspect.getsourcefile(fn) if inspect.isfunction(fn) else None
        raise UserCodeError(f"{what}: {name}() raised {_line(exc)}{_where(exc, source)}.") from exc


def _line(exc: BaseException) -> str:
    return error_line(exc).rstrip(".")


def _where(exc: BaseException, source: str | Path | None) -> str:
    """`` at file:line``: the deepest frame in the user's file, else outside tuner and libraries."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if source and Path(f.filename) == Path(source)]
    outside = [f for f in frames if not _library(f.filename) and not _ours(f.filename)]
    found = own or outside
    return f" at {found[-1].filename}:{found[-1].lineno}" if found else ""


def _ours(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(Path(__file__).resolve().parent)


def _library(filename: str) -> bool:
    parts = Path(filename).parts
    return "site-packages" in parts or "importlib" in parts or filename.startswith("<frozen")


def py_modules(refs: Iterable[str]) -> list[str]:
    """What Ray's ``runtime_env["py_modules"]`` must ship so that workers on any node import
    ``refs``: each file or module's top-level package (installed ones travel otherwise)."""
    shipped: list[str] = []
    for ref in refs:
        if not is_ref(ref):
            continue
        module_part = ref.rpartition(":")[0]
        if module_part.startswith("@"):
            continue
        if _is_file(module_part):
            found = str(Path(module_part).expanduser().resolve())
        else:
            found = _top_level_source(module_part.partition(".")[0])
        if found and found not in shipped:
            shipped.append(found)
    return shipped


def _top_level_source(top: str) -> str | None:
    if top == "tuner":
        return None
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    if _library(str(origin)):
        return None
    return str(origin.parent) if origin.name == "__init__.py" else str(origin)
