"""What one search is asked to do (:class:`SearchOptions`, whose fields are its flags), as its
metadata keeps them and as a resume reads them back (:func:`options_to_resume`). Ray-free and
torch-free: a bad option answers before anything slow loads."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import numbers
import os
import re
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from tuner.config import check_settings
from tuner.errors import TunerError
from tuner.experiment._files import DEFAULT_REPORTS_DIR, DEFAULT_STORAGE, METADATA_FILE
from tuner.experiment._metadata import read_metadata
from tuner.experiment.limits import LIMITS, NUM_SAMPLES, limit_note
from tuner.objectives import OBJECTIVE_NAMES, ObjectiveName
from tuner.spaces import WORKLOAD_KINDS
from tuner.units import parse_memory_size

__all__ = [
    "CHANGEABLE_ON_RESUME",
    "NUMBERS",
    "OBJECTIVES",
    "SAMPLERS",
    "SHOWN_ON_RESUME",
    "WORKLOAD_CHOICES",
    "Flag",
    "SamplerName",
    "SearchOptions",
    "check_name",
    "options_record",
    "options_to_resume",
]

OBJECTIVES: tuple[str, ...] = OBJECTIVE_NAMES
WORKLOAD_CHOICES = ("auto", *WORKLOAD_KINDS)
# The one list of sampler names (--sampler's choices); tuner.tune.samplers makes each sampler.
SamplerName = Literal["tpe", "gp", "nsga2", "random", "grid"]
SAMPLERS: tuple[str, ...] = get_args(SamplerName)


@dataclass(frozen=True)
class Flag:
    """A :class:`SearchOptions` field as a ``tuner search`` flag (the field's metadata): its
    help and the values it takes, checked for the API's keywords as for the flags. A flag
    another owner defines (``commands/_flags.py``, ``--target-accuracy``) keeps its own help;
    ``help`` is what this command adds to it."""

    help: str
    section: str = ""  # the --help section this flag opens (the next ones follow it)
    flag: str = ""  # default: --field-name; a switch that is on by default: --no-field-name
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None  # the flag's text to the value (default: its type)
    choices: tuple[str, ...] = ()
    gt: float | None = None  # a number's bounds, as pydantic spells them
    ge: float | None = None
    le: float | None = None
    why: str = ""  # what the value is, said after a bound it breaks

    def broken(self, value: float) -> str:
        """The bound ``value`` breaks, in words; "" if none."""
        above = (self.gt is None or value > self.gt) and (self.ge is None or value >= self.ge)
        if above and (self.le is None or value <= self.le):
            return ""
        if self.le is None:
            return "positive" if self.gt == 0 else f"{self.ge:g} or more"
        low = f"({self.gt:g}" if self.ge is None else f"[{self.ge:g}"
        return f"in {low}, {self.le:g}]"


def _option(default: Any, help: str, **flag: Any) -> Any:
    """A :class:`SearchOptions` field and its flag (:class:`Flag`)."""
    value = {"default_factory": dict} if isinstance(default, dict) else {"default": default}
    return field(**value, metadata={"flag": Flag(help, **flag)})


def _share(text: str) -> float | None:
    """``0.2``, ``20%``, or ``off`` (no bound)."""
    if text == "off":
        return None
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise TunerError(f"{text!r} is not a share (0.2, 20%, or off)") from None


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """Everything ``tuner search`` takes (``tuner.search``'s keywords); each field's metadata is
    its flag (:class:`Flag`), in ``--help``'s order."""

    space: str = _option(
        MISSING, "space name (python -m tuner spaces) or path to a .py file", flag="SPACE"
    )
    # Budgets: the search stops at whichever comes first.
    num_samples: int | None = _option(
        None, "number of trials (default: the space's)", section="budget and objective", gt=0
    )
    search_time_budget_s: float | None = _option(
        None,
        "stop the whole search, running trials included, once its trials have run this long, "
        "every --resume of it together (each trial's own training time: --time-budget-s)",
        metavar="SECONDS",
        gt=0,
    )
    objective: ObjectiveName = _option(
        "pareto", "pareto: maximize throughput and accuracy (default)", choices=OBJECTIVES
    )
    sampler: SamplerName = _option("tpe", "Optuna sampler", choices=SAMPLERS)
    seed: int = _option(
        0, "random seed (of the sampler, the start-up design and every trial's run; default 0)"
    )
    max_memory_bytes: int | None = _option(
        None,
        "memory budget per trial, e.g. 20GiB (a constraint for Optuna)",
        flag="--max-memory",
        metavar="SIZE",
        parse=parse_memory_size,
        gt=0,
    )
    early_stopping: bool = _option(  # ParetoASHA for pareto, ASHA for one objective
        True,
        "run every trial to its end (default: stop trials ranked outside the best third at each "
        "rung: by non-dominated rank for pareto, by the metric otherwise)",
    )
    workload: str = _option(
        "auto",
        "which declared workload: auto = gpu if trials get a GPU",
        section="workload (what each trial trains)",
        choices=WORKLOAD_CHOICES,
    )
    # The space's declared workload, then these TrainConfig fields: --set and the run settings'
    # own flags (commands/search.py's WORKLOAD_FLAGS).
    overrides: Mapping[str, Any] = _option(
        {},
        "a field the space samples is fixed to VALUE and leaves the space: every trial runs it, "
        "the start line says so",
        flag="--set",
    )
    probe_steps: int = _option(5, "measured steps of each speed-probe run", gt=0)
    probe_share: float | None = _option(  # tuner.speed.budget
        0.2,
        "the share of the trials' time the speed probes may take, all trials together (default "
        "0.2 = 20%): a knob left unprobed for want of it keeps its default and is recorded as "
        "not probed; later trials probe what is left; off: no bound",
        parse=_share,
        ge=0,
        le=1,
        why="a share of the trials' time (0.2, 20%, or off)",
    )
    feasibility_steps: int = _option(
        5,
        "measured steps before each run's feasibility check, which stops a run over the memory "
        "budget",
        gt=0,
    )
    speed_repeats: int = _option(
        2,
        "interleaved repeats of the speed probes that choose the accuracy-neutral knobs per "
        "training config (default 2: enough to choose by estimate; 3 or more also tells which "
        "gains are beyond noise; 0: no probes, those knobs stay as the space sets them)",
        ge=0,
        why="0 turns the probes off",
    )
    fresh_probes: bool = _option(
        False,
        "probe every training config again instead of reusing the speed probes earlier searches "
        "on this machine remembered (in $TUNER_CACHE_DIR, else the user cache folder, e.g. "
        "~/.cache/tuner); the new probes replace them",
    )
    # Resources: None picks 1 GPU per trial where GPUs exist, else the cores split by concurrency.
    concurrency: int | None = _option(
        None,
        "max parallel trials (default: #GPUs, or 1 per node on CPU)",
        section="resources and cluster",
        gt=0,
    )
    gpus_per_trial: float | None = _option(
        None, "default 1 where GPUs exist; a fraction shares GPUs (reported)", ge=0
    )
    cpus_per_trial: float | None = _option(None, "default: a node's cores per trial", gt=0)
    address: str | None = _option(None, "join a Ray cluster (host:port, auto; or RAY_ADDRESS)")
    world_size: int = _option(  # tuner.tune.ddp_trial
        1,
        "each trial's data-parallel world size: N workers (DDP, kept warm across trials); "
        "CPUs/GPUs per trial are then per worker (default 1: one process per trial)",
        gt=0,
    )
    spread_workers: bool = _option(
        False, "place a trial's workers on different nodes (default: packed on one node)"
    )
    max_failures: int = _option(2, "retries of a crashed trial, each from its checkpoint", ge=0)
    checkpoint_every_s: float = _option(  # each checkpoint costs a write
        10.0,
        "a trial checkpoints at its first evaluation, then at the first one this many seconds "
        "after its last checkpoint, and at its end: what a crashed trial trains again (0: at "
        "every evaluation; default 10)",
        ge=0,
    )
    name: str | None = _option(None, "default: SPACE-DATE-TIME", section="experiment")
    storage: str = _option(DEFAULT_STORAGE, "")  # a local folder or a URI Ray accepts
    reports_dir: str = _option(DEFAULT_REPORTS_DIR, "")
    resume: bool = _option(False, "continue the interrupted experiment --name")
    warm_start: str | None = _option(
        None,
        "start the study with the finished trials of an earlier experiment of the same space and "
        "workload (its name under --storage, or its folder): the sampler learns from them and "
        "the start-up design skips what they cover",
        metavar="EXPERIMENT",
    )
    remeasure_top: int = _option(
        3,
        "re-measure this many top candidates after the search; more when both ends of the front "
        "and the soonest to the target need it (the search says so)",
        ge=0,
    )
    target_accuracy: float | None = _option(  # tuner.time_to_target; help: the default's words
        None,
        "derived from the candidates: the lower of the most accurate's lower 95% bound and their "
        "median accuracy; every trial's time to it is measured, and the default recommendation "
        "is the config that reaches it soonest",
        gt=0,
        le=1,
        why="a validation accuracy, e.g. 0.8",
    )
    # After the trials (tuner.compare.trust): interleaved rounds, ended early once resolved.
    remeasure_repeats: int = _option(8, "interleaved rounds of the re-measurement, at least", ge=1)
    remeasure_max_repeats: int = _option(
        20,
        "at most this many rounds; it stops earlier (at round 8, 12, 16) once every interval is "
        "within +-3 %",
    )
    effects_repeats: int = _option(
        20,
        "at most this many rounds of the controlled technique effects around the recommended "
        "config, ended like the re-measurement; 0: skip them",
        ge=0,
        why="0 skips them",
    )
    trust_budget: str = _option(
        "25%",
        "time for the re-measurement, the seed retraining and the effects together: seconds "
        "(90), a share of the whole command (25%, the default), or off; their first rounds (3 "
        "pairs, 3 seeds) run even past it",
        metavar="SECONDS|SHARE",
    )
    no_report: bool = _option(False, "skip writing the report")  # kept, so --resume keeps it
    mlflow: str | None = _option(
        None,
        "also log every trial to this MLflow tracking URI (sqlite:///mlflow.db, http://host:5000, "
        "...) and the report to a parent run; needs pip install 'train-tuner[mlflow]'. Off by "
        "default: nothing leaves the machine",
        metavar="URI",
    )
    wandb: str | None = _option(
        None,
        "also log every trial as a W&B run of this project, offline, into the experiment folder's "
        "wandb/ (upload later with wandb sync); needs pip install 'train-tuner[wandb]'",
        metavar="PROJECT",
    )
    verbose: bool = _option(False, "also Ray Tune's own progress")

    def __post_init__(self) -> None:  # the first impossible option, named
        for name in _PATHS:  # the API's pathlib.Path, as the text the CLI gives
            if isinstance(getattr(self, name), os.PathLike):
                object.__setattr__(self, name, os.fspath(getattr(self, name)))
        for option in dataclasses.fields(self):
            _check(option, getattr(self, option.name))
        if not isinstance(self.overrides, Mapping) or not all(
            isinstance(key, str) for key in self.overrides
        ):
            raise TunerError(
                f"--set {self.overrides!r} must be a mapping of run settings by name, e.g. "
                "{'lr': 0.001}."
            )
        gpus = self.gpus_per_trial
        if gpus is not None and gpus > 1 and gpus != int(gpus):
            raise TunerError("--gpus-per-trial above 1 must be a whole number of GPUs.")
        if self.remeasure_max_repeats < self.remeasure_repeats:
            raise TunerError(
                f"--remeasure-max-repeats {self.remeasure_max_repeats} is below "
                f"--remeasure-repeats {self.remeasure_repeats}; raise it."
            )
        self.trust_limit_s(1.0)  # a bad --trust-budget fails here, before Ray starts
        _check_tracking(self.mlflow, self.wandb)
        check_settings(self.overrides)  # --set lr=abc fails here, before Ray starts
        if self.resume and not self.name:
            raise TunerError("--resume needs --name of the experiment to continue.")
        if self.name is not None:
            check_name(self.name)

    @staticmethod
    def flag(name: str) -> str:
        """The flag of option ``name``: ``max_memory_bytes`` -> ``--max-memory``."""
        option = SearchOptions.__dataclass_fields__[name]
        spelled = option.metadata["flag"].flag
        return spelled or "--" + "no-" * (option.default is True) + name.replace("_", "-")

    @property
    def multi_objective(self) -> bool:
        return self.objective == "pareto"

    def trust_limit_s(self, so_far_s: float) -> float | None:
        """Seconds re-measurement and effects may take after a command that ran ``so_far_s``
        (start-up and trials): a share ``s`` of the whole leaves them ``so_far_s * s / (1 - s)``."""
        text = str(self.trust_budget).strip()
        if text.lower() == "off":
            return None
        try:
            value = float(text.removesuffix("%"))
        except ValueError:
            value = math.nan
        if text.endswith("%") and 0 < value < 100:
            return so_far_s * value / (100 - value)
        if not text.endswith("%") and value > 0:
            return value
        raise TunerError(
            f"--trust-budget {text!r}: give seconds (90), a share of the whole command below "
            "100 % (25%), or off."
        )


# The options' kinds, checked here: the API's keywords arrive unparsed (an int for --storage
# failed deep in the driver, in a traceback). NUMBERS: each numeric option's type (the flag's).
_HINTS = typing.get_type_hints(SearchOptions)
NUMBERS = {
    name: number
    for name, hint in _HINTS.items()
    for number in (int, float)
    if number in (get_args(hint) or (hint,))
}
_TEXTS = {
    name
    for name, hint in _HINTS.items()
    if (hint is str or set(get_args(hint)) == {str, type(None)}) and name != "trust_budget"
}  # --trust-budget takes seconds too: its own check reads str(value)
_FLAGS = {n for n, hint in _HINTS.items() if hint is bool}
_PATHS = ("space", "storage", "reports_dir", "warm_start")


def _check(option: dataclasses.Field[Any], value: Any) -> None:
    """One option's value against its :class:`Flag`: its type, choices and bounds."""
    spec: Flag = option.metadata["flag"]
    flag, number = SearchOptions.flag(option.name), NUMBERS.get(option.name)
    kind = {int: numbers.Integral, float: numbers.Real}.get(number)  # numpy's numbers too
    if value is None:
        return
    if option.name in _TEXTS and not isinstance(value, str):
        raise TunerError(f"{flag} {value!r} must be text (a str), not {type(value).__name__}.")
    if option.name in _FLAGS and not isinstance(value, bool):
        raise TunerError(f"{flag} {value!r} must be True or False.")
    if kind and (isinstance(value, bool) or not isinstance(value, kind)):
        whole = "a whole" if number is int else "a"
        raise TunerError(f"{flag} {value!r} must be {whole} number.")
    if spec.choices and value not in spec.choices:
        raise TunerError(f"{flag} {value!r} is not one of {', '.join(spec.choices)}.")
    bound = spec.broken(value) if kind else ""
    if bound:
        raise TunerError(f"{flag} {value} must be {bound}{spec.why and ': ' + spec.why}.")


def check_name(name: str) -> None:
    """A run's ``--name``, the name of its folders: a slash would make more of them."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise TunerError(f"--name {name!r} must be letters, digits, '_', '.', '-' (no slashes).")


def _check_tracking(mlflow: str | None, wandb: str | None) -> None:
    """``--mlflow`` needs a URI, ``--wandb`` a project name, and each its package."""
    if mlflow is not None:
        if not mlflow.strip():
            raise TunerError(
                "--mlflow needs a tracking URI, e.g. sqlite:///mlflow.db or http://host:5000."
            )
        _check_installed("mlflow", flag="--mlflow", client="MLflow")
    if wandb is not None:
        if not re.fullmatch(r"[^/\\#?%:]{1,128}", wandb) or not wandb.strip():
            raise TunerError(
                f"--wandb {wandb!r} must be a W&B project name (no / \\ # ? % :), e.g. my-search."
            )
        _check_installed("wandb", flag="--wandb", client="W&B")


def _check_installed(package: str, *, flag: str, client: str) -> None:
    """A tracking flag's package, found before Ray starts (its extra of the same name)."""
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a broken install, or one hidden in sys.modules
        found = False
    if not found:
        raise TunerError(
            f"{flag} needs {client}, which is not installed: pip install 'train-tuner[{package}]' "
            f"(or pip install {package})."
        )


def options_record(options: SearchOptions) -> dict[str, Any]:
    """The options as the metadata keeps them (what --resume reads back)."""
    return {**dataclasses.asdict(options), "overrides": dict(options.overrides)}


# Options saved under an earlier name, read under their current one.
_RENAMED = {"time_budget_s": "search_time_budget_s"}
# What a resumed search may take from its own command line: how to reach the cluster and how
# much to print, where the report goes, the time left to re-measurement and effects, and its
# limits (more trials, a later time budget: checked against what it ran, tuner.experiment.limits).
# Every other option is the experiment's own: a resumed search continues the same search.
CHANGEABLE_ON_RESUME = (
    "address", "verbose", "reports_dir", "no_report", "trust_budget", "checkpoint_every_s",
    *LIMITS,
)  # fmt: skip
# Those the command that continues an experiment spells out (how to reach the cluster and how
# much to print are the caller's): what it runs, in full.
SHOWN_ON_RESUME = ("reports_dir", "no_report", "trust_budget", "checkpoint_every_s", *LIMITS)
_IDENTITY = ("name", "storage", "resume")  # how the experiment was found, not what it runs


def options_to_resume(
    folder: Path, given: SearchOptions, *, named: frozenset[str] | None = None
) -> SearchOptions:
    """The options the experiment in ``folder`` was started with; of those ``given`` sets (the
    fields ``named``, or, without it, those unlike the defaults) the changeable ones are applied
    and said, any other refused. Named, a field can be set back to its default."""
    metadata, name = read_metadata(folder), folder.name
    if not metadata:
        raise TunerError(
            f"No experiment {name!r} in {folder.parent} ({METADATA_FILE} missing); "
            "check --name and --storage, or start it without --resume."
        )
    file = folder / METADATA_FILE
    if not (metadata.get("options") or {}).get("space"):  # a search's start writes them first
        raise TunerError(
            f"{file} holds no options of the search it began: {name!r} cannot be resumed; "
            f"start a new search (another --name); `tuner report {folder}` still reads "
            "what it holds."
        )
    saved = {_RENAMED.get(k, k): v for k, v in metadata["options"].items()}
    known = {f.name for f in dataclasses.fields(SearchOptions)}
    for option in sorted(set(saved) - known):
        # Kept in the metadata by an older tuner: said, so a resumed search is not silently
        # another search.
        print(
            f"note: option {option!r} saved by an older tuner is unknown here; ignored.",
            file=sys.stderr,
        )
    try:
        own = SearchOptions(**{k: v for k, v in saved.items() if k in known})
    except TunerError as exc:  # the saved options, not the flags given now: say whose
        raise TunerError(
            f"{file} holds an option no search starts with ({str(exc).rstrip('.')}); the "
            "experiment folder is corrupt, restore the file, or start a new search."
        ) from None
    if own.num_samples is None and int(metadata.get(NUM_SAMPLES) or -1) > 0:
        # The count it resolved at its start (the space's, the grid's), not resolved again:
        # a new time budget or an edited space would change it.
        own = dataclasses.replace(own, num_samples=int(metadata[NUM_SAMPLES]))
    changes = _changes_on_resume(own, given, folder, named)
    return dataclasses.replace(own, **changes, name=name, resume=True)


def _changes_on_resume(
    own: SearchOptions, given: SearchOptions, folder: Path, named: frozenset[str] | None
) -> dict[str, Any]:
    """The options ``given`` sets to another value than the experiment's ``own``: the
    changeable ones, each said in a note; the first other one is refused."""

    default = SearchOptions(space="")
    changes: dict[str, Any] = {}
    for option in dataclasses.fields(SearchOptions):
        name = option.name
        value = getattr(given, name)
        if name == "space" and value:  # the same file, given relative or by another spelling
            from tuner.spaces import get_space

            value = get_space(value).ref
        set_here = value != getattr(default, name) if named is None else name in named
        if name in _IDENTITY or not set_here or value == getattr(own, name):
            continue
        if name not in CHANGEABLE_ON_RESUME:
            flag = SearchOptions.flag(name)
            shown = _shown(name, value)
            raise TunerError(
                f"{shown} cannot change on --resume: {own.name or 'the experiment'} continues "
                f"the search it started ({_shown(name, getattr(own, name))}); leave {flag} out, "
                f"or start a new search with it and --warm-start {own.name}."
            )
        if name in LIMITS:
            note = limit_note(name, value, folder=folder, own=own)
        else:
            note = f"{_shown(name, value)} applies from this resume on."
        changes[name] = value
        if name != "verbose":
            print(f"note: {note}", file=sys.stderr)
    return changes


def _shown(name: str, value: Any) -> str:
    """An option as its flag(s) spell it."""
    if name == "overrides":
        sets = " ".join(f"{k}={v}" for k, v in dict(value).items())
        return f"--set {sets}" if sets else "no --set"
    if name == "space":
        return f"space {value}"
    flag = SearchOptions.flag(name)
    if isinstance(value, bool):  # a switch given, or not (--no-report, --no-early-stopping)
        return flag if value != SearchOptions.__dataclass_fields__[name].default else f"no {flag}"
    return f"{flag} {value}"
