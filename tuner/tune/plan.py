"""From options, space and cluster to a concrete plan: workload, resources, budgets."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.config import config_fields, trial_threads
from tuner.errors import TunerError
from tuner.experiment.options import SearchOptions
from tuner.spaces import WORLD_SIZE_PARAM, SearchSpace, train_config_of

if TYPE_CHECKING:  # Optuna loads when a space is sampled: a usage error found before needs none
    import optuna

__all__ = ["SearchPlan", "SpaceProfile", "check_space", "make_plan"]


@dataclass(frozen=True)
class SearchPlan:
    """What the search will run, decided once before it starts (and saved for --resume)."""

    workload_kind: str
    workload: dict[str, Any]  # the fixed TrainConfig fields every trial shares
    cuda: bool  # whether trials get a GPU (decides the space's GPU-only choices)
    num_samples: int  # -1: until the time budget ends
    concurrency: int
    cpus_per_trial: float  # per worker when world_size > 1
    gpus_per_trial: float  # per worker when world_size > 1
    world_size: int = 1  # a trial's world size, unless the space's ``world_size`` says
    max_world_size: int = 1  # the largest world size a trial may take: > 1 is data-parallel
    spread_workers: bool = False
    fixed: dict[str, Any] = field(default_factory=dict)  # the user's --set (pinned if sampled)

    @property
    def sample_budget(self) -> int | None:
        """How many trials to run; None: as many as the time budget allows."""
        return self.num_samples if self.num_samples > 0 else None

    @property
    def gpus_shared(self) -> bool:
        return 0 < self.gpus_per_trial < 1

    @property
    def trial_device(self) -> str:
        return "auto" if self.gpus_per_trial > 0 else "cpu"

    @property
    def torch_threads(self) -> int:
        """Intra-op threads per trial (:func:`tuner.config.trial_threads`)."""
        return trial_threads(self.cpus_per_trial, self.gpus_per_trial)


def make_plan(
    options: SearchOptions, space: SearchSpace, *, node_cpus: list[float], total_gpus: float
) -> SearchPlan:
    """Resources (one whole GPU per trial by default) and the workload.

    Raises:
        TunerError: resources that no node can give, or a workload override that is invalid.
    """
    gpus = options.gpus_per_trial
    if gpus is None:
        gpus = 1.0 if total_gpus >= 1 else 0.0
    if gpus > total_gpus:
        raise TunerError(
            f"--gpus-per-trial {gpus:g} but the cluster has {total_gpus:g} GPU(s); "
            "use --gpus-per-trial 0 for CPU trials."
        )
    draft = draft_plan(options, space, cuda=gpus > 0)
    if draft.max_world_size > 1:
        concurrency, cpus = _worker_groups(
            options, draft.max_world_size, gpus, total_gpus, node_cpus
        )
    else:
        concurrency, cpus = _one_process_trials(options, gpus, total_gpus, node_cpus)
    if cpus > max(node_cpus):
        raise TunerError(
            f"--cpus-per-trial {cpus:g} is more than any node has ({max(node_cpus):g}); lower it."
        )
    return dataclasses.replace(
        draft, concurrency=concurrency, cpus_per_trial=cpus, gpus_per_trial=gpus
    )


def draft_plan(options: SearchOptions, space: SearchSpace, *, cuda: bool) -> SearchPlan:
    """The plan's part that needs no cluster, with placeholder resources.

    Raises:
        TunerError: a workload override that is invalid, a workload the space lacks.
    """
    kind = space.workload(options.workload, cuda=cuda)
    workload = {**space.workloads[kind], **options.overrides}
    train_config_of({}, workload=workload)  # a bad override fails here, in one line
    return SearchPlan(
        workload_kind=kind,
        workload=workload,
        cuda=cuda,
        num_samples=_num_samples(options, space, kind),
        concurrency=1,
        cpus_per_trial=1.0,
        gpus_per_trial=1.0 if cuda else 0.0,
        world_size=options.world_size,
        max_world_size=max(options.world_size, _space_max_world_size(space, cuda=cuda)),
        spread_workers=options.spread_workers,
        fixed=dict(options.overrides),
    )


@dataclass(frozen=True)
class SpaceProfile:
    """What sampling a space revealed, before any trial runs."""

    search_only: list[str]  # suggested names that are no run setting (base_lr): trials drop them
    categoricals: dict[str, list[Any]]  # every categorical parameter's choices, first seen first
    conditional: set[str]  # the parameters only some samples have (gn_groups with GroupNorm)
    returned: set[str]  # every run setting the space returns
    # Every distinct value each returned run setting took, for checks that must hold for all.
    values: dict[str, list[Any]] = field(default_factory=dict)
    # Every parameter's Optuna distribution (what a warm-started trial must fit).
    distributions: dict[str, optuna.distributions.BaseDistribution] = field(default_factory=dict)
    pinned: list[str] = field(default_factory=list)  # the --set names the space samples or returns
    # Each step-denominated setting (``steps=100``, ``eval_every_steps=50``) -> the global batch
    # sizes of the samples it applies to: more than one is a comparison at unequal images.
    step_budgets: dict[str, set[int]] = field(default_factory=dict)


def check_space(space: SearchSpace, plan: SearchPlan) -> SpaceProfile:
    """Sample the space 64 times (milliseconds: spaces only call ``trial.suggest_*``), build
    every config, and profile it.

    Raises:
        TunerError: the space returns something the engine cannot build.
    """
    import optuna

    study = _random_study()
    values: dict[str, list[Any]] = {}
    distributions: dict[str, optuna.distributions.BaseDistribution] = {}
    seen: list[set[str]] = []
    step_budgets: dict[str, set[int]] = {}
    for _ in range(64):
        trial = study.ask()
        params = space.sample(trial, cuda=plan.cuda, fixed=plan.fixed)
        config = train_config_of(params, workload=plan.workload)
        world_size = int(trial.params.get(WORLD_SIZE_PARAM, plan.world_size))
        for name in ("steps", "eval_every_steps"):
            if getattr(config, name) is not None:
                batches = step_budgets.setdefault(f"{name}={getattr(config, name)}", set())
                batches.add(config.batch_size * world_size)
        for name, value in params.items():
            known = values.setdefault(name, [])
            if isinstance(value, str | int | float | bool | None) and value not in known:
                known.append(value)
        seen.append(set(trial.params))
        for name, distribution in trial.distributions.items():
            distributions.setdefault(name, distribution)
    return SpaceProfile(
        search_only=[name for name in distributions if name not in config_fields()],
        categoricals={
            name: list(distribution.choices)
            for name, distribution in distributions.items()
            if isinstance(distribution, optuna.distributions.CategoricalDistribution)
        },
        conditional=set().union(*seen) - set.intersection(*seen),
        returned=set(values),
        values=values,
        distributions=distributions,
        pinned=_pinned(space, plan, study) if plan.fixed else [],
        step_budgets=step_budgets,
    )


def _pinned(space: SearchSpace, plan: SearchPlan, study: optuna.Study) -> list[str]:
    names: set[str] = set()
    for _ in range(16):
        trial = study.ask()
        names |= set(space.sample(trial, cuda=plan.cuda)) | set(trial.params)
    return sorted(name for name in plan.fixed if name in names)


def _num_samples(options: SearchOptions, space: SearchSpace, kind: str) -> int:
    if options.num_samples is not None:
        return options.num_samples
    if options.sampler == "grid" and space.grid:
        return math.prod(len(values) for values in space.grid.values())
    if options.search_time_budget_s is not None:
        return -1
    return space.num_samples[kind]


def _space_max_world_size(space: SearchSpace, *, cuda: bool) -> int:
    import optuna

    study = _random_study()
    largest = 1
    for _ in range(16):  # a conditional parameter shows in some samples only
        trial = study.ask()
        space.sample(trial, cuda=cuda)
        dist = trial.distributions.get(WORLD_SIZE_PARAM)
        if isinstance(dist, optuna.distributions.CategoricalDistribution):
            largest = max(largest, *(int(c) for c in dist.choices))
        elif dist is not None:
            largest = max(largest, int(dist.high))
    return largest


def _worker_groups(
    options: SearchOptions, workers: int, gpus: float, total_gpus: float, node_cpus: list[float]
) -> tuple[int, float]:
    """Concurrency and CPUs per worker: as many trials at a time as whole worker groups fit
    (packed on one node each, or spread), so no trial waits for half its workers."""
    cpus = options.cpus_per_trial or max(1.0, float(min(node_cpus) // workers))
    if options.spread_workers:
        fit_cpus = int(sum(node_cpus) // (cpus * workers))
    else:
        fit_cpus = sum(int(node // (cpus * workers)) for node in node_cpus)
    fit = min(fit_cpus, int(total_gpus // (gpus * workers))) if gpus > 0 else fit_cpus
    need = f"{workers} workers x ({cpus:g} CPU{f', {gpus:g} GPU' if gpus else ''})"
    if fit < 1:
        where = "in all" if options.spread_workers else "on one node (or --spread-workers)"
        raise TunerError(
            f"--world-size {workers} needs {need} {where}, more than the cluster has "
            f"({sum(node_cpus):g} CPUs on {len(node_cpus)} node(s), {total_gpus:g} GPUs); "
            "lower --world-size or --cpus-per-trial."
        )
    if options.concurrency is not None and options.concurrency > fit:
        raise TunerError(
            f"--concurrency {options.concurrency} trials of {need} do not fit at once (only "
            f"{fit} do); lower --concurrency."
        )
    return options.concurrency or fit, cpus


def _one_process_trials(
    options: SearchOptions, gpus: float, total_gpus: float, node_cpus: list[float]
) -> tuple[int, float]:
    """Concurrency and CPUs per trial: on CPUs one trial per node (no shared cores), on GPUs as
    many as they hold."""
    if gpus > 0:
        concurrency = options.concurrency or max(1, int(total_gpus // gpus))
        per_node = math.ceil(total_gpus / len(node_cpus) / gpus)
    else:
        concurrency = options.concurrency or len(node_cpus)
        per_node = math.ceil(concurrency / len(node_cpus))
    cpus = options.cpus_per_trial or max(1.0, float(min(node_cpus) // max(1, per_node)))
    return concurrency, cpus


def _random_study() -> optuna.Study:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
