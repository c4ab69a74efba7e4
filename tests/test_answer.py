"""The answer's logic (tuner.answer): candidates by kind, the front on re-measured numbers, the
picks, the ties, and the picks' run configs (tuner.spaces.train_config_of)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tuner.answer import candidates, decide, starved_text, world_size_of
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
    assert answer.picks is None and "only one that can be picked" in answer.sentence()
    assert "best on both" not in answer.sentence()  # compared with nothing: no claim


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


def _remeasure(runs: dict[str, list[float]]) -> pd.DataFrame:
    rows = [(tid, r, "ok", ips) for tid, values in runs.items() for r, ips in enumerate(values)]
    return pd.DataFrame(rows, columns=["trial_id", "repeat", "status", "images_per_second"])


def test_one_pick_ahead_beyond_noise_on_both_is_best_on_both() -> None:
    remeasure = _remeasure({"a": [200.0, 202.0, 199.0, 201.0], "b": [100.0, 99.0, 101.0, 100.0]})
    answer = decide(
        _experiment([("a", "ok", 200.0, 0.90, 1000), ("b", "ok", 100.0, 0.50, 1000)], remeasure)
    )
    assert answer.picks is None and answer.best_on_both
    assert "is the best on both throughput and accuracy, beyond noise" in answer.sentence()
    assert answer.noise_note() == ""


def test_one_pick_with_equal_accuracy_names_the_tie_not_best_on_both() -> None:
    # The case: identical accuracy, 2 % apart in throughput with overlapping intervals.
    remeasure = _remeasure({"a": [102.0, 99.0, 104.0], "b": [100.0, 101.0, 101.0]})
    answer = decide(
        _experiment([("a", "ok", 102.0, 0.164, 128), ("b", "ok", 100.0, 0.164, 128)], remeasure)
    )
    sentence = answer.sentence()
    assert answer.picks is None and not answer.best_on_both
    assert "best on both" not in sentence and "not beyond noise on both" in sentence
    assert "a tie on speed" in sentence and "a tie on accuracy" in sentence


def test_a_throughput_tie_is_never_called_fastest_beyond_noise() -> None:
    # 1.14x [0.87-1.51] on a busy machine: a tie, wider than the +-3 % aimed at: too noisy.
    fast = [114.0, 150.0, 88.0, 118.0, 95.0, 130.0]
    remeasure = _remeasure({"f": fast, "s": [100.0] * 6})
    answer = decide(
        _experiment([("f", "ok", 117.0, 0.50, 100), ("s", "ok", 100.0, 0.52, 100)], remeasure)
    )
    p = answer.picks
    assert p is not None and p.throughput.verdict == "tie" and p.accuracy.tie
    assert "beyond noise" not in answer.sentence().replace("within noise", "")
    assert "same within noise" in answer.sentence()
    note = answer.noise_note()
    assert note.startswith("Too noisy to decide on speed.") and "--trust-budget" in note


def test_two_pairs_say_nothing_so_no_verdict_on_speed() -> None:
    remeasure = _remeasure({"f": [150.0, 90.0], "s": [100.0, 100.0]})
    answer = decide(
        _experiment([("f", "ok", 120.0, 0.50, 1000), ("s", "ok", 100.0, 0.80, 1000)], remeasure)
    )
    p = answer.picks
    assert (
        p is not None
        and p.throughput.contains_neutral
        and not p.throughput.tie
        and p.throughput.verdict == "uninformative"
    )
    assert answer.recommended is not None and answer.recommended["trial_id"] == "f"
    assert "says nothing, so no verdict on speed" in answer.sentence()
    assert "says nothing" in answer.noise_note()


def test_a_tie_as_narrow_as_aimed_at_is_decided_not_too_noisy() -> None:
    remeasure = _remeasure({"f": [100.5, 100.0, 99.8, 100.2], "s": [100.0] * 4})
    answer = decide(
        _experiment([("f", "ok", 100.0, 0.50, 1000), ("s", "ok", 99.0, 0.80, 1000)], remeasure)
    )
    assert answer.picks is not None and answer.picks.throughput.verdict == "tie"
    assert answer.noise_note() == ""
    assert answer.recommended is not None and answer.recommended["trial_id"] == "s"


def test_a_data_parallel_pick_is_never_told_to_re_measure() -> None:
    # A data-parallel search skips the re-measurement (it measures one process): no advice
    # to re-measure, and each pick's world size is the one its run reported.
    rows = [("fast", "ok", 205.0, 0.50, 1000), ("acc", "ok", 100.0, 0.52, 1000)]
    experiment = _experiment(rows)
    experiment.trials["world_size"] = pd.array([2, 4], dtype="Int64")
    answer = decide(experiment)
    assert answer.data_parallel and "--remeasure-top" not in answer.sentence()
    assert "data-parallel search is not re-measured" in answer.sentence()
    assert [world_size_of(answer.best[m]) for m in ("images_per_second", "val_accuracy")] == [2, 4]
    one = decide(_experiment(rows))
    assert not one.data_parallel and "--remeasure-top 2" in one.sentence()


def test_starved_trials_of_unknown_cause_are_counted_so() -> None:
    """A cause "unknown (...)" reads "of unknown cause", as an empty one does (a one-line
    rewrite of the counting printed "3 by unknown")."""
    trials = pd.DataFrame(
        {
            "kind": ["starved"] * 3,
            "starved_by": ["unknown (no probe measured its speed)", "", "budget (at 1 img/s)"],
        }
    )
    text = starved_text(trials) or ""
    assert text.startswith("3 trials were starved (2 of unknown cause, 1 by budget): ")
