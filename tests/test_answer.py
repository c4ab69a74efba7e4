"""The answer's logic (tuner.answer): candidates by kind, the front on re-measured numbers, the
picks, the ties, and the picks' run configs (tuner.spaces.train_config_of)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tuner.answer import candidates, decide
from tuner.experiment import Experiment, typed_trials
from tuner.objectives import objectives_of
from tuner.record import KINDS

WORKLOAD = {"model": "vit_tiny_patch16_224", "data": "synthetic", "img_size": 32, "steps": 10}


COLUMNS = ["trial_id", "kind", "images_per_second", "val_accuracy", "val_images"]


def _experiment(rows: list[tuple], remeasure: pd.DataFrame | None = None) -> Experiment:
    trials = typed_trials(pd.DataFrame(rows, columns=COLUMNS))
    configs = {row[0]: {"batch_size": 16 * (i + 1), "base_lr": 0.1} for i, row in enumerate(rows)}
    metadata = {"objective": "pareto", "workload": WORKLOAD, "search_only_params": ["base_lr"]}
    return Experiment("e", Path("."), metadata, trials, configs, ["batch_size"], [], remeasure)


def _all_kinds() -> list[tuple]:
    # Every kind with the best numbers of all, but only "ok" can be recommended.
    fast = [(f"t{i}", 9000.0, 0.99, 1000) for i in range(len(KINDS))]
    return [(tid, kind, ips, acc, n) for (tid, ips, acc, n), kind in zip(fast, KINDS, strict=True)]


@pytest.mark.parametrize("kind", KINDS)
def test_only_trials_of_kind_ok_are_candidates(kind: str) -> None:
    rows = _all_kinds()
    trials = typed_trials(pd.DataFrame(rows, columns=COLUMNS))
    chosen = candidates(trials, objectives_of("pareto"))
    picked = {row[1] for row in rows if row[0] in set(chosen["trial_id"])}
    assert (kind in picked) == (kind == "ok")


def test_a_stopped_early_trial_is_never_picked_however_fast() -> None:
    rows = [("slow", "ok", 100.0, 0.5, 1000), ("quick", "stopped early", 9000.0, 0.9, 1000)]
    answer = decide(_experiment(rows))
    assert answer.front["trial_id"].tolist() == ["slow"]
    assert answer.recommended is not None and answer.recommended["trial_id"] == "slow"
    assert answer.picks is None and "best on both" in answer.sentence()


def test_the_picks_configs_are_their_full_run_configs() -> None:
    answer = decide(_experiment([("a", "ok", 100.0, 0.5, 1000), ("b", "ok", 50.0, 0.9, 1000)]))
    assert set(answer.configs) == {"a", "b"}
    config = answer.configs["b"]
    assert config.batch_size == 32 and config.model == WORKLOAD["model"]  # base_lr dropped


def test_only_re_measured_candidates_can_be_picked_and_ties_come_from_pairs() -> None:
    remeasure = pd.DataFrame(
        [("a", r, "ok", 100.0 + r) for r in range(3)]
        + [("b", r, "ok", 101.0 - r) for r in range(3)],
        columns=["trial_id", "repeat", "status", "images_per_second"],
    )
    answer = decide(
        _experiment(
            [
                ("a", "ok", 120.0, 0.50, 1000),
                ("b", "ok", 90.0, 0.80, 1000),
                ("c", "ok", 5000.0, 0.9, 1000),
            ],  # c was not re-measured: its one figure is not enough
            remeasure,
        )
    )
    assert answer.remeasured and "c" not in set(answer.front["trial_id"])
    assert answer.picks is not None and answer.picks.throughput.tie
    assert not answer.picks.accuracy.tie  # 0.80 vs 0.50 on 1000 images each
    assert answer.recommended is not None and answer.recommended["trial_id"] == "b"


def test_no_candidate_no_answer() -> None:
    answer = decide(_experiment([("x", "over budget", 100.0, 0.5, 1000)]))
    assert answer.front.empty and answer.recommended is None and not answer.configs
    assert answer.sentence().startswith("No trial can be recommended")


def test_picks_not_re_measured_are_never_a_tie() -> None:
    # 2.05x apart in the search, nothing re-measured: no interval, so no verdict on speed.
    answer = decide(
        _experiment([("fast", "ok", 205.0, 0.50, 1000), ("acc", "ok", 100.0, 0.52, 1000)])
    )
    assert answer.picks is not None and not answer.picks.throughput.has_interval
    assert not answer.picks.throughput.tie and not answer.picks.same_within_noise
    sentence = answer.sentence()
    assert "not re-measured" in sentence and "2.05x" in sentence
    assert "same within noise" not in sentence and "either will do" not in sentence
    assert answer.recommended is not None and answer.recommended["trial_id"] == "fast"


def test_re_measured_picks_far_apart_are_beyond_noise() -> None:
    remeasure = pd.DataFrame(
        [("a", r, "ok", 200.0 + r) for r in range(3)]
        + [("b", r, "ok", 100.0 - r) for r in range(3)],
        columns=["trial_id", "repeat", "status", "images_per_second"],
    )
    answer = decide(
        _experiment([("a", "ok", 200.0, 0.50, 1000), ("b", "ok", 100.0, 0.80, 1000)], remeasure)
    )
    assert answer.picks is not None and answer.picks.throughput.separated
    assert answer.sentence().startswith("A real trade-off")
