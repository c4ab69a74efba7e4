"""Deterministic errors found in the driver, before any trial starts: a bad workload fails
every trial the same way, so retrying it wastes the whole budget and buries the one line that
matters under Ray's tracebacks. :func:`prepare` runs every check that needs no cluster, those
that need only arguments and files first, before torch and Ray are imported (this module imports
neither at its top), so that a usage error answers in about a second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.experiment import METADATA_FILE, RAY_LOG_FILE
from tuner.experiment.lock import driver_lock, refuse_if_held, say_leftovers_ended
from tuner.spaces import SearchSpace, get_space, train_config_of
from tuner.tune.context import ExperimentPaths, options_to_resume
from tuner.tune.options import SearchOptions
from tuner.tune.plan import SearchPlan, SpaceProfile, check_space, draft_plan
from tuner.units import format_bytes
from tuner.usercode import is_ref

if TYPE_CHECKING:
    import torch

    from tuner.experiment import Experiment

__all__ = [
    "Checked",
    "Prepared",
    "check_before_ray",
    "check_workload",
    "prepare",
    "profile_for",
    "refuse_existing",
    "said_if_stopped",
]


def check_workload(
    plan: SearchPlan, profile: SpaceProfile, *, max_memory_bytes: int | None = None
) -> None:
    """Raise ``TunerError`` (one line) for a workload no trial could run.

    Raises:
        TunerError: missing/malformed data, unknown model, a batch size larger than the
            training set, a group count that does not divide the model's channels, a memory
            budget below what the model's training state alone takes.
    """
    import torch

    from tuner.engine.data import build_data
    from tuner.engine.model import build_model, check_norm_choices
    from tuner.engine.usercheck import check_user_code, uses_user_code

    in_driver = {"num_workers": 0, "persistent_workers": False, "norm": "native"}
    base = train_config_of(in_driver, workload=plan.workload, device="cpu")
    data = build_data(base.replace(batch_size=1), torch.device("cpu"))
    too_big = sorted(b for b in _choices(profile, plan, "batch_size") if b > data.train_size)
    if too_big:
        raise TunerError(
            f"batch_size={', '.join(map(str, too_big))} (the space's choice) is larger than the "
            f"{data.train_size} training images of {base.data!r}; drop it from the space or "
            "use more data."
        )
    model = build_model(base, data.num_classes)
    if max_memory_bytes is not None and not profile.returned & _MODEL_FIELDS:
        _check_memory_floor(model, base.model, max_memory_bytes)
    if uses_user_code(base):  # bad user code: one line here, not an errored trial per sample
        check_user_code(base, data, model)
    check_norm_choices(
        model,
        model_name=type(model).__name__ if is_ref(base.model) else base.model,
        norms=_choices(profile, plan, "norm"),
        groups=_choices(profile, plan, "gn_groups"),
        chosen_by=" (a choice of the space)",
    )


# The run settings that change the model's parameters: a space that returns one of them has
# models of several sizes, and the workload's own is not the smallest for certain.
_MODEL_FIELDS = frozenset({"model", "model_kwargs", "num_classes"})


def _check_memory_floor(model: torch.nn.Module, name: str, budget: int) -> None:
    """Refuse a ``--max-memory`` below the training state every trial holds, whatever it
    samples: the weights, as many bytes of gradients and AdamW's two moments (4 x the weights;
    both meters count them, tuner.engine.meters). Every trial would train only to be rejected."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    floor = 4 * weights
    if budget < floor:
        raise TunerError(
            f"--max-memory {format_bytes(budget)} is below the {format_bytes(floor)} that "
            f"training {name} takes at the least (its {format_bytes(weights)} of weights, as "
            "much of gradients and AdamW's two moments); raise --max-memory or pick a smaller "
            "--model."
        )


def _choices(profile: SpaceProfile, plan: SearchPlan, name: str) -> list[Any]:
    """Every value the search can give ``name``: what the space returned, else the workload's."""
    return profile.values.get(name) or [plan.workload.get(name, getattr(TrainConfig(), name))]


@dataclass(frozen=True)
class Checked:
    """What the checks before Ray found, for the device the driver expects."""

    cuda: bool
    profile: SpaceProfile
    earlier: Experiment | None  # --warm-start's experiment


@dataclass(frozen=True)
class Prepared:
    """A search that passed every check before Ray, its driver lock held (a ``Prepared`` exists
    only inside :func:`prepare`'s block): its options (on --resume, the experiment's own),
    space, folder, what the checks found (None on --resume: the metadata has it), and when the
    command began (--trust-budget's share is of the whole command)."""

    options: SearchOptions
    space: SearchSpace
    paths: ExperimentPaths
    checked: Checked | None
    began: float  # time.perf_counter()


@contextlib.contextmanager
def prepare(options: SearchOptions, *, given: frozenset[str] | None = None) -> Iterator[Prepared]:
    """Every check a search can make before Ray starts, those that need only arguments and
    files first (the lock, the name, the space's samples), then those that need torch; the
    experiment's driver lock is taken before anything slow and held for the ``with`` block (the
    search runs inside it). ``given``: the fields the caller set, for a resume (None: those
    unlike the defaults). Ctrl-C or SIGTERM before the search begins says in one line that
    nothing changed and how to go on; a new search's folder goes with it.

    Raises:
        TunerError: the first problem found (usage: exit code 2).
    """
    began = time.perf_counter()
    name = options.name or _default_name(options.space)
    paths = ExperimentPaths.of(options.storage, name)
    refuse_if_held(paths.local)  # before anything else: the one line that says who drives it
    if options.resume:  # the metadata alone: an unknown name creates no folder
        options = options_to_resume(paths, options, named=given)
    created = [p for p in (paths.local, *paths.local.parents) if not p.exists()]
    try:
        with driver_lock(paths.local, command=shlex.join(["tuner", *sys.argv[1:]])):
            with said_if_stopped(paths, resume=options.resume):
                prepared = _checked(options, paths, began)
            yield prepared
    finally:
        # The folders the lock made for a new search that began nothing (a usage error, a stop
        # in its checks or Ray's start: Ray's log of that start goes too); a folder with
        # anything else in it stays.
        if created and not (paths.local / METADATA_FILE).is_file():
            (paths.local / RAY_LOG_FILE).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            for folder in created:
                folder.rmdir()


def _checked(options: SearchOptions, paths: ExperimentPaths, began: float) -> Prepared:
    if options.resume:
        say_leftovers_ended(paths.local)
    else:
        refuse_existing(paths)  # another driver finished one of this name before this one
    space = get_space(options.space)
    options = dataclasses.replace(options, name=paths.name, space=space.ref)
    checked = None if options.resume else check_before_ray(options, space)
    return Prepared(options, space, paths, checked, began)


@contextlib.contextmanager
def said_if_stopped(paths: ExperimentPaths, *, resume: bool) -> Iterator[None]:
    """Ctrl-C or SIGTERM before the search began (its checks, Ray's start): one line saying
    that nothing was kept or changed, and the command that goes on."""
    try:
        yield
    except KeyboardInterrupt:
        if resume:
            line = (
                f"Stopped before {paths.name!r} resumed: it is as it was. "
                f"Continue it with:  {paths.resume_command()}"
            )
        else:
            line = (
                f"Stopped before the search {paths.name!r} started: nothing was kept. "
                "Start it again with the same command."
            )
        print(f"\n{line}", flush=True)
        raise


def _default_name(space: str) -> str:
    """``<space file stem>-<time>``, the stem cut to what --name allows (an odd file name is no
    fault of a --name the user did not give)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(space).stem).lstrip("_.-") or "search"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def refuse_existing(paths: ExperimentPaths) -> None:
    if (paths.local / METADATA_FILE).exists():
        raise TunerError(
            f"Experiment {paths.name!r} already exists in {paths.local.parent}; continue it "
            "with --resume or pick another --name."
        )


def check_before_ray(options: SearchOptions, space: SearchSpace) -> Checked:
    """Every check of a new search that needs no cluster (the space builds, the data and the
    model exist, each batch size fits, the memory budget holds the model, --warm-start names an
    experiment of this space), for the device the trials will most likely get: a usage error
    ends in seconds, before Ray starts."""
    cuda = _expect_cuda(options)
    draft = draft_plan(options, space, cuda=cuda)
    profile = check_space(space, draft)  # no torch yet: a bad sample fails in about a second
    check_workload(draft, profile, max_memory_bytes=options.max_memory_bytes)
    from tuner.tune.warm_start import read_warm_start  # imports ray

    # A remote cluster's device may differ from this guess, and its workload with it.
    workload = None if options.address else draft.workload
    earlier = read_warm_start(options, space_name=space.name, workload=workload)
    return Checked(cuda, profile, earlier)


# Without a GPU driver's device files torch cannot see a GPU: no need to import it to ask.
_GPU_DRIVER_FILES = ("/proc/driver/nvidia/gpus", "/dev/nvidiactl", "/dev/kfd")


def _expect_cuda(options: SearchOptions) -> bool:
    if options.gpus_per_trial is not None:
        return options.gpus_per_trial > 0
    if not any(os.path.exists(path) for path in _GPU_DRIVER_FILES):
        return False
    import torch

    return torch.cuda.is_available()  # a remote cluster may differ: checked again after


def profile_for(
    space: SearchSpace, plan: SearchPlan, checked: Checked | None
) -> SpaceProfile | None:
    """The space's profile for the planned device (None on resume: the metadata has it)."""
    if checked is None:
        return None
    if checked.cuda == plan.cuda:
        return checked.profile
    profile = check_space(space, plan)  # the cluster's device differs from the driver's guess
    check_workload(plan, profile)
    return profile
