"""Time to a target accuracy (tuner.time_to_target): from a real search's accuracy curves, the
derived target, the recommendation rule (soonest; less memory where two times cannot be told
apart; one-axis objectives ask for one axis) and the auditor catching a tampered time."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tuner.answer import decide, points_text
from tuner.experiment import load_experiment, read_trials_csv
from tuner.record import (
    CURVE_KEYS,
    IMAGES_TO_TARGET,
    IMAGES_TO_TARGET_LOW,
    TIME_TO_TARGET_EST_HIGH,
    TIME_TO_TARGET_EST_LOW,
    TIME_TO_TARGET_EST_S,
    TRAIN_TIME_TO_TARGET_S,
    TRIAL_ID,
)
from tuner.report import write_report
from tuner.report.audit import audit
from tuner.stats import Change
from tuner.time_to_target import (
    choose_by_time,
    derive_target,
    time_ratio,
    time_to_target,
)

# ---- from a real search's curves ---------------------------------------------------------------


@pytest.fixture(scope="module")
def curves(smoke_experiment: Path) -> pd.DataFrame:
    return load_experiment(smoke_experiment).curves


def test_the_curves_are_every_trials_evaluations(curves: pd.DataFrame) -> None:
    assert list(curves.columns) == list(CURVE_KEYS)
    assert curves[TRIAL_ID].nunique() >= 2
    for _, curve in curves.groupby(TRIAL_ID):
        assert curve["images_seen"].is_monotonic_increasing
        assert (curve["val_images"] > 0).all()


def test_images_to_target_is_the_first_evaluation_at_or_above_it(curves: pd.DataFrame) -> None:
    for trial_id, curve in curves.groupby(TRIAL_ID):
        curve = curve.drop_duplicates("images_seen")
        for at in range(len(curve)):
            target = float(curve["val_accuracy"].iloc[at])
            got = time_to_target(curves, target).loc[str(trial_id)]
            first = int((curve["val_accuracy"] >= target).to_numpy().argmax())
            assert got[IMAGES_TO_TARGET] == curve["images_seen"].iloc[first]
            assert got[TRAIN_TIME_TO_TARGET_S] == curve["train_time_s"].iloc[first]
            before = curve["images_seen"].iloc[first - 1] if first else 0.0
            assert got[IMAGES_TO_TARGET_LOW] == before  # the crossing's range


def test_a_target_no_curve_reaches_gives_no_time(curves: pd.DataFrame) -> None:
    never = time_to_target(curves, float(curves["val_accuracy"].max()) + 0.01)
    assert never[IMAGES_TO_TARGET].isna().all() and never[TRAIN_TIME_TO_TARGET_S].isna().all()


def test_the_answer_leads_with_the_rule_s_pick_and_every_trial_has_its_time(
    smoke_experiment: Path,
) -> None:
    answer = decide(load_experiment(smoke_experiment))
    assert answer.target is not None and not answer.target.given
    lead = answer.lead()  # the pick first, then the rule it rests on
    assert answer.rule is not None and f"`{answer.rule.pick}`" in lead[0]
    assert lead[1].startswith("The rule: recommend the configuration that reaches the target")
    assert f"{answer.target.accuracy:.3f} is derived" in lead[1]
    reached = answer.trials.dropna(subset=[TIME_TO_TARGET_EST_S])
    assert not reached.empty  # the derived target: at least half the candidates reach it
    ratio = reached[TIME_TO_TARGET_EST_S] * pd.to_numeric(reached["images_per_second"])
    assert ratio.round(6).tolist() == reached[IMAGES_TO_TARGET].round(6).tolist()
    assert answer.rule is not None and answer.recommended[TRIAL_ID] == answer.rule.pick


@pytest.mark.parametrize("objective", ["throughput", "accuracy"])
def test_one_axis_objectives_still_ask_for_one_axis(smoke_experiment: Path, objective: str) -> None:
    experiment = load_experiment(smoke_experiment)
    named = {"objective": objective, "objectives": objective}  # as a one-axis search writes
    one = dataclasses.replace(experiment, metadata={**experiment.metadata, **named})
    answer = decide(one)
    metric = {"throughput": "images_per_second", "accuracy": "val_accuracy"}[objective]
    assert answer.lead() == [] and not answer.by_time
    assert answer.recommended[TRIAL_ID] == answer.best[answer.objectives[0][0]][TRIAL_ID]
    assert answer.objectives[0][0] == metric


def test_a_given_target_is_used_and_said(smoke_experiment: Path) -> None:
    experiment = load_experiment(smoke_experiment)
    options = {**experiment.metadata.get("options", {}), "target_accuracy": 0.05}
    answer = decide(
        dataclasses.replace(experiment, metadata={**experiment.metadata, "options": options})
    )
    assert answer.target is not None and answer.target.given and answer.target.accuracy == 0.05
    assert any("0.050 was given" in line for line in answer.lead()[:2])


def test_the_auditor_catches_a_tampered_time_to_target(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "smoke"
    shutil.copytree(smoke_experiment, folder)
    report = write_report(folder, out_dir=tmp_path / "report")
    assert not [f for f in audit(folder, report_dir=report).findings if f.check == "target"]
    trials = read_trials_csv(report / "trials.csv")
    row = trials[TIME_TO_TARGET_EST_S].first_valid_index()
    trials.loc[row, TIME_TO_TARGET_EST_S] = trials.loc[row, TIME_TO_TARGET_EST_S] / 2
    trials.to_csv(report / "trials.csv", index=False)
    found = [f for f in audit(folder, report_dir=report).findings if f.check == "target"]
    assert len(found) == 1 and TIME_TO_TARGET_EST_S in found[0].claim


# ---- the rule ----------------------------------------------------------------------------------


def _pool(rows: list[tuple[str, float, float, float]]) -> pd.DataFrame:
    """(trial, images to target, images/s, peak memory): evaluations every 100 images."""
    frame = pd.DataFrame(rows, columns=[TRIAL_ID, IMAGES_TO_TARGET, "ips", "peak_memory_bytes"])
    frame[IMAGES_TO_TARGET_LOW] = frame[IMAGES_TO_TARGET] - 100
    frame[TIME_TO_TARGET_EST_S] = frame[IMAGES_TO_TARGET] / frame["ips"]
    return frame


def _ratios(pool: pd.DataFrame, half_width: float | None):
    """Paired throughput ratios a/b around the true ratio (None: not re-measured together)."""
    ips = dict(zip(pool[TRIAL_ID], pool["ips"], strict=True))

    def ratio(a: str, b: str) -> Change:
        value = ips[a] / ips[b]
        if half_width is None:
            return Change(value, math.nan, math.nan, 1, 1.0)
        return Change(value, value * (1 - half_width), value * (1 + half_width), 8, 1.0)

    return ratio


def test_the_soonest_is_the_pick_when_its_time_is_beyond_noise() -> None:
    pool = _pool([("a", 1000, 100.0, 9e6), ("b", 1000, 50.0, 1e6)])  # a: 10 s, b: 20 s
    rule = choose_by_time(pool, _ratios(pool, 0.05))
    assert rule is not None and rule.pick == "a" and rule.versus == "b"
    assert rule.change is not None and rule.change.separated and rule.change.value == 2.0


def test_times_that_cannot_be_told_apart_prefer_less_memory() -> None:
    pool = _pool([("a", 1000, 100.0, 9e6), ("b", 1000, 98.0, 1e6)])  # 10 s against 10.2 s
    rule = choose_by_time(pool, _ratios(pool, 0.05))
    assert rule is not None and rule.soonest == "a" and rule.pick == "b"
    assert rule.within_noise == ("b",) and not rule.change.separated


def test_with_the_same_memory_the_more_accurate_beyond_noise_breaks_a_tie() -> None:
    pool = _pool([("a", 1000, 100.0, 4e6), ("b", 1000, 98.0, 4e6)])
    pool["val_images"] = 1000
    rule = choose_by_time(pool.assign(val_accuracy=[0.60, 0.70]), _ratios(pool, 0.05))
    assert rule is not None and rule.pick == "b" and rule.reason == "accuracy"
    assert rule.accuracy is not None and rule.accuracy.separated
    same = choose_by_time(pool.assign(val_accuracy=[0.60, 0.61]), _ratios(pool, 0.05))
    assert same is not None and same.pick == "a" and same.reason == "soonest"  # within noise


def test_the_soonest_stays_when_it_also_needs_less_memory() -> None:
    pool = _pool([("a", 1000, 100.0, 1e6), ("b", 1000, 98.0, 9e6)])
    rule = choose_by_time(pool, _ratios(pool, 0.05))
    assert rule is not None and rule.pick == "a" and rule.within_noise == ("b",)


def test_a_few_kib_of_peak_memory_are_the_same_memory() -> None:
    """A sooner and more accurate config lost to one 4 KiB lighter at 14.8 MiB (verification,
    2026-11-29): memories within 1 % are the same, and accuracy beyond noise decides."""
    mib = 14.8 * 2**20
    pool = _pool([("a", 1000, 100.0, mib), ("b", 1000, 98.0, mib - 4096)])
    pool["val_images"] = 1000
    rule = choose_by_time(pool.assign(val_accuracy=[0.70, 0.60]), _ratios(pool, 0.05))
    assert rule is not None and rule.pick == "a" and rule.reason == "soonest"
    lighter = pool.assign(peak_memory_bytes=[mib, mib * 0.9])  # 10 % less: less memory
    rule = choose_by_time(lighter.assign(val_accuracy=[0.70, 0.60]), _ratios(pool, 0.05))
    assert rule is not None and rule.pick == "b" and rule.reason == "memory"
    ahead = choose_by_time(pool.assign(val_accuracy=[0.60, 0.70]), _ratios(pool, 0.05))
    assert ahead is not None and ahead.pick == "b" and ahead.reason == "accuracy"


def test_without_a_paired_interval_no_time_is_beyond_noise() -> None:
    pool = _pool([("a", 1000, 100.0, 9e6), ("b", 1000, 20.0, 1e6)])  # 5x apart, measured once
    rule = choose_by_time(pool, _ratios(pool, None))
    assert rule is not None and rule.pick == "b" and rule.change.verdict == "none"


def test_no_candidate_reached_the_target_means_no_rule_pick() -> None:
    pool = _pool([("a", math.nan, 100.0, 1e6)])
    assert choose_by_time(pool, _ratios(pool, 0.05)) is None


def test_the_time_ratio_carries_the_crossings_range_and_the_throughput_interval() -> None:
    slower = {IMAGES_TO_TARGET: 400.0, IMAGES_TO_TARGET_LOW: 300.0}
    sooner = {IMAGES_TO_TARGET: 200.0, IMAGES_TO_TARGET_LOW: 100.0}
    change = time_ratio(slower, sooner, Change(1.5, 1.2, 1.8, 8, 1.0))
    assert change.value == pytest.approx(3.0)
    assert change.low == pytest.approx(300 / 200 * 1.2) and change.high == pytest.approx(4 * 1.8)
    first = time_ratio(slower, {**sooner, IMAGES_TO_TARGET_LOW: 0.0}, Change(1.5, 1.2, 1.8, 8, 1))
    assert math.isinf(first.high) and first.verdict == "separated"  # low 1.8 > 1 still


def test_the_derived_target_is_the_lower_of_the_best_bound_and_the_median() -> None:
    pool = pd.DataFrame(
        {
            TRIAL_ID: ["a", "b", "c"],
            "val_accuracy": [0.9, 0.6, 0.5],
            "val_accuracy_low": [0.85, 0.55, 0.45],
        }
    )
    assert derive_target(pool, None).accuracy == 0.6  # the median: two of three reach it
    sharp = pool.assign(val_accuracy=[0.9, 0.89, 0.88])
    assert derive_target(sharp, None).accuracy == 0.85  # the best's lower bound
    assert derive_target(pool, 0.7).accuracy == 0.7 and derive_target(pool, 0.7).given
    assert math.isnan(derive_target(pool.iloc[:0], None).accuracy)


def test_a_bound_that_bounds_nothing_does_not_lower_the_derived_target() -> None:
    """Two seed runs of the best gave [0.000-1.000] under load: the target became 0.000, which
    every trial meets at its first evaluation. A bound at 0 (or none) leaves the median."""
    pool = pd.DataFrame({TRIAL_ID: ["a", "b", "c"], "val_accuracy": [0.73, 0.6, 0.5]})
    for low, said in (
        (0.0, "(a: 0.000) bounds nothing"),
        (math.nan, "no bound of the most accurate was measured"),
    ):
        target = derive_target(pool.assign(val_accuracy_low=low), None)
        assert target.accuracy == 0.6 and not target.given
        assert said in target.how and "0.600 is derived" in target.how
        assert "nan" not in target.how


def test_every_accuracy_difference_is_printed_with_its_interval() -> None:
    assert points_text(Change(0.075, 0.021, 0.129, 1, 0.0)) == "7.5 accuracy points [2.1–12.9]"
    assert points_text(Change(-0.05, -0.08, -0.02, 1, 0.0)) == "5.0 accuracy points [2.0–8.0]"
    assert "no interval" in points_text(Change(0.05, math.nan, math.nan, 1, 0.0))


def test_estimate_bounds_are_ordered(smoke_experiment: Path) -> None:
    trials = decide(load_experiment(smoke_experiment)).trials.dropna(
        subset=[TIME_TO_TARGET_EST_LOW, TIME_TO_TARGET_EST_HIGH]
    )
    assert (trials[TIME_TO_TARGET_EST_LOW] <= trials[TIME_TO_TARGET_EST_S]).all()
    assert (trials[TIME_TO_TARGET_EST_S] <= trials[TIME_TO_TARGET_EST_HIGH]).all()
