"""Re-measurement and effects after a search (:mod:`tuner.compare.trust`): real engine runs of a
tiny model on the CPU, each arm built once and timed in windows, and the stopping rule."""

from __future__ import annotations

import pandas as pd
import pytest

from tuner.compare import trust
from tuner.compare.trust import Budget, _looks_at, _resolved
from tuner.config import TrainConfig
from tuner.engine import windows
from tuner.errors import TunerError
from tuner.workloads import MICRO_VIT


def tiny(**changes: object) -> TrainConfig:
    base = {**MICRO_VIT, "batch_size": 32, "epochs": None, "steps": 3, "warmup_steps": 1}
    return TrainConfig(**{**base, "device": "cpu", **changes})  # type: ignore[arg-type]


def _builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every WindowRun built (the real class, counted)."""
    built: list[str] = []
    real = windows.WindowRun

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, config, **kwargs):
            built.append(config.model)
            super().__init__(config, **kwargs)

    monkeypatch.setattr(windows, "WindowRun", Counted)
    return built


def test_each_arm_is_built_once_and_measured_every_round(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _builds(monkeypatch)
    runs, info = trust.effects(
        tiny(warmup_steps=1), cuda=False, steps=3, budget=Budget(3, 3, resolution=0.0)
    )
    assert len(built) == len(info["arms"])  # one build per arm, three rounds each
    assert info["repeats_done"] == 3 and info["stopped"] == "max repeats"
    ok = runs[runs["status"] == "ok"]
    assert set(ok["arm"]) == set(info["arms"]) and (ok["images_per_second"] > 0).all()
    assert all(sorted(g) == [0, 1, 2] for _, g in ok.groupby("arm")["repeat"])
    assert "Chow-Robbins" in info["method"] and "windows of one build" in info["method"]


def test_a_failing_arm_is_one_row_and_an_impossible_one_is_dropped() -> None:
    configs = [tiny(), tiny(lr=1e9, steps=50), tiny(norm="group", gn_groups=7)]
    rows, info = trust.remeasure(configs, steps=3, budget=Budget(2, 3), cuda=False)
    frame = pd.DataFrame(rows)
    assert (frame.loc[frame["candidate"] == 0, "status"] == "ok").sum() >= 2
    assert frame.loc[frame["candidate"] == 1, "status"].tolist() == ["diverged"]
    assert 2 not in set(frame["candidate"]) and "gn_groups=7" in info["dropped"][0]


def test_the_time_limit_leaves_three_rounds_of_the_shortest_windows() -> None:
    rows, info = trust.remeasure(
        [tiny(), tiny(batch_size=16)], steps=8, budget=Budget(2, 50, time_limit_s=0.01), cuda=False
    )
    assert info["stopped"] == "time limit" and info["repeats_done"] == 3
    assert len(rows) == 6 and info["steps"] == 2  # no time left: the shortest windows


def _pair(ratios: list[float]) -> pd.DataFrame:
    rows = []
    for r, ratio in enumerate(ratios):
        rows.append({"arm": "a", "repeat": r, "status": "ok", "images_per_second": 100.0})
        rows.append({"arm": "b", "repeat": r, "status": "ok", "images_per_second": 100.0 * ratio})
    return pd.DataFrame(rows)


def test_stopping_looks_at_the_width_never_at_the_side_of_one() -> None:
    budget = Budget(2, 20, resolution=0.03)
    pairs = lambda _: [("a", "b")]  # noqa: E731
    narrow = [1.00, 1.01, 0.99, 1.00, 1.01, 0.99]
    wide = [1.00, 1.10, 0.90, 1.00, 1.10, 0.90]
    assert _resolved(_pair(narrow), pairs, budget)
    assert not _resolved(_pair(wide), pairs, budget)
    # The same spread around 1.2x: the same decision, whether or not 1x is inside.
    assert _resolved(_pair([1.2 * r for r in narrow]), pairs, budget)
    assert not _resolved(_pair([1.2 * r for r in wide]), pairs, budget)
    assert not _resolved(_pair([1.0]), pairs, budget)  # one pair: no interval yet


def test_impossible_round_counts_are_refused() -> None:
    with pytest.raises(TunerError, match=r"repeats 5\.\.3"):
        Budget(5, 3)


def test_the_rule_looks_at_the_minimum_then_every_four_rounds() -> None:
    assert [r for r in range(21) if _looks_at(r, Budget(8, 20))] == [8, 12, 16, 20]
