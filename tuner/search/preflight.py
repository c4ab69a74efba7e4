"""Deterministic errors found in the driver, before any trial starts.

A bad workload fails every trial the same way, so retrying it wastes the whole budget and
buries the one line that matters under Ray's tracebacks. Once, cheaply, before the search:
the data is built (a missing or malformed folder), a model is built (an unknown model name, bad
``model_kwargs``), every batch size the space can choose is checked against the training set,
and every GroupNorm group count it can choose against the model's convolutional channels.
"""

from __future__ import annotations

from typing import Any

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.search.plan import SearchPlan, SpaceProfile

__all__ = ["check_workload"]


def check_workload(plan: SearchPlan, profile: SpaceProfile) -> None:
    """Raise ``TunerError`` (one line) for a workload no trial could run.

    Raises:
        TunerError: missing/malformed data, unknown model, a batch size larger than the
            training set, a group count that does not divide the model's channels.
    """
    import torch

    from tuner.engine.data import build_data
    from tuner.engine.model import build_model, check_norm_choices

    base = TrainConfig.from_params(
        {
            **plan.workload,
            "device": "cpu",
            "num_workers": 0,
            "persistent_workers": False,
            "norm": "native",
        }
    )
    data = build_data(base.replace(batch_size=1), torch.device("cpu"))
    too_big = sorted(b for b in _choices(profile, plan, "batch_size") if b > data.train_size)
    if too_big:
        raise TunerError(
            f"batch_size={', '.join(map(str, too_big))} (the space's choice) is larger than the "
            f"{data.train_size} training images of {base.data!r}; drop it from the space or "
            "use more data."
        )
    check_norm_choices(
        build_model(base, data.num_classes),
        model_name=base.model,
        norms=_choices(profile, plan, "norm"),
        groups=_choices(profile, plan, "gn_groups"),
        chosen_by=" (a choice of the space)",
    )


def _choices(profile: SpaceProfile, plan: SearchPlan, name: str) -> list[Any]:
    """Every value the search can give ``name``: what the space returned, else the workload's."""
    if profile.values.get(name):
        return list(profile.values[name])
    if name in plan.workload:
        return [plan.workload[name]]
    return [getattr(TrainConfig(), name)]
