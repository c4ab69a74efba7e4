"""A search whose every trial errors (every image of its data is truncated): each trial is an
error everywhere, naming the file (console, trials.csv, the study: FAIL), and the search exits 1.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from PIL import Image
from search_cli import search_command

pytestmark = pytest.mark.slow

SPACE = Path(__file__).parent / "spaces" / "resume_space.py"
TIMEOUT_S = 300


def _truncated_image_folder(root: Path, per_class: int) -> Path:
    """PATH/{train,val}/<class>/*.png, every PNG cut off after its header."""
    rng = np.random.default_rng(0)
    for split, count in (("train", per_class), ("val", 2)):
        for label in ("a", "b"):
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(count):
                image = folder / f"{i}.png"
                Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(image)
                image.write_bytes(image.read_bytes()[:60])
    return root


def test_a_search_whose_every_trial_errors_exits_1_and_calls_them_errors(tmp_path: Path) -> None:
    data = _truncated_image_folder(tmp_path / "data", per_class=9)  # 18 >= the batch size 16
    done = subprocess.run(
        search_command(
            str(SPACE),
            "--reports-dir",
            str(tmp_path / "reports"),
            "--num-samples",
            "2",
            "--data",
            f"imagefolder:{data}",
            "--remeasure-top",
            "0",
            "--effects-repeats",
            "0",
            "--max-failures",  # each trial's error is the data's: Ray's retries would raise it
            "0",  # again at once, each in a fresh worker process (minutes on a busy machine)
            name="broken",
            storage=tmp_path / "experiments",
        ),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Search finished: 2 trials (2 errored)" in done.stdout
    assert "infeasible" not in done.stdout
    assert "No trial finished ok: see why each trial failed" in done.stdout
    assert "--max-memory" not in done.stdout  # no budget was set: none to loosen

    trials = pd.read_csv(tmp_path / "reports" / "broken" / "trials.csv")
    assert list(trials["status"]) == ["error", "error"]
    assert all(error.startswith(f"cannot read image {data}/") for error in trials["error"])

    study = optuna.load_study(
        study_name="broken", storage=f"sqlite:///{tmp_path / 'experiments' / 'broken' / 'study.db'}"
    )
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL] * 2
    assert all(t.user_attrs["status"] == "error" for t in study.trials)
