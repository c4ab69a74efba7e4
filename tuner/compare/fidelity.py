"""The fidelity self-check (``tuner bench --verify``, bench/README.md): the engine's short run
against :mod:`tuner.compare.minimal_loop`, each a fresh process (no shared allocator, compile
caches or threads), interleaved after one discarded pair, the ratio paired. The engine runs
every technique off but ``set_to_none`` (the minimal loop's ``zero_grad()`` frees them too).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial
from typing import Any

from tuner.compare import interleave
from tuner.compare._process import child_env, run_json
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.stats import Change, median_interval, paired_ratio
from tuner.units import DASH, json_ready
from tuner.workloads import workload as reference

__all__ = ["KINDS", "rate", "run_verify", "verdict", "verify_config"]

KINDS = ("engine", "minimal")
_TIMEOUT_S = 900  # one measured process, when no time limit is given
_MIN_CHILD_S = 10  # no process starts with less than this left, no pair with less than twice


def verify_config(
    *, cuda: bool, workload: dict[str, Any] | None = None, amp: str | None = None
) -> TrainConfig:
    """The bench workload (``workload`` over it) in ``amp`` (default: bf16 on a GPU, fp32 on a
    CPU, whose bf16 is often emulated); TunerError: a setting the minimal loop cannot run."""
    amp = amp or ("bf16" if cuda else "off")
    if amp not in ("off", "bf16"):
        raise TunerError(f"--amp {amp!r}: the fidelity check compares fp32 (off) or bf16.")
    params = {**reference("bench", cuda=cuda), **(workload or {}), "amp": amp, "set_to_none": True}
    return TrainConfig.from_params({**params, "epochs": None, "images": None, "steps": 1})


def run_verify(
    config: TrainConfig,
    *,
    steps: int = 50,
    warmup_steps: int = 10,
    repeats: int = 6,
    threads: int | None = None,
    log: Callable[[str], Any] = print,
    time_limit_s: float | None = None,
) -> dict[str, Any]:
    """Engine and minimal loop ``repeats`` times each (at least 2), interleaved, in fresh
    processes of ``threads`` threads; the report. Within ``time_limit_s`` no process outlives
    it, none starts with under ``_MIN_CHILD_S`` left, no pair starts that would not end."""
    if repeats < 2:
        raise TunerError(f"--repeats {repeats}: the fidelity check needs at least 2 pairs.")
    config = config.replace(warmup_steps=warmup_steps)
    env, deadline = child_env(threads), _Deadline(time_limit_s)
    load_before = os.getloadavg()[0]
    runs: list[dict[str, Any]] = []

    def record(repeat: int, kind: str, measured: dict[str, Any]) -> None:
        runs.append({"repeat": repeat, "kind": kind, **measured})
        speed = f"{rate(measured):10.1f} img/s"
        log(f"repeat {repeat + 1}/{repeats} {kind:8s} {measured['status']:6s} {speed}")

    def in_time(repeat: int, slowest: float) -> bool:
        if deadline.fits(slowest):
            return True
        log(f"stopped after {repeat} of {repeats} pairs: the time limit would be passed")
        return False

    # The discarded pair (cold caches after a while) also says how long a pair takes.
    warmup = KINDS if deadline.fits(0.0) else ()
    measure = partial(_measure, config=config, steps=steps, env=env, deadline=deadline)
    interleave(
        KINDS, repeats=repeats, measure=measure, on_run=record, warmup=warmup, keep_going=in_time
    )
    report = _summarize(config, runs, steps)
    report["repeats_planned"] = repeats
    report["threads_per_process"] = threads or report["threads"]
    report["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    report["cpu_count"] = os.cpu_count()
    return report


class _Deadline:
    def __init__(self, limit_s: float | None) -> None:
        self.end = None if limit_s is None else time.perf_counter() + limit_s

    def left(self) -> float:
        return math.inf if self.end is None else self.end - time.perf_counter()

    def fits(self, pair_s: float) -> bool:
        return self.left() >= max(1.2 * pair_s, 2 * _MIN_CHILD_S)  # a fifth to spare

    def timeout(self) -> float | None:
        left = self.left()
        return None if left < _MIN_CHILD_S else min(_TIMEOUT_S, left)


def _measure(
    kind: str, config: TrainConfig, steps: int, env: dict[str, str], deadline: _Deadline
) -> dict[str, Any]:
    timeout = deadline.timeout()
    if timeout is None:
        return _failed("not started: the time limit was reached")
    measured = run_json(_command(kind, config, steps), env=env, timeout=timeout, limit=300)
    if isinstance(measured, str):
        return _failed(measured)
    return {"status": measured.pop("status", "ok"), "error": measured.pop("error", ""), **measured}


def _failed(error: str) -> dict[str, Any]:
    return {"status": "error", "error": error, "images_per_second": math.nan}


def _command(kind: str, config: TrainConfig, steps: int) -> list[str]:
    if kind == "engine":
        return [sys.executable, "-m", __spec__.name, json.dumps(config.to_dict()), str(steps)]
    from tuner.engine.build import resolve_device

    flags = {
        "--model": config.model,
        "--model-kwargs": json.dumps(dict(config.model_kwargs)),
        "--img-size": config.img_size,
        "--batch-size": config.batch_size,
        "--num-classes": config.num_classes or 1000,
        "--amp": config.amp,
        "--steps": steps,
        "--warmup-steps": config.warmup_steps,
        "--device": resolve_device(config.device),
    }
    words = [word for flag, value in flags.items() for word in (flag, str(value))]
    return [sys.executable, "-m", "tuner.compare.minimal_loop", *words]


def _engine_worker(argv: Sequence[str]) -> None:
    """``python -m tuner.compare.fidelity CONFIG_JSON STEPS``: one short run, one JSON line."""
    from tuner.engine import short_run

    config = TrainConfig.from_params(json.loads(argv[0]))
    result = short_run(config, steps=int(argv[1]))
    mean = config.batch_size / result.step_time_s if result.step_time_s else math.nan
    measured = {
        "status": result.status,
        "error": result.error or "",
        "images_per_second": result.images_per_second or math.nan,
        "images_per_second_mean": mean,
        "effective": result.effective,
    }
    print(json.dumps(measured))


def rate(run: dict[str, Any]) -> float:
    """A run's overall mean images/s (like for like with the minimal loop's)."""
    return run.get("images_per_second_mean", run["images_per_second"])


def _summarize(config: TrainConfig, runs: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    import torch

    from tuner.engine.build import resolve_device
    from tuner.engine.meters import environment

    # Like for like: the minimal loop reports its overall mean, so the engine's overall mean
    # (not its median window, which drops a hiccup the minimal loop keeps).
    rates = {k: [rate(r) for r in runs if r["kind"] == k] for k in KINDS}
    ratio = paired_ratio(rates["minimal"], rates["engine"])
    estimates = {k: median_interval(v) for k, v in rates.items()}
    device = resolve_device(config.device)
    report = {
        "environment": environment(device),
        "threads": torch.get_num_threads(),
        "config": config.to_dict(),
        "steps": steps,
        "repeats": max((r["repeat"] for r in runs), default=-1) + 1,
        "images_per_second": {k: asdict(e) for k, e in estimates.items()},
        "ratio_engine_to_minimal": {**asdict(ratio), "tie": ratio.tie, "verdict": ratio.verdict},
        "verdict": verdict(ratio),
        "runs": runs,
    }
    return json_ready(report)


def verdict(ratio: Change) -> str:
    value, low, high = ratio.value, ratio.low, ratio.high
    if math.isnan(value):
        return "No pair of runs finished: no verdict (see the runs' errors)."
    text = f"The engine runs at {value:.3f}x the minimal loop's images/s"
    if math.isnan(low):
        return text + " (one pair: no interval, so no claim)."
    text += f" [95% interval {low:.3f}{DASH}{high:.3f}]"
    if ratio.verdict == "uninformative":
        return text + ": an interval that contains 1x and is too wide to say anything, no claim."
    if ratio.tie:
        return text + ": within the noise (the interval contains 1x)."
    side = "slower" if value < 1 else "faster"
    return text + f": {abs(1 - value):.1%} {side} than the minimal loop, outside the noise."


if __name__ == "__main__":
    _engine_worker(sys.argv[1:])
