"""The load beside the answer (issue 48): beside a CPU hog the first screen called its pick
"the fastest beyond noise" and said nothing of the load its figures were measured under. The
machine load record's words now open the answer's figures, in report.md's section 1 and on the
console, when other work kept at least half a core busy; a quiet machine's load is said in
section 4 and Details only."""

from __future__ import annotations

import pandas as pd
import pytest
from built_experiment import built_experiment

from tuner.answer import decide
from tuner.experiment import Experiment
from tuner.record import MACHINE_LOAD_CORES
from tuner.report._answer import load_said
from tuner.report._build_claims import claims_for
from tuner.report.console import summary_lines

ROWS = [("a", "ok", 130.0, 0.51, 2000), ("b", "ok", 100.0, 0.50, 2000)]
RUNS = {"a": [131.0, 129.0, 130.0, 132.0, 128.0, 130.0], "b": [100.0] * 6}


def _experiment(load_cores: list[float], remeasure_load: float | None) -> Experiment:
    experiment = built_experiment(ROWS, RUNS)
    experiment.trials[MACHINE_LOAD_CORES] = pd.Series(load_cores, index=experiment.trials.index)
    experiment.metadata["cluster"] = {"total_cpus": 2}
    experiment.metadata["remeasure"] = {"load_cores": remeasure_load}
    return experiment


@pytest.mark.parametrize(
    ("cores", "again", "said"),
    [
        ([1.8, 1.6], 1.4, "other processes kept 1.7 of the 2 cores busy during the trials"),
        ([0.1, 0.2], 0.9, "and 0.9 during the re-measurement: a busy machine"),
        ([0.1, 0.2], 0.1, ""),  # quiet: said in section 4 and Details, not on the first screen
    ],
)
def test_the_first_screen_says_a_busy_machine_s_load(
    cores: list[float], again: float, said: str
) -> None:
    experiment = _experiment(cores, again)
    answer = decide(experiment)
    text = load_said(claims_for(experiment, answer))
    assert said in text if said else text == ""
    console = "\n".join(summary_lines(experiment, answer, state="finished", resumed=None))
    if not said:
        assert "Machine load" not in console
        return
    assert f"Machine load: {text.removeprefix('**Machine load**: ')}" in console
    assert console.index("Machine load") < console.index("Pareto front")  # before the figures
