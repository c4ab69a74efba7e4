"""The search-efficiency replay over the committed grid: real samplers, no training (seconds)."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def replay():
    spec = importlib.util.spec_from_file_location("search_replay", BENCH / "search_replay.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["search_replay"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def grid(replay):
    data = json.loads((BENCH / "data" / "search_grid.json").read_text())
    memories = [statistics.median(r["peak_memory_bytes"] for r in c["repeats"])
                for c in data["speed"]]  # fmt: skip
    return replay.Grid(data, float(np.quantile(memories, 0.75)))


def test_the_grid_is_complete_and_small(grid, replay) -> None:
    assert len(grid.training) == 24 and len(grid.speed) == 8 * 16
    assert (BENCH / "data" / "search_grid.json").stat().st_size < 1_000_000
    assert 0 < grid.front_hv() <= 1


def test_the_grid_trains_every_config_the_same_images(grid) -> None:
    """Issue 47: the replay's rungs and front compare equal images, as the search does."""
    images = grid.about["images"]
    for training in grid.training.values():
        batch = training["config"]["batch_size"]
        seen = [point["images_seen"] for point in training["curve"]]
        assert len(seen) == grid.about["evaluations"]
        marks = [images * (k + 1) // len(seen) for k in range(len(seen))]
        assert all(mark <= s < mark + batch for s, mark in zip(seen, marks, strict=True)), seen


@pytest.mark.parametrize("index", range(7))
def test_every_strategy_replays_with_real_samplers(replay, grid, index: int) -> None:
    strategy = replay.STRATEGIES[index]
    ledger = replay.replay(strategy, grid, seed=0, budget_s=40.0, max_trials=12)
    spent = [s for s, _ in ledger.history]
    assert spent == sorted(spent) and ledger.spent >= min(40.0, spent[-1])
    fractions = [hv / grid.front_hv() for _, hv in ledger.history]
    assert all(0 <= f <= 1 + 1e-9 for f in fractions) and fractions == sorted(fractions)
    assert ledger.points, "a replayed search trains at least one feasible config"
    for ips, acc in ledger.points:  # every point found is a point of the grid
        assert 0 < ips <= grid.best_ips and 0 <= acc <= 1


def test_the_new_design_chooses_speed_knobs_by_probes(replay, grid) -> None:
    ledger = replay.Ledger(grid)
    config = {"batch_size": 32, "norm": "batch", "amp": "off", "base_lr": 1e-3}
    chosen = replay._probed(grid, config, {}, ledger)
    assert chosen["channels_last"]  # 1.2-1.3x on this CPU in every probe of the grid
    assert ledger.spent > 0 and grid.ips(config, chosen) > grid.ips(config, grid.plain())


def test_the_summary_and_its_table(replay, grid, tmp_path: Path) -> None:
    report = replay.run_all(grid, range(2), 30.0, 8,
                            replay.STRATEGIES[:2] + replay.STRATEGIES[3:4],
                            log=lambda _: None)  # fmt: skip
    report["about"] = {**grid.about, "average_training_s": 6.0}
    replay.write({"vit": report}, tmp_path)
    text = (tmp_path / "search_replay.md").read_text()
    assert "## Grid `vit`" in text and "| tpe-joint |" in text and "| new |" in text
    low, high = report["strategies"]["new"]["ratio_interval"]
    assert low <= high or math.isnan(low)
    assert (tmp_path / "search_replay.png").stat().st_size > 0


@pytest.fixture(scope="module")
def variants(replay):
    path = BENCH / "search_replay_variants.py"
    spec = importlib.util.spec_from_file_location("search_replay_variants", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["search_replay_variants"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name", ["lazy", "lazy-optimistic", "one-round", "dedup", "transfer", "free-probes"]
)
def test_every_variant_not_kept_replays(variants, replay, grid, name: str) -> None:
    ledger = variants.VARIANTS[name](grid, 0, 40.0, 12)
    spent = [s for s, _ in ledger.history]
    assert spent == sorted(spent) and ledger.points
    assert all(0 < ips <= grid.best_ips for ips, _ in ledger.points)


def test_free_probes_is_the_new_design_without_the_probes_bill(variants, grid) -> None:
    new = variants.VARIANTS["new"](grid, 3, 60.0, 12)
    free = variants.VARIANTS["free-probes"](grid, 3, 60.0, 12)
    assert free.points[: len(new.points)] == new.points  # the same trials and speed choices
    reached = new.history[-1][1]  # the same front, found with less compute
    assert variants.R.cost_to_reach(free.history, reached) < new.history[-1][0]


def test_a_lazy_trial_pays_each_setting_for_the_reports_it_ran(variants, grid) -> None:
    config = {"batch_size": 32, "norm": "batch", "amp": "off", "base_lr": 1e-3}
    plain, fast = grid.plain(), {**grid.plain(), "channels_last": True}
    last = len(grid.curve(config))  # the grid's evaluations: its last report
    trial = variants._LazyTrial(grid, config, plain, None)
    paid = trial.cost_to(2)
    trial.switch(fast, 2)
    paid += trial.cost_to(last)
    expected = grid.train_cost(config, plain, 2) + (
        grid.train_cost(config, fast, last) - grid.train_cost(config, fast, 2)
    )
    assert paid == pytest.approx(expected)
    assert grid.train_cost(config, fast, last) < paid < grid.train_cost(config, plain, last)


def test_held_out_credit_scores_what_was_measured_with_other_repeats(variants, grid) -> None:
    held = variants.HeldOutGrid(grid.data, grid.budget)
    config = {"batch_size": 32, "norm": "batch", "amp": "off", "base_lr": 1e-3}
    plain = grid.plain()
    repeats = [r["images_per_second"] for r in grid.cell(config, plain)["repeats"]]
    assert held.ips(config, plain) == statistics.median(repeats[:2])
    assert held.credit(config, plain) == statistics.median(repeats[2:])
    assert 0 < held.reference_hv <= 1
    measured, credited = [(2.0, 0.5), (1.0, 0.9)], [(1.5, 0.5), (1.2, 0.9)]
    assert variants.credited_hv(measured, credited, 2.0) == pytest.approx(
        variants.R.hypervolume(credited, 2.0)
    )
