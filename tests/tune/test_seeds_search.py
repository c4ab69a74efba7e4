"""A search retrains its picks and their plain loop with 3 new seeds after the trials, within
its trust budget (tuner.compare.seeds), and the answer tells their accuracy over seeds.
A real Ray + Optuna search of its own: the long tier (tests/tiers.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from search_cli import search_command

from tuner.compare.seeds import PICK, SEEDS, seed_accuracy_of
from tuner.experiment import SEEDS_FILE, load_experiment

pytestmark = pytest.mark.slow


def test_the_picks_are_retrained_with_three_seeds_interleaved_and_the_answer_says_so(
    tmp_path: Path,
) -> None:
    command = search_command(
        "smoke_space", "--seed", "0", "--num-samples", "3", "--remeasure-top", "2",
        "--remeasure-repeats", "2", "--remeasure-max-repeats", "2", "--effects-repeats", "2",
        "--trust-budget", "300", "--reports-dir", str(tmp_path / "reports"),
        name="seeded", storage=tmp_path / "experiments",
    )  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Retraining the pick(s)" in done.stdout and "3 rounds" in done.stdout
    experiment = load_experiment(tmp_path / "experiments" / "seeded")
    seeds = pd.read_csv(experiment.path / SEEDS_FILE, dtype={"trial_id": str})
    final = seeds[seeds["final"]]
    # round-robin: each round has every arm once, with that round's seed (1, 2, 3: new seeds)
    per_round = final.groupby("round")["seed"].agg(["nunique", "first", "size"])
    assert list(per_round.index) == [1, 2, 3] and (per_round["nunique"] == 1).all()
    assert list(per_round["first"]) == [1, 2, 3] and per_round["size"].nunique() == 1
    assert (final["status"] == "ok").all() and (final["val_images"] > 0).all()
    meta = experiment.metadata["seeds"]
    assert meta["repeats_done"] == SEEDS and "short" not in meta
    picks = final[final["arm"] == PICK]["trial_id"].unique()
    for trial_id in picks:
        accuracy = seed_accuracy_of(experiment.seeds, trial_id)
        assert accuracy.seeds == SEEDS and accuracy.covers_seeds
    report = (tmp_path / "reports" / "seeded" / "report.md").read_text()
    assert "Retrained with new seeds (mean over seeds, 95 % interval" in report
    config = json.loads(
        next((tmp_path / "reports" / "seeded").glob("recommended_*.json")).read_text()
    )
    assert config["torch_threads"] >= 1  # the threads the trials measured with
