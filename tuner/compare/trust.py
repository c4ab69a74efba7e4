"""What makes a search's figures trustworthy, after its trials (no Ray here): :func:`remeasure`
(the top candidates alone, round-robin: side by side they measured each other's interference)
and :func:`effects` (each knob of the recommended config toggled alone, and the plain loop).
On a CPU each arm is built once and timed in windows (many pairs for a few builds); on CUDA
each measurement is a fresh build (the reserved peak belongs to a process). The stopping rule
looks at the intervals' widths only, never their side of 1x (bench/trust_coverage.py).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tuner.compare import Arm, interleave, plan_toggles
from tuner.compare._interleave import measurement_row
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.measure import FRESH, METHOD, RESOLUTION, WINDOWS, paired
from tuner.stats import MIN_PAIRS, paired_ratio

__all__ = ["Budget", "effects", "remeasure"]

_MIN_PAIRS = MIN_PAIRS  # measured even past the time limit: fewer say nothing
_TARGET_ROUNDS = 8  # windows are sized so this many rounds fit in the time left (t: 2.36)
_LOOK_EVERY = 4  # rounds between two looks of the stopping rule
_SIZING_MARGIN = 0.8  # of the time left: a 2-step timing of each arm is a rough estimate
_MIN_WINDOW = 2  # steps
_COMPILE_ON_CPU = "left out on cpu, where each compiled build costs tens of seconds"

Pairs = Callable[[pd.DataFrame], list[tuple[str, str]]]  # (reference arm, arm) per comparison


@dataclass(frozen=True)
class Budget:
    """How long a comparison may go on: rounds, seconds and the resolution that ends it."""

    min_repeats: int
    max_repeats: int
    time_limit_s: float | None = None
    resolution: float = RESOLUTION

    def __post_init__(self) -> None:
        if self.max_repeats < 1 or self.min_repeats > self.max_repeats:
            raise TunerError(
                f"repeats {self.min_repeats}..{self.max_repeats}: give at least 1, "
                "the minimum no larger than the maximum."
            )


def remeasure(
    configs: Sequence[TrainConfig], *, steps: int, budget: Budget, cuda: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``configs`` round-robin until the candidates adjacent in speed are resolved: rows
    (``candidate``: the index) and how it ended."""
    arms = [Arm(str(i), "remeasure", config) for i, config in enumerate(configs)]
    runs, info = _measure(arms, cuda=cuda, steps=steps, budget=budget, pairs=_adjacent)
    rows = [{"candidate": int(row["arm"]), **row} for row in runs.to_dict(orient="records")]
    return rows, info


def effects(
    base: TrainConfig, *, cuda: bool, steps: int, budget: Budget
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The arms around ``base`` interleaved: rows, and how it ended (with arms and left out)."""
    skip = {} if cuda or base.compile != "off" else {"compile": _COMPILE_ON_CPU}
    arms, left_out = plan_toggles(base, cuda=cuda, skip=skip)
    pairs = [(a.reference, a.name) for a in arms if a.reference]
    runs, info = _measure(arms, cuda=cuda, steps=steps, budget=budget, pairs=lambda _: pairs)
    return runs, {"arms": [a.name for a in arms], "left_out": left_out, **info}


def _measure(
    arms: Sequence[Arm], *, cuda: bool, steps: int, budget: Budget, pairs: Pairs
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Every arm once per round until the budget's rule ends it; rows and how it ended."""
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    dropped: list[str] = []
    ended = {"stopped": "max repeats"}
    clock = {"warm": True, "last": started, "round": 0.0}  # the slowest round, builds excluded
    measure = _Windows(steps, budget) if not cuda else _FreshBuilds(steps)

    def one(arm: Arm) -> Any:
        if any(d.startswith(f"{arm.name}: ") for d in dropped):
            return None
        try:
            return measure.prepare(arm) if clock["warm"] else measure(arm)
        except TunerError as exc:  # a config this arm cannot build: left out, said why
            dropped.append(f"{arm.name}: {exc}")
            return None

    def keep_going(repeat: int, _slowest: float) -> bool:
        now, limit = time.perf_counter(), budget.time_limit_s
        if clock["warm"]:  # the builds are done: size the windows to the time left
            measure.fit_rounds(None if limit is None else limit - (now - started))
        else:
            clock["round"] = max(clock["round"], now - clock["last"])
        clock.update(warm=False, last=now)
        if repeat < _MIN_PAIRS:
            return True
        if limit is not None and now - started + clock["round"] > limit:
            ended["stopped"] = "time limit"
            return False
        if _looks_at(repeat, budget) and _resolved(pd.DataFrame(rows), pairs, budget):
            ended["stopped"] = "resolved"
            return False
        return True

    try:
        done = interleave(
            arms,
            repeats=budget.max_repeats,
            measure=one,
            on_run=lambda repeat, arm, result: rows.append(measurement_row(arm, repeat, result)),
            warmup=measure.warmup(arms),
            keep_going=keep_going,
        )
    finally:
        measure.close()
    info = {
        "dropped": dropped,
        "repeats_done": done if rows else 0,
        "seconds": round(time.perf_counter() - started, 1),
        "resolution": budget.resolution,
        "steps": measure.steps,  # per window (CPU) or per fresh build (CUDA)
        "time_limit_s": budget.time_limit_s,
        "method": f"{METHOD}; {FRESH if cuda else WINDOWS}",
        **ended,
    }
    return pd.DataFrame(rows), info


def _looks_at(repeat: int, budget: Budget) -> bool:
    """At the minimum, then every ``_LOOK_EVERY`` rounds (fewer looks: nearer the nominal level)."""
    extra = repeat - budget.min_repeats
    return extra >= 0 and extra % _LOOK_EVERY == 0


def _resolved(runs: pd.DataFrame, pairs: Pairs, budget: Budget) -> bool:
    for reference, arm in pairs(runs):
        a, b = paired(runs, reference, arm)
        change = paired_ratio(a["images_per_second"].tolist(), b["images_per_second"].tolist())
        if not change.half_width <= budget.resolution:  # NaN (no interval yet): not resolved
            return False
    return True


def _adjacent(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """The candidates adjacent in median speed, slower first."""
    if runs.empty:
        return []
    speed = runs[runs["status"] == "ok"].groupby("arm")["images_per_second"].median()
    order = runs["arm"].drop_duplicates().sort_values(key=lambda c: c.map(speed).fillna(0.0))
    return list(itertools.pairwise(order))


class _Windows:
    """A CPU measurement: each arm built once, then one window of ``steps`` steps per call."""

    def __init__(self, steps: int, budget: Budget) -> None:
        self.steps = steps
        self.planned = (budget.max_repeats + 2) * steps  # the schedule's span: lr never ends
        self.runs: dict[str, Any] = {}  # arm -> its WindowRun (None: it could not be built)
        self.broken: dict[str, Any] = {}  # arm -> the result of a build that failed, until told
        self.step_s: dict[str, float] = {}  # arm -> seconds per step after its warm-up
        self.lead_s: dict[str, float] = {}  # arm -> its untimed lead-in per window
        self.told: set[str] = set()  # built arms whose failure is recorded

    def warmup(self, arms: Sequence[Arm]) -> list[Arm]:
        return list(arms)  # every arm is built and warmed up before the first round

    def prepare(self, arm: Arm) -> None:
        """Build the arm, warm it up, and time one short discarded window."""
        from tuner.engine.windows import WindowRun, failed_build

        self.runs[arm.name] = None
        try:
            run = WindowRun(arm.config, planned_steps=self.planned)
        except TunerError:
            raise
        except Exception as exc:  # out of memory while building, ...: a result, as in a run
            self.broken[arm.name] = failed_build(exc)
            return
        self.runs[arm.name] = run
        if run.warm_up() is None:
            timed = run.window(_MIN_WINDOW)  # discarded: settles the caches, times a step
            self.step_s[arm.name] = timed.step_time_s or 0.0
            self.lead_s[arm.name] = self.step_s[arm.name] * run.queued  # untimed, every window

    def fit_rounds(self, seconds_left: float | None) -> None:
        """Steps per window so ``_TARGET_ROUNDS`` rounds fit: short windows, more pairs."""
        per_step = sum(self.step_s.values())
        if seconds_left is None or per_step <= 0:
            return
        per_round = _SIZING_MARGIN * seconds_left / _TARGET_ROUNDS - sum(self.lead_s.values())
        self.steps = max(_MIN_WINDOW, min(self.steps, int(per_round / per_step)))

    def __call__(self, arm: Arm) -> Any:
        run = self.runs.get(arm.name)
        if run is None:  # a failed build is told once; bad input was said in "dropped"
            return self.broken.pop(arm.name, None)
        if arm.name in self.told:
            return None  # its failure is recorded: out
        result = run.failed or run.window(self.steps)
        if run.failed is not None:
            self.told.add(arm.name)
        return result

    def close(self) -> None:
        for run in self.runs.values():
            if run is not None:
                run.close()


class _FreshBuilds:
    """A CUDA measurement: a fresh build per call (its own reserved-memory peak)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def warmup(self, arms: Sequence[Arm]) -> list[Arm]:
        return list(arms[:1])  # the process's one-time start-up

    def prepare(self, arm: Arm) -> None:
        self(arm)

    def fit_rounds(self, seconds_left: float | None) -> None:
        return None  # a fresh build's steps stay: each is a run of its own

    def __call__(self, arm: Arm) -> Any:
        from tuner.engine import short_run

        return short_run(arm.config, steps=self.steps)

    def close(self) -> None:
        return None
