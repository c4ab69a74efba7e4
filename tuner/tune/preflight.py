"""Deterministic errors found in the driver before any trial: a bad workload fails every trial
alike, wasting the budget and burying the one line under Ray's tracebacks. :func:`check_search`
runs every check that needs no cluster, the space's before torch and Ray are imported.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.experiment.options import SearchOptions
from tuner.experiment.paths import ExperimentPaths
from tuner.spaces import SearchSpace, get_space, train_config_of
from tuner.tune.plan import SearchPlan, SpaceProfile, check_space, draft_plan
from tuner.tune.samplers import check_sampler
from tuner.units import format_bytes
from tuner.usercode import is_ref

if TYPE_CHECKING:
    import torch

    from tuner.experiment import Experiment

__all__ = [
    "Checked",
    "Prepared",
    "check_before_ray",
    "check_equal_budget",
    "check_search",
    "check_workload",
    "profile_for",
]


def check_workload(
    plan: SearchPlan, profile: SpaceProfile, *, max_memory_bytes: int | None = None
) -> None:
    """Raise for a workload no trial could run.

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
    """Refuse a ``--max-memory`` below what every trial holds: weights, gradients and AdamW's
    two moments (4 x the weights, as both meters count them)."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    floor = 4 * weights
    if budget < floor:
        raise TunerError(
            f"--max-memory {format_bytes(budget)} is below the {format_bytes(floor)} that "
            f"training {name} takes at the least (its {format_bytes(weights)} of weights, as "
            "much of gradients and AdamW's two moments); raise --max-memory or pick a smaller "
            "--model."
        )


def check_equal_budget(profile: SpaceProfile, space_name: str) -> None:
    """Refuse a budget or evaluation cadence in steps over several batch sizes: trials would be
    compared after different numbers of images (issue 47). Not converted: which batch a step
    count was meant for is not known.

    Raises:
        TunerError: naming the setting, the batch sizes and the fix.
    """
    for setting, batches in profile.step_budgets.items():
        if len(batches) > 1:
            name = setting.split("=")[0]
            unit = "images" if name == "steps" else "eval_every_images"
            raise TunerError(
                f"Space {space_name}: {setting} is a budget in steps, but its trials train "
                f"batches of {', '.join(map(str, sorted(batches)))} images, so they would be "
                f"compared after different numbers of images; give it in images (--set {name}="
                f"null --set {unit}=N), epochs or time_budget_s."
            )


def _choices(profile: SpaceProfile, plan: SearchPlan, name: str) -> list[Any]:
    return profile.values.get(name) or [plan.workload.get(name, getattr(TrainConfig(), name))]


@dataclass(frozen=True)
class Checked:
    cuda: bool
    profile: SpaceProfile
    earlier: Experiment | None  # --warm-start's experiment


@dataclass(frozen=True)
class Prepared:
    """A search that passed every check before Ray (``checked``: None on --resume)."""

    options: SearchOptions
    space: SearchSpace
    paths: ExperimentPaths
    checked: Checked | None
    began: float  # time.perf_counter()


def check_search(options: SearchOptions, paths: ExperimentPaths, began: float) -> Prepared:
    """The space, and on a new search every check before Ray.

    Raises:
        TunerError: the first problem found (usage: exit code 2).
    """
    space = get_space(options.space)
    options = dataclasses.replace(options, space=space.ref)
    checked = None if options.resume else check_before_ray(options, space)
    return Prepared(options, space, paths, checked, began)


def check_before_ray(options: SearchOptions, space: SearchSpace) -> Checked:
    """Every check of a new search that needs no cluster, for the device the trials will most
    likely get: a usage error ends in seconds, before Ray starts."""
    check_sampler(options.sampler, space.grid)  # before Ray, not at the sampler's making
    cuda = _expect_cuda(options)
    draft = draft_plan(options, space, cuda=cuda)
    profile = check_space(space, draft)  # no torch yet: a bad sample fails in about a second
    check_equal_budget(profile, space.name)
    check_workload(draft, profile, max_memory_bytes=options.max_memory_bytes)
    from tuner.experiment.earlier import read_warm_start  # imports pandas

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
    if checked is None:
        return None
    if checked.cuda == plan.cuda:
        return checked.profile
    profile = check_space(space, plan)  # the cluster's device differs from the driver's guess
    check_equal_budget(profile, space.name)
    check_workload(plan, profile)
    return profile
