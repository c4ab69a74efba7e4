"""Controlled technique effects around the recommended config, measured after the search.

Starting from the recommended config, every applicable knob of the registry is switched the
other way one at a time (and the other norm choice), plus the plain loop (every technique off,
fp32, same model and batch); each arm is a fresh short probe, interleaved with the recommended
config itself and repeated (:func:`tuner.compare.plan_toggles`,
:func:`~tuner.compare.run_interleaved`).
It runs in one Ray task holding a trial's CPUs and a whole GPU, like the re-measurement, and
writes every measurement to ``effects.csv``; the report summarizes it (paired changes with
intervals, "no measurable effect" inside the noise, "fell back" where the setting did not run).

torch.compile is left out on a CPU unless the recommended config uses it: each compiled build
costs tens of seconds there, more than the whole comparison.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

__all__ = ["measure_effects"]

_COMPILE_ON_CPU = "left out on cpu, where each compiled build costs tens of seconds"


def measure_effects(
    config: dict[str, Any],
    *,
    steps: int,
    repeats: int,
    num_cpus: float,
    num_gpus: float,
    threads: int,
    device: str,
    search_only: Collection[str],
    out: Path,
) -> dict[str, Any]:
    """Measure the arms around ``config`` (a trial's config) in one Ray task; write ``out``.

    Returns:
        ``{"arms": [...], "left_out": [...], "dropped": [...]}`` for the experiment metadata.
    """
    import ray

    task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_measure)
    rows, info = ray.get(task.remote(config, steps, repeats, device, threads, sorted(search_only)))
    import pandas as pd

    pd.DataFrame(rows).to_csv(out, index=False)
    return info


def _measure(
    config: dict[str, Any],
    steps: int,
    repeats: int,
    device: str,
    threads: int,
    search_only: list[str],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import torch

    from tuner.compare import plan_toggles, run_interleaved
    from tuner.config import TrainConfig
    from tuner.engine import probe
    from tuner.engine.build import resolve_device

    torch.set_num_threads(max(1, threads))
    params = {**config, **({"device": "cpu"} if device == "cpu" else {})}
    base = TrainConfig.from_params(params, ignore=search_only)
    cuda = resolve_device(base.device).type == "cuda"
    skip = {} if cuda or base.compile != "off" else {"compile": _COMPILE_ON_CPU}
    arms, left_out = plan_toggles(base, cuda=cuda, skip=skip)
    runs = run_interleaved(
        arms, repeats=repeats, measure=lambda c: probe(c, steps=steps), drop_invalid=True
    )
    info = {
        "arms": [a.name for a in arms],
        "left_out": left_out,
        "dropped": list(runs.attrs.get("dropped", [])),
    }
    return runs.to_dict(orient="records"), info
