"""The report's "Scaling" section (tuner.report._scaling) from an experiment built in memory, no
Ray: trials at world sizes 1, 2 and 4, the numbers checked against the inputs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from tuner.experiment import Experiment, typed_trials
from tuner.report._scaling import scaling_section
from tuner.report.document import Table
from tuner.spaces import WORLD_SIZE_PARAM
from tuner.stats import median_interval

BATCH = 32  # per worker
# Five trials per world size, the i-th of each running the same settings (its own lr).
IPS = {1: [100.0, 104.0, 96.0, 102.0, 98.0], 2: [190.0, 196.0, 186.0, 194.0, 200.0],
       4: [350.0, 370.0, 340.0, 366.0, 360.0]}  # fmt: skip
ACCURACY = {1: [0.70, 0.72, 0.69, 0.71, 0.73], 2: [0.68, 0.70, 0.69, 0.66, 0.71],
            4: [0.60, 0.64, 0.62, 0.61, 0.65]}  # fmt: skip


def _experiment(ips: dict[int, list[float]], *, recorded_batch: bool = True) -> Experiment:
    rows, configs = [], {}
    for size, values in ips.items():
        for i, value in enumerate(values):
            tid = f"w{size}_{i}"
            global_batch = size * BATCH if recorded_batch and size < 4 else math.nan
            rows.append((tid, "ok", value, ACCURACY[size][i], size, global_batch))
            configs[tid] = {"batch_size": BATCH, "lr": 1e-3 * (i + 1), WORLD_SIZE_PARAM: size}
    # Fastest of all but stopped early: never pooled.
    rows.append(("w8_0", "stopped early", 9000.0, 0.9, 8, 8 * BATCH))
    configs["w8_0"] = {"batch_size": BATCH, "lr": 1e-3, WORLD_SIZE_PARAM: 8}
    columns = ["trial_id", "kind", "images_per_second", "val_accuracy", "world_size",
               "global_batch_size"]  # fmt: skip
    trials = typed_trials(pd.DataFrame(rows, columns=columns))
    names = ["batch_size", "lr", WORLD_SIZE_PARAM]
    return Experiment("e", Path("."), {}, trials, configs, names)


def _tables(experiment: Experiment, recommended: str | None = "w1_0") -> list[pd.DataFrame]:
    rows = experiment.trials.set_index("trial_id", drop=False)
    row = None if recommended is None else rows.loc[recommended].to_dict()
    section = scaling_section(experiment, recommended=row)
    assert section is not None and section.title == "Scaling"
    return [block.frame if isinstance(block, Table) else block for block in section.blocks[1:]]


def test_images_per_second_and_efficiency_by_world_size() -> None:
    speed = _tables(_experiment(IPS))[0]
    assert speed["world size"].tolist() == [1, 2, 4]  # the stopped-early 8-worker trial: left out
    assert speed["trials"].tolist() == [5, 5, 5]
    one = median_interval(IPS[1])
    for size, text, per_worker, efficiency in speed[
        ["world size", "images/s", "per worker", "scaling efficiency"]
    ].itertuples(index=False):
        mine = median_interval(IPS[size])
        assert text == mine.format(",.0f")
        assert per_worker == f"{mine.median / size:,.0f}"
        # Global images/s over N x one worker's; the interval pairs opposite ends.
        value = mine.median / (size * one.median)
        low, high = mine.low / (size * one.high), mine.high / (size * one.low)
        assert efficiency == f"{value:.2f} [{low:.2f}–{high:.2f}]"
    assert speed["scaling efficiency"].iloc[0].startswith("1.00")


def test_the_recommended_config_gains_per_added_worker() -> None:
    gain = _tables(_experiment(IPS))[1]
    assert gain["world size"].tolist() == [1, 2, 4]
    assert gain["trial"].tolist() == ["w1_0", "w2_0", "w4_0"]  # its settings at each size
    first = IPS[1][0]
    expected = [""] + [f"{(IPS[n][0] - first) / (n - 1):+,.0f}" for n in (2, 4)]
    assert gain["gain per added worker (images/s)"].tolist() == expected


def test_a_recommended_config_at_one_world_size_says_how_to_see_its_gain() -> None:
    experiment = _experiment(IPS)
    experiment.configs["w1_4"]["lr"] = 0.5  # settings no other world size ran
    text = _tables(experiment, recommended="w1_4")[1]
    assert isinstance(text, str) and "ran at one world size only" in text


def test_accuracy_by_global_batch_falls_back_to_workers_times_batch() -> None:
    accuracy = _tables(_experiment(IPS), recommended=None)[-1]
    # World size 4 recorded no global batch: workers x the per-worker batch_size stands in.
    expected = [[n * BATCH, n] for n in (1, 2, 4)]
    assert accuracy[["global batch", "world size"]].values.tolist() == expected
    assert accuracy["val accuracy"].tolist() == [
        median_interval(ACCURACY[n]).format(".3f") for n in (1, 2, 4)
    ]
    assert accuracy["best"].tolist() == [f"{max(ACCURACY[n]):.3f}" for n in (1, 2, 4)]


@pytest.mark.parametrize("sizes", [[1], [2]])
def test_no_section_when_the_usable_trials_share_one_world_size(sizes: list[int]) -> None:
    experiment = _experiment({n: IPS[n] for n in sizes})
    assert scaling_section(experiment, recommended=None) is None  # 8 stopped early: not usable
