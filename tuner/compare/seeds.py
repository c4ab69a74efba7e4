"""The picks and the recommended pick's plain loop retrained with new seeds (``first_seed + 1``,
...: the trial's own run was chosen for its result), round-robin so a shared machine's drift
hits every arm alike and a round's runs are a pair (no Ray here). Each evaluation is a row, the
last one ``final``. From them: a pick's accuracy over seeds (:func:`seed_accuracy_of`) and its
time-to-target speed-up over the plain loop per seed pair (:func:`plain_loop_speedup`, the
speed-up DAWNBench compares).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tuner.compare._arms import PLAIN, plain_loop
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.record import FINAL, STEP, TRIAL_ID
from tuner.stats import Change, SeedAccuracy, paired_ratio, seed_accuracy
from tuner.units import duration_text, plural, ratio_text

__all__ = [
    "PICK",
    "SEEDS",
    "SEED_COLUMNS",
    "SeedArm",
    "SpeedUp",
    "plain_loop_speedup",
    "retrain",
    "seed_accuracy_of",
    "seed_arms",
    "short_text",
    "time_to_target",
]

SEEDS = 3  # runs per arm: the fewest a t-interval over seeds stands on (tuner.stats.MIN_PAIRS)
PICK = "pick"  # the arm column of a pick's own runs; its plain loop's is PLAIN ("plain loop")
SEED_COLUMNS = [
    TRIAL_ID,  # the pick (a plain-loop run: the pick whose plain loop it is)
    "arm",  # PICK or PLAIN
    "round",  # 1, 2, ...: the runs of one round are a pair
    "seed",
    STEP,
    "images_seen",
    "train_time_s",  # training seconds so far (evaluation excluded)
    "val_accuracy",
    "val_images",
    FINAL,  # the run's last evaluation: its accuracy
    "status",  # the run's: ok | oom | diverged | error
    "cut",  # its time budget ended it before its steps or epochs did
    "error",
]


@dataclass(frozen=True)
class SeedArm:
    """One arm of the retraining: a pick's config, or its plain loop."""

    trial_id: str
    arm: str  # PICK or PLAIN
    config: TrainConfig


def seed_arms(picks: Mapping[str, TrainConfig], recommended: str) -> list[SeedArm]:
    """The picks (trial id -> config), then the recommended pick's plain loop (if it differs)."""
    arms = [SeedArm(trial_id, PICK, config) for trial_id, config in picks.items()]
    plain = plain_loop(picks[recommended])
    if plain != picks[recommended]:
        arms.append(SeedArm(recommended, PLAIN, plain))
    return arms


def retrain(
    arms: Sequence[SeedArm],
    *,
    seeds: int = SEEDS,
    first_seed: int = 0,
    time_limit_s: float | None = None,
    round_s: float | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every arm once per round with the round's seed, for ``seeds`` rounds: the first
    :data:`SEEDS` even past ``time_limit_s`` (fewer say nothing of the spread), a later one only
    when expected to end within it (``round_s`` estimates the first). Rows and how it ended
    (``over_s``: past the limit; ``short``: why fewer rounds ran)."""
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    rounds, stopped = 0, "max repeats"
    for index in range(seeds):
        elapsed = time.perf_counter() - started
        expected = elapsed / index if index else round_s
        late = time_limit_s is not None and expected and elapsed + expected > time_limit_s
        if late and index >= SEEDS:
            stopped = "time limit"
            break
        for arm in arms:
            rows += _one_run(arm, first_seed + 1 + index, index + 1)
        rounds += 1
    seconds = time.perf_counter() - started
    info: dict[str, Any] = {
        "arms": [f"{arm.trial_id} ({arm.arm})" for arm in arms],
        "seeds": [first_seed + 1 + i for i in range(rounds)],
        "rounds_planned": seeds,
        "repeats_done": rounds,
        "seconds": round(seconds, 1),
        "time_limit_s": time_limit_s,
        "stopped": stopped,
    }
    if time_limit_s is not None and seconds > time_limit_s:
        info["over_s"] = round(seconds - time_limit_s, 1)
    if rounds < seeds:
        per_round = seconds / rounds if rounds else round_s
        info["short"] = short_text(seeds, rounds, per_round, time_limit_s)
    return rows, info


def short_text(seeds: int, rounds: int, per_round: float | None, limit: float | None) -> str:
    """Why fewer than ``seeds`` seeds ran, and what would fit them."""
    need = "" if per_round is None else f" (a round of every arm takes about {per_round:.0f} s"
    if need and limit is not None:
        need += f"; the step had {duration_text(limit)}"
    need += ")" if need else ""
    fix = "" if per_round is None else f"; about {duration_text(seeds * per_round)} would fit them"
    return (
        f"{seeds} seeds did not fit the trust budget{need}: {rounds} ran, so the picks' "
        f"accuracy interval rests on {rounds} seed(s){fix} (--trust-budget)"
    )


def _one_run(arm: SeedArm, seed: int, round_: int) -> list[dict[str, Any]]:
    """One run of ``arm`` with ``seed``: a row per evaluation, the last one final."""
    from tuner.engine import train  # here: importing this module must not import torch

    curve: list[dict[str, Any]] = []

    def record(progress: Any) -> None:
        curve.append(_point(progress.result))

    try:
        result = train(arm.config.replace(seed=seed), on_eval=record)
    except TunerError as exc:  # a config that cannot be built here: a failed run, said
        base = {"status": "error", "error": str(exc)[:500], "cut": False}
        curve = [{STEP: 0, "images_seen": 0, "train_time_s": 0.0, "val_accuracy": math.nan}]
    else:
        base = {
            "status": result.status,
            "error": result.error or "",
            "cut": result.cut_by_time_budget,
        }
        if not curve or curve[-1][STEP] != result.steps:  # failed before its last evaluation
            curve.append(_point(result))
    who = {TRIAL_ID: arm.trial_id, "arm": arm.arm, "round": round_, "seed": seed}
    last = len(curve) - 1
    return [{**who, **point, FINAL: i == last, **base} for i, point in enumerate(curve)]


def _point(result: Any) -> dict[str, Any]:
    accuracy = result.val_accuracy
    return {
        STEP: result.steps,
        "images_seen": result.images_seen,
        "train_time_s": result.train_time_s,
        "val_accuracy": math.nan if accuracy is None else accuracy,
        "val_images": result.val_images,
    }


def _runs(seeds: pd.DataFrame | None, trial_id: str, arm: str) -> pd.DataFrame:
    if seeds is None or seeds.empty:
        return pd.DataFrame(columns=SEED_COLUMNS)
    return seeds[(seeds[TRIAL_ID].astype(str) == str(trial_id)) & (seeds["arm"] == arm)]


def seed_accuracies(seeds: pd.DataFrame | None, trial_id: str, arm: str = PICK) -> list[float]:
    """The final accuracy of each of ``trial_id``'s ``arm`` runs that ended ok."""
    final = _finals(seeds, trial_id, arm)
    return [float(v) for v in final["val_accuracy"] if pd.notna(v)]


def _finals(seeds: pd.DataFrame | None, trial_id: str, arm: str) -> pd.DataFrame:
    """The last evaluation of each ok run that trained its whole budget (a cut run's accuracy
    is not the config's)."""
    runs = _runs(seeds, trial_id, arm)
    cut = runs["cut"].astype("boolean").fillna(False).astype(bool)
    return runs[runs[FINAL].astype(bool) & (runs["status"] == "ok") & ~cut]


def seed_accuracy_of(seeds: pd.DataFrame | None, trial_id: str, arm: str = PICK) -> SeedAccuracy:
    """``trial_id``'s (``arm``'s) accuracy over its seed runs: :func:`tuner.stats.seed_accuracy`."""
    final = _finals(seeds, trial_id, arm)
    images = [float(v) for v in final["val_images"] if pd.notna(v)]
    n = int(statistics.median(images)) if images else 0
    return seed_accuracy(final["val_accuracy"].astype(float).tolist(), n)


def time_to_target(
    seeds: pd.DataFrame | None, trial_id: str, arm: str, target: float
) -> dict[int, float]:
    """Seed -> training seconds at the first evaluation reaching ``target`` (NaN: never)."""
    runs = _runs(seeds, trial_id, arm)
    times: dict[int, float] = {}
    for seed, run in runs.groupby("seed"):
        reached = run[run["val_accuracy"].astype(float) >= target].sort_values("train_time_s")
        times[int(seed)] = float(reached["train_time_s"].iloc[0]) if len(reached) else math.nan
    return times


@dataclass(frozen=True)
class SpeedUp:
    """``change``: the plain loop's training seconds to ``target`` over the pick's, per seed pair
    (> 1: the pick is sooner)."""

    change: Change
    target: float
    pairs: int  # seed pairs where both runs reached the target
    seeds: int  # seed pairs that ran
    pick_s: float  # the pick's median training seconds to the target
    plain_s: float  # the plain loop's
    not_reached: dict[str, int]  # arm -> its runs that never reached the target

    def text(self) -> str:
        """``the plain loop takes 1.31x [1.12–1.53] as long to reach 0.850 accuracy, beyond
        noise (...)``."""
        value = self.change
        if math.isnan(value.value):
            return (
                f"no time-to-target ratio against the plain loop: no seed pair reached "
                f"{self.target:.3f} accuracy in both runs ({self._missed()})"
            )
        ratio = ratio_text(value.value, value.low, value.high)
        missed = f", {self._missed()}" if any(self.not_reached.values()) else ""
        # The verdict in the ratio's own clause: the auditor reads the words nearest an interval.
        return (
            f"the plain loop takes {ratio} as long to reach {self.target:.3f} accuracy, "
            f"{_VERDICT_WORDS[value.verdict]} ({self.pick_s:.1f} s against {self.plain_s:.1f} s "
            f"of training, medians over {plural(self.pairs, 'pair')} of seed runs{missed})"
        )

    def _missed(self) -> str:
        missed = [f"{arm} {n}" for arm, n in self.not_reached.items() if n]
        return "runs that never reached it: " + ", ".join(missed) if missed else "none missed"


# What a speed-up's interval shows, in the words tuner.report's auditor reads (Change.verdict).
_VERDICT_WORDS = {
    "separated": "beyond noise",
    "tie": "a tie",
    "uninformative": "an interval that says nothing",
    "none": "no interval (fewer than 2 pairs)",
}


def plain_loop_speedup(
    seeds: pd.DataFrame | None, trial_id: str, *, target_accuracy: float | None = None
) -> SpeedUp | None:
    """How much sooner ``trial_id`` reaches ``target_accuracy`` (default: its lower accuracy
    bound over seeds, what it reliably reaches) than its plain loop, over the seed pairs; None
    without a plain-loop run."""
    if _runs(seeds, trial_id, PLAIN).empty:
        return None
    if target_accuracy is None:
        target_accuracy = seed_accuracy_of(seeds, trial_id).low
    pick = time_to_target(seeds, trial_id, PICK, target_accuracy)
    plain = time_to_target(seeds, trial_id, PLAIN, target_accuracy)
    common = sorted(set(pick) & set(plain))
    change = paired_ratio([pick[s] for s in common], [plain[s] for s in common])
    both = [s for s in common if math.isfinite(pick[s]) and math.isfinite(plain[s])]
    return SpeedUp(
        change=change,
        target=target_accuracy,
        pairs=len(both),
        seeds=len(common),
        pick_s=_median([pick[s] for s in both]),
        plain_s=_median([plain[s] for s in both]),
        not_reached={
            PICK: sum(math.isnan(v) for v in pick.values()),
            PLAIN: sum(math.isnan(v) for v in plain.values()),
        },
    )


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan
