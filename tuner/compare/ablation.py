"""The controlled technique ablation (``tuner ablate``) on :data:`tuner.workloads.ABLATION`, no
Ray: the technique ladder (each step vs the one before and the plain loop), the norm comparison
and, on 2 or more GPUs, DataParallel vs DDP, each trained ``repeats`` times, same seed,
interleaved. What this hardware cannot run is left out and listed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd

from tuner.compare import Arm, plan_ladder, run_interleaved, summarize
from tuner.compare import dp_vs_ddp as dp
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.techniques import knob, ladder_knobs
from tuner.workloads import GPU_NORM_MODEL, workload

__all__ = [
    "default_config",
    "default_norm_model",
    "plan_ablation",
    "run_ablation",
    "skippable",
    "summarize",
]


def skippable() -> tuple[str, ...]:
    """What ``--skip`` takes: every ladder knob, ``norm`` and the data-parallel pair."""
    return (*(k.field for k in ladder_knobs()), "norm", dp.SKIP)


def default_config(*, cuda: bool) -> TrainConfig:
    """The baseline workload (:data:`tuner.workloads.ABLATION`): the ladder's first step."""
    return TrainConfig.from_params(workload("ablation", cuda=cuda))


def default_norm_model(*, cuda: bool) -> str | None:
    """The norm comparison's model (``None``: the ladder's hybrid ViT; ViT-B/16 has no conv
    norms)."""
    return GPU_NORM_MODEL if cuda else None


def plan_ablation(
    base: TrainConfig,
    *,
    cuda: bool,
    amp: str,
    groups: Sequence[int] = (8, 16, 32),
    skip: Iterable[str] = (),
    norm_model: str | None = None,
    gpus: int = 0,
) -> tuple[list[Arm], list[str]]:
    """The ladder, the norm comparison (on ``norm_model`` if given), DataParallel vs DDP over
    ``gpus``; and a line per part this machine cannot run (TunerError: bad ``skip`` or ``amp``)."""
    skip = set(skip)
    unknown = sorted(skip - set(skippable()))
    if unknown:
        raise TunerError(
            f"--skip {', '.join(unknown)} unknown; choose from {', '.join(skippable())}."
        )
    if amp not in knob("amp").values(cuda=cuda):
        raise TunerError(
            f"--amp {amp!r} cannot run here; use one of {', '.join(knob('amp').values(cuda=cuda))}."
        )
    arms, left_out = plan_ladder(base, cuda=cuda, amp=amp, skip=sorted(skip - {"norm", dp.SKIP}))
    if "norm" not in skip:
        norm_base = base.replace(model=norm_model, model_kwargs={}) if norm_model else base
        arms += _norm_arms(norm_base, groups)
    if dp.SKIP not in skip:
        note = dp.left_out_note(cuda=cuda, gpus=gpus)
        arms += [] if note else dp.arms(base, gpus=gpus)
        left_out += [note] if note else []
    return arms, left_out


def _norm_arms(base: TrainConfig, groups: Sequence[int]) -> list[Arm]:
    arms = [Arm("batchnorm", "norm", base.replace(norm="batch"), {"norm": "batch"})]
    for g in groups:
        changes = {"norm": "group", "gn_groups": int(g)}
        config = base.replace(**changes)
        arms.append(Arm(f"groupnorm/{g}", "norm", config, changes, "batchnorm", "batchnorm"))
    return arms


def run_ablation(
    arms: Sequence[Arm],
    *,
    repeats: int = 3,
    on_run: Callable[[int, Arm, dict[str, Any]], None] | None = None,
) -> pd.DataFrame:
    """Every arm ``repeats`` times, round-robin, after one unrecorded warm-up run."""
    from tuner.engine import train  # torch: imported only when running

    return run_interleaved(arms, repeats=repeats, measure=train, on_run=on_run)
