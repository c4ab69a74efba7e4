"""A trial's checkpoints (``--checkpoint-every-s``): at its first evaluation, then at the first
evaluation that long after the last one, and at its end; 0 checkpoints every evaluation. A real
engine run through the trial's own report path, its Ray I/O kept in a list instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tuner.errors import TunerError
from tuner.tune import SearchOptions
from tuner.tune.trainable import TrialContext, _TrialRun
from tuner.tune.trials_actor import NullStore
from tuner.workloads import MICRO_VIT


class _Kept(_TrialRun):
    """The trial, each report kept with whether it carried a checkpoint (and its files)."""

    def __init__(self, context: TrialContext) -> None:
        super().__init__(context, NullStore())
        self.sent: list[tuple[int, bool, list[str]]] = []

    def _emit(self, report: dict[str, Any], checkpoint: Path | None) -> None:
        files = sorted(p.name for p in checkpoint.iterdir()) if checkpoint else []
        self.sent.append((int(report["step"]), checkpoint is not None, files))


def _run(every_s: float, steps: int = 12) -> list[tuple[int, bool, list[str]]]:
    context = TrialContext(
        max_memory_bytes=None, probe_steps=2, threads=1, device="cpu", search_only=(),
        speed_repeats=0, actor_namespace="", checkpoint_every_s=every_s,
    )  # fmt: skip
    trial = _Kept(context)
    config = {**MICRO_VIT, "img_size": 16, "batch_size": 16, "epochs": None, "steps": steps,
              "eval_every_steps": 3, "max_eval_batches": 1, "warmup_steps": 1}  # fmt: skip
    trial.run(config, checkpoint=None)
    return trial.sent


def test_every_evaluation_checkpoints_at_zero() -> None:
    sent = _run(0.0)
    assert [step for step, _, _ in sent] == [3, 6, 9, 12, 12]  # 4 evaluations, then the final
    assert all(carried for _, carried, _ in sent)
    assert all("engine_state.pt" in files for _, _, files in sent[:-1])  # the final: no state


def test_a_long_interval_checkpoints_the_first_evaluation_and_the_end_only() -> None:
    sent = _run(3600.0)
    assert [(step, carried) for step, carried, _ in sent] == [
        (3, True), (6, False), (9, False), (12, False), (12, True),
    ]  # fmt: skip


def test_a_negative_interval_is_refused_in_one_line() -> None:
    with pytest.raises(TunerError, match=r"--checkpoint-every-s -1\.0 must be 0 or more"):
        SearchOptions(space="smoke_space", checkpoint_every_s=-1.0)
