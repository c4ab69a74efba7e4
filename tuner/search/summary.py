"""The end-of-search printout: counts, the answer (the same as the report's), where things are.

It reads the experiment folder back with :mod:`tuner.results` and decides with
:func:`tuner.recommend.decide`, exactly as ``tuner report`` does, so the console and the report
can never show different fronts.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.recommend import Answer, decide
from tuner.results import load_experiment, speed_settings_of
from tuner.search.experiment import ExperimentPaths
from tuner.techniques import settings_text
from tuner.units import format_bytes, interval_text, is_finite

__all__ = ["print_summary", "status_line"]

SHOWN = 5


def print_summary(*, paths: ExperimentPaths, state: str, resumed: dict[str, Any] | None) -> Answer:
    """Print the summary of the experiment at ``paths`` and return its answer."""
    experiment = load_experiment(paths.local)
    answer = decide(experiment)
    print()
    print(f"Search {state}: {len(experiment.trials)} trials ({status_line(experiment.trials)})")
    if resumed:
        print(_resume_line(resumed))
    for line in experiment.problem_lines():
        print(line)
    _print_front(answer)
    print(f"Experiment folder: {paths.local}")
    print(f"Optuna study:      {paths.study_url} (study name {paths.name!r})")
    if state != "finished":
        print(f"Continue it with:  {paths.resume_command()}")
    return answer


def status_line(trials: pd.DataFrame) -> str:
    """``5 feasible, 2 over budget, 1 error``: each trial counted once, as what it is."""
    kinds = trials.apply(_kind, axis=1).value_counts() if len(trials) else pd.Series(dtype=int)
    return ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "none"


def _kind(row: pd.Series) -> str:
    status = str(row.get("status") or "")
    if status == "ok" and row.get("feasible"):
        return "feasible"
    if status == "ok" and not bool(row.get("final", True)):
        return "stopped early"
    if status == "ok":
        return "over budget"
    return {"incomplete": "not finished", "pending": "not started"}.get(status, status)


def _print_front(answer: Answer) -> None:
    if answer.front.empty:
        print("No feasible trial finished: loosen --max-memory or check the errors above.")
        return
    source = "re-measured" if answer.remeasured else "as measured in the search"
    print(f"Pareto front (throughput {source}, feasible trials only):")
    for _, row in answer.front.head(SHOWN).iterrows():
        print("  " + _line(row))
    print(answer.sentence())


def _line(row: pd.Series) -> str:
    ips = row["images_per_second"]
    low, high = row.get("images_per_second_low"), row.get("images_per_second_high")
    spread = f" {interval_text(low, high, '{:,.0f}'.format)}".rstrip()
    acc_low, acc_high = row.get("val_accuracy_low"), row.get("val_accuracy_high")
    acc = f"{row['val_accuracy']:.3f}"
    if is_finite(acc_low) and is_finite(acc_high):
        acc += " " + interval_text(acc_low, acc_high, "{:.3f}".format)
    params = " ".join(
        f"{c.removeprefix('param_')}={_short(row[c])}"
        for c in row.index
        if c.startswith("param_") and _present(row[c])
    )
    speed = settings_text(speed_settings_of(row.get("speed_settings")))
    return (
        f"{row['trial_id']}: {ips:,.0f}{spread} img/s, val acc {acc}, peak "
        f"{format_bytes(row.get('peak_memory_bytes'))} | {params} | speed: {speed}"
    )


def _resume_line(resumed: dict[str, Any]) -> str:
    line = (
        f"Resumed: {resumed['before']} trial(s) had finished before, "
        f"{resumed['after']} finished in this run"
    )
    if resumed.get("orphans"):
        line += (
            f"; Optuna trial(s) {', '.join(map(str, resumed['orphans']))} were running when "
            "the driver stopped and are closed as FAIL (their configs ran again as new trials)"
        )
    return line + "."


def _short(value: Any) -> str:
    return (
        f"{value:.2e}" if isinstance(value, float) and not float(value).is_integer() else str(value)
    )


def _present(value: Any) -> bool:
    if isinstance(value, list | dict):
        return True
    return not pd.isna(value)  # None, NaN and pandas' NA (a GroupNorm count under BatchNorm)
