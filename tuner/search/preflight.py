"""Deterministic errors found in the driver, before any trial starts: a bad workload fails
every trial the same way, so retrying it wastes the whole budget and buries the one line that
matters under Ray's tracebacks. :func:`check_before_ray` runs every check that needs no cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.experiment import Experiment
from tuner.search.options import SearchOptions
from tuner.search.plan import SearchPlan, SpaceProfile, check_space, draft_plan
from tuner.search.warm_start import read_warm_start
from tuner.spaces import SearchSpace, train_config_of

__all__ = ["Checked", "check_before_ray", "check_workload", "profile_for"]


def check_workload(plan: SearchPlan, profile: SpaceProfile) -> None:
    """Raise ``TunerError`` (one line) for a workload no trial could run.

    Raises:
        TunerError: missing/malformed data, unknown model, a batch size larger than the
            training set, a group count that does not divide the model's channels.
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
    if uses_user_code(base):  # bad user code: one line here, not an errored trial per sample
        check_user_code(base, data, model)
    check_norm_choices(
        model,
        model_name=type(model).__name__ if uses_user_code(base) else base.model,
        norms=_choices(profile, plan, "norm"),
        groups=_choices(profile, plan, "gn_groups"),
        chosen_by=" (a choice of the space)",
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


def check_before_ray(options: SearchOptions, space: SearchSpace) -> Checked:
    """Every check of a new search that needs no cluster (the space builds, the data and the
    model exist, each batch size fits, --warm-start names an experiment of this space), for the
    device the trials will most likely get: a usage error ends in seconds, before Ray starts."""
    cuda = _expect_cuda(options)
    draft = draft_plan(options, space, cuda=cuda)
    profile = check_space(space, draft)
    check_workload(draft, profile)  # a bad workload fails here, once, in one line
    # A remote cluster's device may differ from this guess, and its workload with it.
    workload = None if options.address else draft.workload
    earlier = read_warm_start(options, space_name=space.name, workload=workload)
    return Checked(cuda, profile, earlier)


def _expect_cuda(options: SearchOptions) -> bool:
    if options.gpus_per_trial is not None:
        return options.gpus_per_trial > 0
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
