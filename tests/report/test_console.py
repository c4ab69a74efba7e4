"""The summary's line when no trial can be recommended: only the advice that fits the trials."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tuner.experiment import Experiment
from tuner.record import KIND
from tuner.report.console import _no_front_line


def _experiment(*kinds: str) -> Experiment:
    trials = pd.DataFrame({KIND: list(kinds)})
    return Experiment("e", Path("/x/e"), {}, trials, configs={}, param_names=[])


@pytest.mark.parametrize(
    ("kinds", "state", "line"),
    [
        (("errored", "errored"), "finished",
         "No trial finished ok: see why each trial failed (python -m tuner report /x/e)."),
        (("over budget", "errored"), "finished",
         "No trial finished ok: loosen --max-memory; see why each trial failed "
         "(python -m tuner report /x/e)."),
        (("diverged", "incomplete"), "finished",  # the search's time budget cut one
         "No trial finished ok: see why each trial failed (python -m tuner report /x/e); "
         "give the search more time (--search-time-budget-s)."),
        (("incomplete",), "interrupted",
         "No trial finished ok before the interruption: --resume continues the search."),
        ((), "interrupted",
         "No trial finished ok before the interruption: --resume continues the search."),
    ],
)  # fmt: skip
def test_no_front_says_only_what_fits_the_trials(kinds: tuple, state: str, line: str) -> None:
    assert _no_front_line(_experiment(*kinds), state) == line
