"""The trial record: every key a trial reports, from real RunResults, and the one classifier."""

from __future__ import annotations

import math
import typing
from typing import Any

import optuna
import pytest

from tuner import record
from tuner.config import TrainConfig
from tuner.engine import RunResult, short_run
from tuner.experiment import trial_dtypes
from tuner.record import KINDS, classify, is_candidate, optuna_state, trial_report
from tuner.techniques import KNOBS

MIB = 2**20
BUDGET = 200 * MIB


def _report(
    result: RunResult | dict[str, Any],
    *,
    final: bool = True,
    phase: str = "train",
):
    return trial_report(
        result,
        max_memory_bytes=BUDGET,
        phase=phase,
        node="n",
        final=final,
        counters={
            record.ENGINE_TIME_S: 2.0,
            record.TRIAL_TRAIN_TIME_S: 1.0,
            record.SPEED_SOURCE: "cache",
        },
    )


def _ok(peak: int = 100 * MIB, steps: int = 100, planned: int | None = 100) -> RunResult:
    return RunResult(
        status="ok",
        images_per_second=900.0,
        val_accuracy=0.8,
        peak_memory_bytes=peak,
        steps=steps,
        planned_steps=planned,
    )


# kind -> (the trial's last report, ended, crashed): each a real report of a real RunResult.
TRIALS: dict[str, tuple[dict[str, Any], bool, bool]] = {
    "ok": (_report(_ok()), True, False),
    "stopped early": (_report(_ok(), final=False), True, False),
    # Ended by its time budget (its safety cap) after 3 of the 50 steps its image budget holds.
    "starved": (_report(_ok(steps=3, planned=50)), True, False),
    "over budget": (_report(_ok(300 * MIB), phase="feasibility"), True, False),
    "diverged": (_report(RunResult(status="diverged", images_per_second=5.0)), True, False),
    "errored": (_report({"status": "error", "error": "boom"}, phase="setup"), True, True),
    "incomplete": (_report(_ok(), final=False), False, False),
}


def test_every_kind_is_exercised() -> None:
    assert set(TRIALS) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_real_report_is_classified_as_its_kind(kind: str) -> None:
    report, ended, crashed = TRIALS[kind]
    assert classify(report, ended=ended, crashed=crashed) == kind


def test_only_a_trial_that_trained_its_whole_budget_is_ok() -> None:
    assert classify(_report(_ok(steps=50, planned=50)), ended=True) == "ok"
    # One step short of its image budget: not compared as if it had trained the same images.
    assert classify(_report(_ok(steps=49, planned=50)), ended=True) == "starved"
    # A budget of training time plans no steps: every trial trains its seconds, none is cut.
    assert classify(_report(_ok(steps=3, planned=None)), ended=True) == "ok"
    # A folder written before planned_steps: its trials were judged by their first rung's steps.
    older = {**_report(_ok(steps=3, planned=None)), "first_rung_steps": 50}
    assert classify(older, ended=True) == "starved"
    assert optuna_state("starved") == "PRUNED"  # no objective values: its numbers say little


@pytest.mark.parametrize("kind", KINDS)
def test_only_ok_can_be_recommended(kind: str) -> None:
    assert is_candidate(kind) == (kind == "ok")


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_a_real_optuna_state(kind: str) -> None:
    state = optuna.trial.TrialState[optuna_state(kind)]
    assert state.is_finished()
    # Only ok is COMPLETE: its values are on every front, constraints read or not.
    assert (state == optuna.trial.TrialState.COMPLETE) == (kind == "ok")


@pytest.mark.parametrize("kind", KINDS)
def test_feasible_means_ran_ok_within_the_budget(kind: str) -> None:
    report, _, _ = TRIALS[kind]
    # A trial stopped early (or not ended yet) ran ok within the budget so far: feasible.
    assert report[record.FEASIBLE] == (kind in ("ok", "stopped early", "starved", "incomplete"))
    assert (report[record.MEMORY_VIOLATION] > 0) == (kind == "over budget")


def test_a_trial_that_crashed_after_an_ok_report_errored() -> None:
    report, _, _ = TRIALS["ok"]
    assert classify(report, ended=True, crashed=True) == "errored"
    assert classify(None, ended=True, crashed=True) == "errored"
    assert classify({}, ended=False) == "incomplete"


def test_oom_is_over_budget_even_without_a_measured_peak() -> None:
    report = _report(RunResult(status="oom", error="CUDA out of memory"))
    assert classify(report, ended=True) == "over budget"
    assert not report[record.FEASIBLE] and report[record.INFEASIBLE_REASON].startswith("oom")
    assert math.isnan(report["peak_memory_bytes"])  # missing numbers are NaN, never left out


def test_every_report_has_the_same_keys() -> None:
    keys = {frozenset(report) for report, _, _ in TRIALS.values()}
    assert len(keys) == 1
    assert set(record.SEARCH_KEYS) <= next(iter(keys))


def test_what_ran_is_reported_flat_per_registry_knob() -> None:
    result = RunResult(
        status="ok",
        effective={"prefetch": "off", "amp": "bf16", "num_workers": 0},
        notes=["prefetch=cuda_stream needs CUDA; fell back", "another note"],
    )
    m = _report(result)
    assert {record.EFFECTIVE_PREFIX + k.field for k in KNOBS} <= set(m)
    assert m["effective_prefetch"] == "off" and m["effective_amp"] == "bf16"
    assert m["effective_num_workers"] == 0 and m["effective_compile"] == ""
    assert m["notes"] == "prefetch=cuda_stream needs CUDA; fell back | another note"


def test_every_reported_key_has_a_declared_dtype() -> None:
    undeclared = [k for k, dtype in trial_dtypes(TRIALS["ok"][0]).items() if not dtype]
    assert undeclared == []


def test_no_key_is_declared_twice() -> None:
    families = [record.ENGINE_KEYS, record.SEARCH_KEYS, record.TABLE_KEYS]
    names = [name for family in families for name in family]
    assert len(names) == len(set(names))


RESULT_HINTS = typing.get_type_hints(RunResult)


@pytest.mark.parametrize("name", sorted(record.ENGINE_KEYS))
def test_run_result_fields_keep_their_kind_in_the_trials_table(name: str) -> None:
    hint = RESULT_HINTS.get(name, str)  # notes: the engine's list, joined
    kinds = {a for a in typing.get_args(hint) if a is not type(None)} or {hint}
    expected = (
        "boolean"
        if bool in kinds
        else "Int64"
        if int in kinds
        else "float64"
        if float in kinds
        else "string"
    )
    assert trial_dtypes([name])[name] == expected


TINY = TrainConfig(
    model="vit_tiny_r_s16_p8_224",
    model_kwargs={"patch_size": 2, "embed_dim": 32, "depth": 1, "num_heads": 2},
    img_size=16,
    batch_size=16,
    epochs=None,
    steps=2,
    warmup_steps=1,
    device="cpu",
)


def test_a_real_run_is_told_as_ok_or_over_budget_by_its_budget() -> None:
    result = short_run(TINY, steps=1)  # a real training run on the CPU
    peak = result.peak_memory_bytes
    assert result.ok and peak
    for budget, kind in ((2 * peak, "ok"), (peak // 2, "over budget")):
        report = trial_report(
            result,
            max_memory_bytes=budget,
            phase="train",
            node="n",
            final=True,
            counters={},
        )
        assert classify(report, ended=True) == kind
        assert report[record.FEASIBLE] == (kind == "ok")
        assert report[record.STEP] == result.steps
        assert report[record.EFFECTIVE_PREFIX + "batch_size"] == TINY.batch_size  # what ran
