"""Search-space registry: the built-in spaces (``tuner/search_spaces/``) by name, or any ``.py``
file by path.

A space file declares the fixed workload and a define-by-run function over an Optuna trial::

    \"\"\"One line shown by ``tuner spaces``.\"\"\"

    WORKLOADS = {"cpu": {...}, "gpu": {...}}   # fixed TrainConfig fields per kind of machine
    NUM_SAMPLES = {"cpu": 8, "gpu": 48}          # optional: default trial budget per workload
    GRID = {"batch_size": [32, 64], ...}         # optional: enables ``--sampler grid``

    def space(trial: optuna.Trial, *, cuda: bool) -> dict:
        ...  # only trial.suggest_* calls; returns TrainConfig params

``suggest_loader_and_techniques(trial, cuda=cuda)`` lets Optuna search the speed switches of the
technique registry too, for a space that wants that instead of the search's speed probes.

Suggested names that the returned dict does not contain (such as ``base_lr``) are kept as
search-only parameters: the report shows them next to the config they produced.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.config import TrainConfig, check_settings, config_fields
from tuner.errors import TunerError
from tuner.techniques import knob, speed_knobs
from tuner.usercode import call_user, load_file_module, register, resolve_holder

__all__ = [
    "WORKLOAD_KINDS",
    "WORLD_SIZE_PARAM",
    "SearchSpace",
    "SpaceSampler",
    "get_space",
    "list_spaces",
    "load_space_file",
    "register_spaces",
    "space_of",
    "suggest_loader_and_techniques",
    "train_config_of",
]

WORKLOAD_KINDS = ("cpu", "gpu")
WORLD_SIZE_PARAM = "world_size"  # a space parameter: the trial's data-parallel world size
DEFAULT_NUM_SAMPLES = 10
_PACKAGE = "tuner.search_spaces"


@dataclass(frozen=True)
class SearchSpace:
    """A loaded search space: its fixed workloads and its define-by-run function."""

    name: str
    summary: str
    source: str  # module name (built-in) or file path (user space)
    workloads: Mapping[str, Mapping[str, Any]]
    define: Callable[..., dict[str, Any]]
    num_samples: Mapping[str, int]
    grid: Mapping[str, Sequence[Any]] | None

    @property
    def ref(self) -> str:
        """What :func:`get_space` takes to load this space again."""
        if self.source.endswith(".py") or self.source.startswith("@"):
            return self.source
        return self.name if self.source.startswith(f"{_PACKAGE}.") else self.source

    def workload(self, kind: str, *, cuda: bool) -> str:
        """The workload to use: ``kind`` itself, or for ``auto`` the one matching the device."""
        if kind == "auto":
            kind = "gpu" if cuda and "gpu" in self.workloads else "cpu"
        if kind not in self.workloads:
            raise TunerError(
                f"Space {self.name} has no {kind!r} workload; "
                f"use --workload {' or '.join(self.workloads)}."
            )
        return kind

    def sample(
        self, trial: Any, *, cuda: bool, fixed: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Call the define-by-run function (the user's code: what it raises is one usage-error
        line) and check its dict. ``fixed`` (``--set``) pins parameters: a ``suggest_*`` of such a
        name and a returned setting of that name are the fixed value (docs/architecture.md)."""
        fixed = dict(fixed or {})
        sampled = _Pinned(trial, fixed) if fixed else trial
        params = call_user(self.define, sampled, cuda=cuda, what=f"Space {self.name}")
        if not isinstance(params, dict):
            raise TunerError(
                f"Space {self.name}: space() returned {type(params).__name__}; "
                "it must return a dict of TrainConfig settings."
            )
        _check_known(params, f"Space {self.name} returns")
        try:
            check_settings(params)
        except TunerError as exc:
            raise TunerError(f"Space {self.name}: {exc}") from None
        return {**params, **{k: v for k, v in fixed.items() if k in params}}


class _Pinned:
    """An Optuna trial whose ``suggest_*`` return the fixed value for a pinned name."""

    def __init__(self, trial: Any, fixed: Mapping[str, Any]) -> None:
        self._trial = trial
        self._fixed = fixed

    def __getattr__(self, attr: str) -> Any:
        found = getattr(self._trial, attr)
        if not attr.startswith("suggest_"):
            return found

        def suggest(name: str, *args: Any, **kwargs: Any) -> Any:
            return self._fixed[name] if name in self._fixed else found(name, *args, **kwargs)

        return suggest


def train_config_of(
    params: Mapping[str, Any],
    *,
    workload: Mapping[str, Any] | None = None,
    search_only: Collection[str] = (),
    device: str = "auto",
) -> TrainConfig:
    """The ``TrainConfig`` a trial runs: ``workload``, then ``params`` (its sample, or
    ``params.json`` with speed settings), ``search_only`` names (``base_lr``) dropped."""
    merged = {**(workload or {}), **params, **({"device": "cpu"} if device == "cpu" else {})}
    return TrainConfig.from_params(merged, ignore=search_only)


def suggest_loader_and_techniques(trial: Any, *, cuda: bool) -> dict[str, Any]:
    """Let Optuna search AMP and the speed knobs worth trying on this device too (a helper for
    space files), instead of the search's speed probes; a space that suggests one pins it."""
    params: dict[str, Any] = {}
    for entry in (knob("amp"), *speed_knobs(cuda=cuda)):
        if entry.after and params.get(entry.after, knob(entry.after).off) == knob(entry.after).off:
            continue  # acts only on top of a knob left off (prefetch_factor without workers)
        value = trial.suggest_categorical(entry.field, entry.choices(cuda=cuda))
        params.update(
            {k: v for k, v in entry.settings(value).items() if k not in params or v != knob(k).off}
        )
    return params


@dataclass(frozen=True)
class SpaceSampler:
    """The picklable define-by-run function handed to Ray's ``OptunaSearch``: it holds the
    space's source, not the module, so a resumed experiment loads the same file again."""

    ref: str  # SearchSpace.ref
    cuda: bool
    fixed: Mapping[str, Any] | None = None  # the user's --set: pinned, out of the space

    def __call__(self, trial: Any) -> dict[str, Any]:
        return get_space(self.ref).sample(trial, cuda=self.cuda, fixed=self.fixed)


def list_spaces() -> list[SearchSpace]:
    """Every space in the ``tuner.search_spaces`` package, sorted by name."""
    package = importlib.import_module(_PACKAGE)
    modules = [
        importlib.import_module(f"{_PACKAGE}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    ]
    spaces = register_spaces(_from_module(module) for module in modules)
    return [spaces[name] for name in sorted(spaces)]


def register_spaces(spaces: Iterable[SearchSpace]) -> dict[str, SearchSpace]:
    """Index spaces by name; two of one name are refused."""
    registry: dict[str, SearchSpace] = {}
    for space in spaces:
        if space.name in registry:
            raise TunerError(
                f"Two search spaces are named {space.name!r} ({registry[space.name].source} "
                f"and {space.source}); rename one."
            )
        registry[space.name] = space
    return registry


def get_space(name_or_path: str) -> SearchSpace:
    """A space by registry name (``vit_space``), ``.py`` file, module or ``@name``."""
    if name_or_path.endswith(".py") or "/" in name_or_path or "\\" in name_or_path:
        return load_space_file(name_or_path)
    if name_or_path.startswith("@"):
        return _from_module(resolve_holder(name_or_path), source=name_or_path)
    spaces = {space.name: space for space in list_spaces()}
    if name_or_path in spaces:
        return spaces[name_or_path]
    if _importable(name_or_path):
        return _from_module(importlib.import_module(name_or_path))
    raise TunerError(
        f"Unknown search space {name_or_path!r}; choose one of {', '.join(spaces)} "
        "(python -m tuner spaces), or give a path to a .py file or an importable module."
    )


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def load_space_file(path: str | Path) -> SearchSpace:
    """Load a space from a user's ``.py`` file."""
    path = Path(path).expanduser().resolve()
    return _from_module(load_file_module(path, what="Search space"), source=str(path))


def space_of(holder: Any, *, name: str | None = None) -> SearchSpace:
    """A space from an object defined in Python (a notebook's class or namespace) with
    ``space()`` and optionally ``WORKLOADS``, ``build_model`` and ``build_data``; its
    factories are registered in this process as ``@name`` (:mod:`tuner.usercode`)."""
    name = name or getattr(holder, "NAME", None) or getattr(holder, "__name__", "notebook")
    if not callable(getattr(holder, "space", None)):
        raise TunerError(
            f"Search space {name}: the {type(holder).__name__} given has no space(trial, *, "
            "cuda) function; give a space's name, a .py file, or an object that defines one."
        )
    if not hasattr(holder, "WORKLOADS"):
        holder = _WithWorkloads(holder)
    return _from_module(holder, source=register(name, holder))


class _WithWorkloads:
    """A notebook's space without ``WORKLOADS``: the engine's defaults on every machine."""

    WORKLOADS: Mapping[str, Mapping[str, Any]] = {"cpu": {}, "gpu": {}}

    def __init__(self, holder: Any) -> None:
        self._holder = holder

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._holder, attr)


def _from_module(module: Any, source: str | None = None) -> SearchSpace:
    source = source or module.__name__
    workloads = getattr(module, "WORKLOADS", None)
    define = getattr(module, "space", None)
    if not isinstance(workloads, Mapping) or not callable(define):
        raise TunerError(
            f"Search space {source} must define WORKLOADS (a dict of workloads) and "
            "space(trial, *, cuda) -> dict."
        )
    for kind, workload in workloads.items():
        _check_workload(source, kind, workload)
    workloads = _with_user_factories(workloads, module, source)
    name = getattr(module, "NAME", getattr(module, "__name__", source).rsplit(".", 1)[-1])
    if source.endswith(".py"):
        name = getattr(module, "NAME", Path(source).stem)
    elif source.startswith("@"):
        name = source[1:]
    num_samples = getattr(module, "NUM_SAMPLES", {})
    doc = (module.__doc__ or "").strip()
    return SearchSpace(
        name=name,
        summary=doc.splitlines()[0] if doc else "(no description)",
        source=source,
        workloads=workloads,
        define=define,
        num_samples={kind: int(num_samples.get(kind, DEFAULT_NUM_SAMPLES)) for kind in workloads},
        grid=getattr(module, "GRID", None),
    )


def _with_user_factories(
    workloads: Mapping[str, Mapping[str, Any]], module: Any, source: str
) -> dict[str, dict[str, Any]]:
    """A space's ``build_model`` / ``build_data`` become its workloads' ``model`` / ``data``
    unless a workload names its own (``--model`` / ``--data`` override either)."""
    factories = {
        setting: f"{source}:{function}"
        for setting, function in (("model", "build_model"), ("data", "build_data"))
        if callable(getattr(module, function, None))
    }
    return {kind: {**factories, **workload} for kind, workload in workloads.items()}


def _check_workload(source: str, kind: str, workload: Any) -> None:
    if kind not in WORKLOAD_KINDS:
        raise TunerError(
            f"Search space {source}: workload {kind!r} is not one of {', '.join(WORKLOAD_KINDS)}."
        )
    if not isinstance(workload, Mapping):
        raise TunerError(f"Search space {source}: WORKLOADS[{kind!r}] must be a dict.")
    _check_known(workload, f"Search space {source}: WORKLOADS[{kind!r}] has")


def _check_known(settings: Mapping[str, Any], whose: str) -> None:
    unknown = sorted(set(settings) - config_fields())
    if unknown:
        raise TunerError(
            f"{whose} setting(s) the engine does not know: {', '.join(unknown)}; "
            "use TrainConfig field names."
        )
