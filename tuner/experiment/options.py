"""What one search is asked to do, :class:`SearchOptions`, and the options as its experiment
keeps them: the metadata's record (:func:`options_record`) and what a resume reads back and may
change (:func:`options_to_resume`). Ray-free and torch-free: a bad option, or a resume that
changes what it may not, answers before anything slow loads.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from tuner.config import check_settings
from tuner.errors import TunerError
from tuner.experiment._files import DEFAULT_REPORTS_DIR, DEFAULT_STORAGE, METADATA_FILE
from tuner.experiment._metadata import read_metadata
from tuner.experiment.limits import LIMITS, NUM_SAMPLES, limit_note
from tuner.objectives import OBJECTIVE_NAMES, ObjectiveName
from tuner.record import MAX_MEMORY_BYTES
from tuner.spaces import WORKLOAD_KINDS

__all__ = [
    "CHANGEABLE_ON_RESUME",
    "OBJECTIVES",
    "SAMPLERS",
    "SHOWN_ON_RESUME",
    "WORKLOAD_CHOICES",
    "SamplerName",
    "SearchOptions",
    "options_record",
    "options_to_resume",
]

OBJECTIVES: tuple[str, ...] = OBJECTIVE_NAMES
WORKLOAD_CHOICES = ("auto", *WORKLOAD_KINDS)
# The one list of sampler names (--sampler's choices); tuner.tune.samplers makes each sampler.
SamplerName = Literal["tpe", "gp", "nsga2", "random", "grid"]
SAMPLERS: tuple[str, ...] = get_args(SamplerName)


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """Everything ``tuner search`` takes; the CLI flags map to these fields one to one."""

    space: str  # registry name or path to a .py file
    name: str | None = None  # experiment name; default <space>-<timestamp>
    storage: str = DEFAULT_STORAGE  # local folder or a URI Ray accepts (s3://, gs://, ...)
    reports_dir: str = DEFAULT_REPORTS_DIR
    no_report: bool = False  # the CLI writes no report (kept, so that --resume keeps it)
    # Budgets: the search stops at whichever comes first (None: the space's default samples).
    num_samples: int | None = None
    search_time_budget_s: float | None = None
    objective: ObjectiveName = "pareto"
    sampler: SamplerName = "tpe"
    seed: int = 0
    max_memory_bytes: int | None = None
    # Resources: None picks 1 GPU per trial where GPUs exist, else the cores split by concurrency.
    concurrency: int | None = None
    gpus_per_trial: float | None = None
    cpus_per_trial: float | None = None
    address: str | None = None  # join an existing Ray cluster (else RAY_ADDRESS, else local)
    # Data-parallel trials (tuner.tune.ddp_trial): N > 1 makes each trial a run of N
    # ranks (its world size); --cpus/--gpus-per-trial are then per rank.
    world_size: int = 1
    spread_workers: bool = False  # a trial's workers on different nodes (default: packed)
    resume: bool = False
    max_failures: int = 2
    # A trial checkpoints at its first evaluation, then at most this often (0: at every one):
    # a restarted trial trains again at most this much; each checkpoint costs a write.
    checkpoint_every_s: float = 10.0
    # Workload: the space's declared workload, then explicit overrides (TrainConfig fields).
    workload: str = "auto"
    overrides: Mapping[str, Any] = field(default_factory=dict)
    probe_steps: int = 5  # measured steps of each speed-probe run
    speed_repeats: int = 2  # interleaved repeats of the speed probes per training config (0: off)
    # The speed probes take at most this share of the trials' time (tuner.speed.budget);
    # None (--probe-share off): not bounded, every knob probed.
    probe_share: float | None = 0.2
    feasibility_steps: int = 5  # measured steps before each run's feasibility check
    fresh_probes: bool = False  # ignore the speed probes remembered on this machine (re-probe)
    warm_start: str | None = None  # an earlier experiment (name or folder) whose trials to reuse
    early_stopping: bool = True  # ParetoASHA for pareto, ASHA for one objective
    remeasure_top: int = 3
    # The accuracy every trial's time to target is measured to (tuner.time_to_target); None:
    # derived from the candidates, and the answer says how.
    target_accuracy: float | None = None
    # Re-measurement and effects: interleaved rounds (on a CPU short windows of one build each),
    # at least remeasure_repeats, at most the max, ended early once resolved (tuner.compare.trust)
    remeasure_repeats: int = 8
    remeasure_max_repeats: int = 20
    effects_repeats: int = 20  # at most this many rounds of the technique effects (0: none)
    # Re-measurement and effects together: seconds ("90") or a share of the whole command
    # ("25%": they take at most a quarter of it, the trials the rest); "off": no limit.
    trust_budget: str = "25%"
    mlflow: str | None = None  # MLflow tracking URI; None: nothing is sent anywhere
    wandb: str | None = None  # W&B project: offline runs in the experiment folder
    verbose: bool = False

    def __post_init__(self) -> None:
        """Raise :class:`TunerError` naming the first impossible option."""
        for flag, value, choices in (
            ("--objective", self.objective, OBJECTIVES),
            ("--sampler", self.sampler, SAMPLERS),
            ("--workload", self.workload, WORKLOAD_CHOICES),
        ):
            if value not in choices:
                raise TunerError(f"{flag} {value!r} is not one of {', '.join(choices)}.")
        for flag, value in (
            ("--num-samples", self.num_samples),
            ("--search-time-budget-s", self.search_time_budget_s),
            ("--max-memory", self.max_memory_bytes),
            ("--concurrency", self.concurrency),
            ("--cpus-per-trial", self.cpus_per_trial),
            ("--probe-steps", self.probe_steps),
            ("--feasibility-steps", self.feasibility_steps),
            ("--world-size", self.world_size),
        ):
            if value is not None and not value > 0:
                raise TunerError(f"{flag} {value} must be positive.")
        if self.gpus_per_trial is not None and self.gpus_per_trial < 0:
            raise TunerError(f"--gpus-per-trial {self.gpus_per_trial} must be 0 or more.")
        gpus = self.gpus_per_trial
        if gpus is not None and gpus > 1 and gpus != int(gpus):
            raise TunerError("--gpus-per-trial above 1 must be a whole number of GPUs.")
        for flag, value in (
            ("--speed-repeats", self.speed_repeats),
            ("--effects-repeats", self.effects_repeats),
        ):
            if value < 0:
                raise TunerError(f"{flag} {value} must be 0 (off) or more.")
        if self.probe_share is not None and not 0 <= self.probe_share <= 1:
            raise TunerError(
                f"--probe-share {self.probe_share} must be a share of the trials' time, 0 to 1 "
                "(0.2, 20%, or off)."
            )
        if self.checkpoint_every_s < 0:
            raise TunerError(f"--checkpoint-every-s {self.checkpoint_every_s} must be 0 or more.")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise TunerError(
                f"--target-accuracy {self.target_accuracy} must be in (0, 1]: a validation "
                "accuracy, e.g. 0.8."
            )
        if self.max_failures < 0 or self.remeasure_top < 0 or self.remeasure_repeats < 1:
            raise TunerError(
                "--max-failures and --remeasure-top must be >= 0, --remeasure-repeats >= 1."
            )
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
        if self.name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", self.name):
            raise TunerError(
                f"--name {self.name!r} must be letters, digits, '_', '.', '-' (no slashes)."
            )

    @property
    def multi_objective(self) -> bool:
        return self.objective == "pareto"

    def trust_limit_s(self, so_far_s: float) -> float | None:
        """Seconds re-measurement and effects may take after a command that ran ``so_far_s``
        (start-up and trials): a share ``s`` of the whole leaves them ``so_far_s * s / (1 - s)``.

        Raises:
            TunerError: ``--trust-budget`` is not seconds, a percentage or ``off``.
        """
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


class _Located(Protocol):
    """Where an experiment lives, as :func:`options_to_resume` reads it: an
    :class:`~tuner.experiment.paths.ExperimentPaths`, which imports this module."""

    name: str
    local: Path


def options_to_resume(
    paths: _Located, given: SearchOptions, *, named: frozenset[str] | None = None
) -> SearchOptions:
    """The options the experiment at ``paths`` was started with; of those ``given`` sets (the
    fields ``named``, or, without it, those unlike the defaults) the changeable ones are applied
    and said, any other refused. Named, a field can be set back to its default.

    Raises:
        TunerError: the experiment folder has no metadata (nothing to resume), or ``given``
            changes an option a resumed search cannot change.
    """
    metadata = read_metadata(paths.local)
    if not metadata:
        raise TunerError(
            f"No experiment {paths.name!r} in {paths.local.parent} ({METADATA_FILE} missing); "
            "check --name and --storage, or start it without --resume."
        )
    saved = {_RENAMED.get(k, k): v for k, v in metadata["options"].items()}
    known = {f.name for f in dataclasses.fields(SearchOptions)}
    for name in sorted(set(saved) - known):
        # Kept in the metadata by an older tuner: said, so a resumed search is not silently
        # another search.
        print(
            f"note: option {name!r} saved by an older tuner is unknown here; ignored.",
            file=sys.stderr,
        )
    own = SearchOptions(**{k: v for k, v in saved.items() if k in known})
    if own.num_samples is None and int(metadata.get(NUM_SAMPLES) or -1) > 0:
        # The count it resolved at its start (the space's, the grid's), not resolved again:
        # a new time budget or an edited space would change it.
        own = dataclasses.replace(own, num_samples=int(metadata[NUM_SAMPLES]))
    changes = _changes_on_resume(own, given, paths.local, named)
    return dataclasses.replace(own, **changes, name=paths.name, resume=True)


def _changes_on_resume(
    own: SearchOptions, given: SearchOptions, folder: Path, named: frozenset[str] | None
) -> dict[str, Any]:
    """The options ``given`` sets (``named``: options_to_resume) to another value than the
    experiment's ``own`` (whose folder is ``folder``): the changeable ones, each said in a note
    (what the printed command to continue keeps).

    Raises:
        TunerError: the first one a resumed search cannot apply.
    """
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
            flag = _flag(name)
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
    flag = _flag(name)
    if isinstance(value, bool):
        return flag if value else f"no {flag}"
    return f"{flag} {value}"


# The fields whose flag is not their name spelled with dashes.
_FLAGS = {MAX_MEMORY_BYTES: "--max-memory", "overrides": "--set", "space": "SPACE"}


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))
