"""The probe budget: what a session may spend, what it leaves unprobed, and what has nothing to
act on. Real probe runs of a micro ViT on the CPU."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tuner.config import TrainConfig
from tuner.speed import ProbeBudget, SpeedChoice, choose_speed, trial_length_s
from tuner.speed.budget import SLOW_BUILD_PRIOR_S, predicted_run_s, run_cost
from tuner.speed.choose import variants
from tuner.workloads import MICRO_VIT

TINY = TrainConfig(
    **MICRO_VIT,
    img_size=16, batch_size=16, epochs=None, steps=8, warmup_steps=1, device="cpu",
)  # fmt: skip


def test_a_trial_s_length_is_its_time_budget_or_its_steps_at_the_probed_speed() -> None:
    assert trial_length_s(TINY, None) is None  # steps, but no step time yet
    assert trial_length_s(TINY, 0.5) == pytest.approx(4.0)
    assert trial_length_s(TINY.replace(time_budget_s=3.0), 0.5) == 3.0  # the shorter
    # Steps and a time budget, no step time yet: unknown (the budget may be far longer).
    assert trial_length_s(TINY.replace(time_budget_s=30.0), None) is None
    assert trial_length_s(TINY.replace(steps=None, time_budget_s=30.0), None) == 30.0


def test_a_run_that_does_not_fit_what_is_left_is_not_started() -> None:
    budget = ProbeBudget(10.0, prior_run_s=4.0)
    assert budget.allows("plain")  # the first run, predicted to leave room for a knob after it
    assert not ProbeBudget(7.9, prior_run_s=4.0).allows("plain")
    budget.charge("plain", 4.0, 0.1)
    assert budget.allows("set_to_none") and budget.left_s == 6.0
    budget.charge("set_to_none", 5.0, 0.1)
    assert not budget.allows("plain")  # its slowest run (4 s) > what is left (1 s)
    # A slow-to-build knob is predicted at its prior before its first run.
    assert not ProbeBudget(20.0, runs={"plain": 1.0}).allows("compile", slow_build=True)
    assert ProbeBudget(SLOW_BUILD_PRIOR_S + 2, runs={"plain": 1.0}).allows(
        "compile", slow_build=True
    )
    assert ProbeBudget(None).allows("anything") and math.isinf(ProbeBudget(None).allowed_s)
    assert ProbeBudget(-5.0).allowed_s == 0.0  # a pool in debt allows nothing


def test_a_budget_that_is_used_up_leaves_knobs_not_probed_never_tried_and_lost() -> None:
    budget = ProbeBudget(0.0, earn_later=None)  # not even the plain setting fits
    choice = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=2,
                          max_memory_bytes=None, budget=budget)  # fmt: skip
    assert choice.settings == {} and budget.spent_s == 0.0
    assert choice.not_probed and all(v["probed"] is False for v in choice.variants)
    assert all(v["ratio"] is None and not v["kept"] for v in choice.variants)
    assert "not probed (probe budget)" in choice.summary()
    assert SpeedChoice.from_dict(choice.to_dict()) == choice


def test_a_budget_for_a_few_runs_probes_the_first_knobs_and_records_the_rest() -> None:
    for _ in range(2):  # the second on a warm process: the first pays one-time costs
        measured = ProbeBudget(None)
        unbounded = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=1,
                                 max_memory_bytes=None, budget=measured)  # fmt: skip
    assert unbounded.slowest_run_s and not unbounded.not_probed
    runs = len([v for v in unbounded.variants if " on " not in v["name"]]) + 1
    assert runs >= 6
    # Three typical runs, its first one predicted at that: it holds about three of the 2 x 7 + 1
    # runs of two repeats (all of them only if runs got 5x faster). Typical: the median arm's
    # run, not the slowest, which one stall on a loaded machine can make 5x the rest.
    typical = statistics.median(measured.runs.values())
    budget = ProbeBudget(3 * typical, prior_run_s=typical)
    choice = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=2,
                          max_memory_bytes=None, budget=budget)  # fmt: skip
    probed = [v["name"] for v in choice.variants if v.get("probed", True)]
    left = [v["name"] for v in choice.variants if v.get("probed") is False]
    assert left == choice.not_probed and left, "the budget held fewer runs than the knobs"
    alone = {v["name"] for v in unbounded.variants if " on " not in v["name"]}
    assert alone <= set(probed) | set(left)  # each knob alone: measured, or not probed
    for name in left:  # kept at the default
        assert not any(name.startswith(k) for k in choice.settings)
    assert budget.spent_s <= budget.allowed_s + max(budget.runs.values())  # one run over at most


def test_knobs_with_nothing_to_act_on_are_not_probed() -> None:
    from tuner.speed.choose import _Where

    everything = {e.field for e, _ in variants(cuda=True, pinned=(), cores=8)}
    assert {"num_workers", "pin_memory", "prefetch", "host_prefetch"} <= everything
    on_gpu_data = _Where(cuda=True, on_device=True, cores=8)
    kept = {e.field for e, _ in variants(cuda=True, pinned=(), cores=8, where=on_gpu_data)}
    assert not kept & {"num_workers", "pin_memory", "non_blocking", "prefetch", "host_prefetch"}
    assert {"set_to_none", "channels_last", "fused_adamw", "compile"} <= kept
    one_core = {e.field for e, _ in variants(cuda=False, pinned=(), where=_Where(False, cores=1))}
    assert "num_workers" not in one_core and "set_to_none" in one_core


def test_the_shared_scope_leaves_channels_last_to_the_norm_s_own_scope() -> None:
    from tuner.speed.choose import _Where

    def fields(scope: str) -> set[str]:
        where = _Where(False, cores=2, scope=scope)  # type: ignore[arg-type]
        return {e.field for e, _ in variants(cuda=False, pinned=(), where=where)}

    shared, own = fields("shared"), fields("config")
    assert own == {"channels_last"} and "channels_last" not in shared and "set_to_none" in shared


def test_a_first_run_nothing_predicts_waits_for_a_trial_to_tell_its_cost() -> None:
    """Measured on a cold CPU search: a first probe run with no prior took 18-29 s of a 2.4 s
    budget. With nothing seen, only a trial whose length waits for the run may start it."""
    assert not ProbeBudget(2.4).allows("plain")  # its length is known: it trains unprobed
    assert ProbeBudget(2.4, earn_later=TINY).allows("plain")  # its share waits for the run
    assert not ProbeBudget(-1.0, earn_later=TINY).allows("plain")  # not while in debt


def test_a_trained_run_predicts_probe_runs_of_alike_configs_by_batch_size() -> None:
    seen = [run_cost(TINY.to_dict(), setup_s=1.0, step_time_s=0.16)]  # 0.01 s an image
    bigger = TINY.replace(batch_size=64).to_dict()
    # Setup, then its warm-up step and 4 measured steps of 64 images at 0.01 s each.
    assert predicted_run_s(seen, bigger, 4) == pytest.approx(1.0 + 5 * 0.64)
    bf16 = TINY.replace(amp="bf16").to_dict()
    assert predicted_run_s(seen, bf16, 4) is None  # not alike
    assert predicted_run_s(seen, bf16, 4, alike=False) == pytest.approx(1.0 + 5 * 0.16)
    slower = [*seen, run_cost(TINY.to_dict(), setup_s=2.0, step_time_s=0.32)]
    assert predicted_run_s(slower, bigger, 4) == pytest.approx(2.0 + 5 * 1.28)  # the slowest


def _cost_model(faster: float, knob_s: float = 1.0) -> Any:
    """A probe run predicted instead of trained (the seam bench/gpu_cost_model.py uses): the
    plain setting's run 1 s at 100 images/s, a knob's ``knob_s`` at ``faster`` times that,
    x0.85 and x1.2 in turn (noise: its two pairs both faster, their interval wide)."""
    runs: dict[str, int] = {}
    from tuner.engine import RunResult
    from tuner.engine.build import warmup_steps_of

    def measure(config: TrainConfig, steps: int, limit: float | None) -> RunResult:
        knobs = config != TINY
        runs[repr(config)] = runs.get(repr(config), 0) + 1
        turn = (0.85, 1.2)[runs[repr(config)] % 2]
        ips = 100.0 * (faster * turn if knobs else 1.0)
        done = warmup_steps_of(config) + steps
        step = config.batch_size / ips
        return RunResult(status="ok", images_per_second=ips, step_time_s=step,
                         train_time_s=done * step, wall_time_s=knob_s if knobs else 1.0,
                         setup_time_s=0.0,
                         steps=done, peak_memory_bytes=1)  # fmt: skip

    return measure


def test_a_knob_the_budget_cut_before_its_second_pair_is_not_kept_on_one() -> None:
    """Issue 48: with --speed-repeats 2, "fused_adamw (1.33x, one measurement)" was kept: the
    budget ended the rounds after the knob's first pair. README's rule is "kept only if faster
    in every pair": a pair not run is not one it won, so the knob is not probed (it keeps its
    default, and the next trial of these settings probes it)."""
    # The first knob's run costs twice what was predicted: its second pair no longer fits.
    budget = ProbeBudget(5.5, prior_run_s=1.0)
    choice = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=2, max_memory_bytes=None,
                          budget=budget, measure=_cost_model(1.33, knob_s=2.0))  # fmt: skip
    assert set(budget.runs) - {"plain"} and choice.settings == {}  # a knob ran one pair
    assert not any(v["kept"] for v in choice.variants)
    assert all(v.get("probed") is False for v in choice.variants)
    assert "one measurement" not in choice.summary()
    assert choice.summary().startswith("plain; not probed (probe budget): ")
    # A budget that holds the plain setting and one knob for both pairs probes that knob
    # fully and leaves the others for a later trial, instead of a first pair of each.
    budget = ProbeBudget(5.5, prior_run_s=1.0)  # the first plain run (the memory check) too
    some = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=2, max_memory_bytes=None,
                        budget=budget, measure=_cost_model(1.33))  # fmt: skip
    probed = [v for v in some.variants if v.get("probed", True)]
    assert len(probed) == 1 and probed[0]["kept"] and probed[0]["pairs"] == 2
    assert len(some.not_probed) == len(some.variants) - 1 and budget.spent_s == 5.0
    # The same knobs with both pairs run are kept, and their verdict named by the one rule.
    full = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=2, max_memory_bytes=None,
                        budget=ProbeBudget(None), measure=_cost_model(1.33))  # fmt: skip
    assert full.settings and "interval says nothing (2 pairs)" in full.summary()
    assert "within noise" not in full.summary()


def test_nothing_probed_is_not_said_as_no_knob_faster() -> None:
    """Issue 48: "plain (no knob was faster in every probe); not probed (probe budget): <every
    knob>" for a trial that probed nothing ("probes 0.0 s of 0.0 s")."""
    choice = choose_speed(TINY, cuda=False, pinned=(), steps=2, repeats=2, max_memory_bytes=None,
                          budget=ProbeBudget(0.0))  # fmt: skip
    assert choice.summary().startswith("plain; not probed (probe budget): ")
    assert "faster" not in choice.summary()


@pytest.fixture
def hog_on_this_core() -> Iterator[None]:
    """A real CPU hog (``python3 -c 'while True: pass'``) on the one core this process is pinned
    to for the test; ended by its PID after."""
    before = os.sched_getaffinity(0)
    core = min(before)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(hog.pid, {core})
        os.sched_setaffinity(0, {core})
        yield
    finally:
        os.sched_setaffinity(0, before)
        hog.kill()
        hog.wait()


def test_a_hogged_first_probe_run_stops_at_what_its_time_budget_can_earn(
    hog_on_this_core: None,
) -> None:
    """Issue 48: the first trial beside a CPU hog showed "probes 10.2 s of 2.4 s": its first
    run was unbounded while its length (steps, or its time budget) waited for the run's step
    time. A trial with a time budget earns at most share x that budget, so that bounds the run:
    it ends within a step of it (README: "no probe run outlasts what is left by more than a
    step")."""
    from tuner.engine import short_run

    config = TINY.replace(steps=400, time_budget_s=2.0)  # earns at most 0.2 x 2 s = 0.4 s
    results = []

    def measure(config: TrainConfig, steps: int, limit: float | None) -> Any:
        results.append(short_run(config, steps=steps, time_limit_s=limit))  # the real engine
        return results[-1]

    budget = ProbeBudget(0.0, earn_later=config)  # a cold search's first trial
    choose_speed(config, cuda=False, pinned=(), steps=60, repeats=2, max_memory_bytes=None,
                 budget=budget, measure=measure)  # fmt: skip
    first = results[0]
    step = first.step_time_s or first.train_time_s  # the slowest a step ran, at the least
    assert first.steps < 1 + 60, "the hogged run was not cut: it outlasted 0.4 s"
    assert first.train_time_s <= 0.4 + 2 * step, (first.train_time_s, step)
    assert budget.spent_s <= 0.4 + 2 * step + first.setup_time_s + 0.5
