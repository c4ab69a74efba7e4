"""The probe seconds are one quantity (issue 48): a trial's ``speed_probe_time_s``, its console
end line, the ``Speed-probe budget`` total, the metadata's pool and the report's probe budget
all state the probe runs' wall time as the trials' phase logs have each run. ``report --check``
finds a figure that is not it. The records here are written as a search writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.experiment import PHASES_FILE
from tuner.record import SPEED_PROBE_BUDGET_S, SPEED_PROBE_TIME_S, TRIAL_DIR, TRIAL_ID
from tuner.report._audit_probes import check_console_probes, check_probe_seconds
from tuner.report._trial_words import probe_budget_text, words_as_recorded

RUNS = [3.214, 2.905, 3.377]  # one trial's probe runs, each its start to its end


def _experiment(
    tmp_path: Path, row_s: float, *, runs_counted: bool = True, budget_s: float | None = 12.0
) -> pd.DataFrame:
    """One trial that probed RUNS and one whose verdict came from the cache (``budget_s``: the
    probe seconds each session was allowed; None: --probe-share off, nothing charged)."""
    lines: list[dict[str, Any]] = [{"t": 100.0, "part": "setup", "seconds": 0.0}]
    lines += [{"t": 101.0 + i, "part": "probe", "wall_s": s} for i, s in enumerate(RUNS)]
    speed = {"t": 110.0, "part": "speed", "probe_s": round(row_s, 3), "wait_s": 0.0}
    speed["budget_s"] = budget_s
    lines.append({**speed, "runs": len(RUNS)} if runs_counted else speed)
    cached = [{"t": 120.0, "part": "speed", "probe_s": 0.0, "wait_s": 0.0, "runs": 0}]
    cached[0]["budget_s"] = budget_s and 4.0
    for folder, log in (("t_a", lines), ("t_b", cached)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / PHASES_FILE).write_text("".join(json.dumps(x) + "\n" for x in log))
    return pd.DataFrame(
        {
            TRIAL_ID: ["a", "b"],
            TRIAL_DIR: ["t_a", "t_b"],
            SPEED_PROBE_TIME_S: [row_s, 0.0],
            SPEED_PROBE_BUDGET_S: [12.0, 4.0],
        }
    )


def _pool(spent_s: float) -> dict[str, Any]:
    return {"probe_cache": {"probe_budget": {"spent_s": spent_s, "earned_s": 40.0}}}


def test_each_probe_figure_is_the_runs_wall_time_and_a_cache_round_trip_is_found(
    tmp_path: Path,
) -> None:
    trials = _experiment(tmp_path, sum(RUNS))
    assert check_probe_seconds(tmp_path, trials, _pool(sum(RUNS)), "trials.csv") == []
    # The figure before: the session's span, the cache's round trips in it (34.1 s against
    # the pool's 32.5 s beside a CPU hog).
    (tmp_path / "x").mkdir()
    padded = _experiment(tmp_path / "x", 11.1)
    found = check_probe_seconds(tmp_path / "x", padded, _pool(sum(RUNS)), "trials.csv")
    # the trial's figure, and the pool its speed line claims it charged
    assert [f.claim for f in found] == ["trial a's probe seconds", "the pool spent 9.496 s"]
    assert "3 probe runs 9.496 s" in found[0].why
    over = check_probe_seconds(tmp_path, trials, _pool(sum(RUNS) + 1.6), "trials.csv")
    assert len(over) == 1 and over[0].where == "metadata"


def test_a_log_from_before_the_runs_were_counted_is_not_judged(tmp_path: Path) -> None:
    trials = _experiment(tmp_path, 11.1, runs_counted=False)
    assert check_probe_seconds(tmp_path, trials, {}, "trials.csv") == []


def test_the_console_states_each_trial_s_figure_and_the_pool_s_total(tmp_path: Path) -> None:
    trials = _experiment(tmp_path, sum(RUNS))
    end = "[  1/8    76s, eta 8m49s] starved       a  n/a img/s  acc 0.103  peak 60 MiB  probes {}"
    total = "Speed-probe budget: {} s spent of the 40.0 s the trials earned (--probe-share ...)."
    console = "\n".join([end.format("9.5 s of 12.0 s"), total.format("9.5")])
    assert check_console_probes(console, trials, _pool(sum(RUNS))) == []
    wrong = "\n".join([end.format("11.1 s of 12.0 s  (why)"), total.format("11.1")])
    found = check_console_probes(wrong, trials, _pool(sum(RUNS)))
    assert [f.why for f in found] == [
        f"trials.csv's {SPEED_PROBE_TIME_S} is 9.5",
        "the metadata's pool spent 9.5 s (its probe runs, summed)",
    ]


def test_the_report_states_the_runs_and_the_waits_apart() -> None:
    words = {"share": 0.2, "runs_s": 32.5, "wait_s": 2.3, "trials_s": 650.0, "unprobed": 3}
    text = probe_budget_text(words)
    assert "their runs took 5% (32s of 10m50s)" in text
    assert "trials waited 2s more for another trial's probes" in text
    # A record written before the two were apart holds their sum, and is checked as such.
    older = {"share": 0.2, "probe_s": 34.8, "trials_s": 650.0, "unprobed": 3}
    assert words_as_recorded("probe_budget", words, older) == {**older, "probe_s": 32.5 + 2.3}
    assert "waiting for another trial's probes included" in probe_budget_text(older)


def test_the_pool_is_what_bounded_sessions_charged_and_nothing_else(tmp_path: Path) -> None:
    """--probe-share off charges no pool (its runs still count for the trial), and a trial cut
    during its probes settled nothing: neither is a pool that does not add up."""
    off = _experiment(tmp_path, sum(RUNS), budget_s=None)
    assert check_probe_seconds(tmp_path, off, _pool(0.0), "trials.csv") == []
    (tmp_path / "t_cut").mkdir()  # two probe runs, then the search's end: no speed line
    runs = [{"t": 130.0 + i, "part": "probe", "wall_s": 2.0} for i in range(2)]
    (tmp_path / "t_cut" / PHASES_FILE).write_text("".join(json.dumps(x) + "\n" for x in runs))
    cut = pd.concat([off, pd.DataFrame({TRIAL_ID: ["c"], TRIAL_DIR: ["t_cut"]})])
    assert check_probe_seconds(tmp_path, cut, _pool(0.0), "trials.csv") == []
    [found] = check_probe_seconds(tmp_path, cut, _pool(4.0), "trials.csv")
    assert found.where == "metadata" and "0.000 s (0 speed lines" in found.why
