"""Successive halving by non-dominated rank, infeasible trials last (the scheduler's core)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tuner.config import TrainConfig
from tuner.engine import Progress, train
from tuner.tune.halving import ParetoHalving, crowding_distance
from tuner.workloads import MICRO_VIT


def _halving() -> ParetoHalving:
    return ParetoHalving(["max", "max"], grace=1, eta=3, max_reports=9)


def test_rungs_grow_by_eta_and_stop_before_the_end() -> None:
    assert _halving().rungs() == [1, 3]
    assert ParetoHalving(["max"], grace=2, eta=2, max_reports=20).rungs() == [2, 4, 8, 16]


def test_the_first_trial_at_a_rung_goes_on_and_a_dominated_one_stops() -> None:
    h = _halving()
    assert h.continues("a", 1, [1000.0, 0.8], True)
    assert not h.continues("b", 1, [500.0, 0.5], True)  # dominated by a: 2 at the rung, top 1
    assert h.continues("a", 2, [1000.0, 0.9], True)  # not a rung: always on


def test_the_front_goes_on_before_dominated_trials() -> None:
    h = _halving()
    decisions = {}
    points = {"a": [1000, 0.5], "b": [400, 0.9], "c": [300, 0.4], "d": [350, 0.3],
              "e": [900, 0.6], "f": [200, 0.2]}  # fmt: skip
    for trial_id, values in points.items():
        decisions[trial_id] = h.continues(trial_id, 1, values, True)
    assert decisions["a"] and decisions["b"] and decisions["e"]  # on the front when they came
    assert not decisions["c"] and not decisions["d"] and not decisions["f"]


def test_infeasible_and_unmeasured_trials_rank_last() -> None:
    h = _halving()
    assert h.continues("a", 1, [100.0, 0.1], True)
    assert not h.continues("big", 1, [5000.0, 0.99], False)  # best numbers, but over budget
    assert not h.continues("nan", 1, [float("nan"), 0.99], True)


def test_a_trial_seen_again_at_a_rung_replaces_its_record() -> None:
    h = _halving()
    h.continues("a", 1, [100.0, 0.1], True)
    h.continues("a", 1, [200.0, 0.2], True)  # a restarted trial reports the rung again
    assert [e[0] for e in h.records[(0, 1)]] == ["a"] and h.records[(0, 1)][0][1] == (200.0, 0.2)


def test_crowding_distance_keeps_the_ends() -> None:
    points = np.array([[1.0, 5.0], [2.0, 4.0], [3.0, 3.5], [5.0, 1.0]])
    distance = crowding_distance(points)
    assert np.isinf(distance[0]) and np.isinf(distance[3])
    assert np.all(np.isfinite(distance[1:3]))


def test_every_fourth_trial_runs_in_a_later_bracket_judged_only_by_its_own() -> None:
    h = ParetoHalving.for_trials_of(["max", "max"], 5)  # the search's default: rungs at 2
    assert h.rungs(0) == [2] and h.rungs(1) == []  # the second bracket never stops a trial
    weak = [10.0, 0.1]
    points = [[1000.0 - n, 0.9] if n < 3 else weak for n in range(8)]
    decisions = [h.continues(f"t{n}", 2, point, True) for n, point in enumerate(points)]
    assert [h.bracket(f"t{n}") for n in range(8)] == [0, 0, 0, 1, 0, 0, 0, 1]
    assert decisions[3] and decisions[7]  # dominated, but in the bracket without rungs
    assert not decisions[4]  # the same point in the first bracket stops
    three = ParetoHalving(["max"], grace=1, eta=3, max_reports=30, brackets=3)
    assert [three.bracket(f"t{n}") for n in range(16)].count(2) == 1
    assert three.rungs(1) == [3, 9, 27] and three.rungs(2) == [9, 27]


def _rung_images(**budget: Any) -> dict[str, int]:
    """A replay of the halving over two real trials of batch 8 and 24 (the same lr per image):
    the images each had seen at the report the first rung judged."""
    halving = ParetoHalving.for_trials_of(["max", "max"], 2)
    assert halving.rungs() == [1]
    at_rung: dict[str, int] = {}
    for trial_id, batch in (("small", 8), ("large", 24)):
        seen: list[Progress] = []
        config = TrainConfig(**MICRO_VIT, data="digits", img_size=16, batch_size=batch,
                             lr=1e-3 * batch / 256, epochs=None, warmup_steps=1,
                             max_eval_batches=2, device="cpu", **budget)  # fmt: skip
        train(config, on_eval=seen.append)
        for report, progress in enumerate(seen, start=1):
            result = progress.result
            values = [result.images_per_second or 0.0, result.val_accuracy]
            if report in halving.rungs():
                at_rung[trial_id] = result.images_seen
            if not halving.continues(trial_id, report, values, True):
                break
    assert {entry[0] for entry in halving.records[(0, 1)]} == {"small", "large"}
    return at_rung


def test_a_rung_judges_trials_of_every_batch_size_at_equal_images() -> None:
    # Evaluated every 32 images: both are judged after 32 images, within one batch (24).
    equal = _rung_images(images=64, eval_every_images=32)
    assert all(32 <= images < 32 + 24 for images in equal.values()), equal
    # Evaluated every 4 steps (what a step budget did): the large batch had seen 3x the images.
    by_steps = _rung_images(steps=8, eval_every_steps=4)
    assert by_steps == {"small": 32, "large": 96}
