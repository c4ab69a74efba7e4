"""A search on the console, in words: its start line (what it searches, how, on what, and where
its folder is) and its end: trials counted by ``kind`` (:data:`tuner.record.KINDS`), what did
not run, the answer (the report's: the same ``Experiment`` and ``Answer``), and where its files
are. The search's flow (:mod:`tuner.tune.run`) prints them; the words live here, with every
other rendering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from tuner.answer import Answer
from tuner.experiment import PARAM_PREFIX, Experiment, speed_settings_of
from tuner.record import KIND, SPEED_SETTINGS, TRIAL_ID
from tuner.report._answer import load_said
from tuner.report._build_claims import (
    claims_for,
    counts_said,
    lead_lines,
    sentence_text,
    starved_said,
)
from tuner.report._status import unfinished_work
from tuner.report.claims import Claims
from tuner.techniques import settings_text
from tuner.units import format_bytes, interval_text, is_finite

if TYPE_CHECKING:
    from tuner.experiment.paths import ExperimentPaths
    from tuner.tune.context import SearchContext
    from tuner.tune.plan import SpaceProfile

__all__ = ["print_start", "print_summary", "summary_lines"]

SHOWN = 5


def summary_lines(
    experiment: Experiment, answer: Answer, *, state: str, resumed: dict[str, Any] | None
) -> list[str]:
    """The summary of a search: its trials by kind, what did not run, its answer."""
    # the claims the report writes as records (claims.json): said here in their words
    claims = claims_for(experiment, answer)
    lines = ["", f"Search {state}: {counts_said(experiment.trials, claims)}"]
    if resumed:
        lines.append(_resume_line(resumed))
    lines += experiment.problem_lines()
    lines += unfinished_work(claims)  # their records' words, as the report's
    starved = starved_said(experiment.trials, claims)
    if starved:
        lines.append(starved)
    load = load_said(claims).replace("**", "")  # the busy machine the figures were measured on
    return lines + ([load] if load else []) + _front_lines(answer, experiment, state, claims)


def _front_lines(answer: Answer, experiment: Experiment, state: str, claims: Claims) -> list[str]:
    if answer.front.empty:
        return [_no_front_line(experiment, state)]
    note = answer.noise_note()  # before the pick: it could not be decided on speed
    source = "re-measured" if answer.remeasured else "as measured in the search"
    lines = [note] if note else []
    lines += lead_lines(answer, claims)  # the rule's pick, the rule, the most accurate beside it
    lines.append(f"Pareto front (throughput {source}, trials that ran ok to their end only):")
    lines += ["  " + _line(row) for _, row in answer.front.head(SHOWN).iterrows()]
    return [*lines, sentence_text(answer, claims)]


def _no_front_line(experiment: Experiment, state: str) -> str:
    """Why no trial can be recommended, from what the trials were: only the advice that fits
    (no budget to loosen when none was set or none was over it)."""
    kinds = set(experiment.trials[KIND]) if len(experiment.trials) else set()
    advice = []
    if "over budget" in kinds:
        advice.append("loosen --max-memory")
    if kinds & {"errored", "diverged"}:
        advice.append(f"see why each trial failed (python -m tuner report {experiment.path})")
    if "incomplete" in kinds and state == "finished":  # the search's time budget ended them
        advice.append("give the search more time (--search-time-budget-s)")
    if state != "finished":
        advice.append("--resume continues the search")
    ended = "No trial finished ok" + ("" if state == "finished" else " before the interruption")
    return ended + (f": {'; '.join(advice)}." if advice else ".")


def _line(row: pd.Series) -> str:
    ips = row["images_per_second"]
    low, high = row.get("images_per_second_low"), row.get("images_per_second_high")
    spread = f" {interval_text(low, high, '{:,.0f}'.format)}".rstrip()
    acc_low, acc_high = row.get("val_accuracy_low"), row.get("val_accuracy_high")
    acc = f"{row['val_accuracy']:.3f}"
    if is_finite(acc_low) and is_finite(acc_high):
        acc += " " + interval_text(acc_low, acc_high, "{:.3f}".format)
    params = " ".join(
        f"{c.removeprefix(PARAM_PREFIX)}={_short(row[c])}"
        for c in row.index
        if c.startswith(PARAM_PREFIX) and _present(row[c])
    )
    speed = settings_text(speed_settings_of(row.get(SPEED_SETTINGS)))
    return (
        f"{row[TRIAL_ID]}: {ips:,.0f}{spread} img/s, val acc {acc}, peak "
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


def print_start(search: SearchContext, profile: SpaceProfile | None) -> None:
    """The search's start line: what it searches, how, on what, and where its folder is."""
    options, plan = search.options, search.plan
    samples = "until the time budget" if plan.num_samples < 0 else f"{plan.num_samples} trials"
    gpu = f", {plan.gpus_per_trial:g} GPU" if plan.gpus_per_trial else ""
    shared = " (GPUs SHARED between trials: throughput is distorted)" if plan.gpus_shared else ""
    workers = f"{plan.world_size} workers x " if plan.max_world_size > 1 else ""
    print(
        f"{'Resuming' if options.resume else 'Searching'} {options.space} "
        f"[{plan.workload_kind} workload: {plan.workload.get('model')} on "
        f"{plan.workload.get('data')} @ {plan.workload.get('img_size')}px]: {samples}, "
        f"objective {options.objective}, sampler {options.sampler}, "
        f"{plan.concurrency} at a time, {workers}{plan.cpus_per_trial:g} CPU{gpu} per trial"
        f"{shared}\n"
        f"Experiment folder: {search.paths.local}",
        flush=True,
    )
    if options.speed_repeats:
        share = options.probe_share
        bound = "no bound" if share is None else f"at most {share:.0%} of the trials' time"
        print(
            f"Speed probes: {bound} "
            "(--probe-share); settled once per model, data, device and precision and shared, "
            "channels_last per norm layer; unprobed knobs keep their defaults.",
            flush=True,
        )
    if profile is not None and profile.pinned:
        fixed = ", ".join(f"{name}={plan.fixed[name]!r}" for name in profile.pinned)
        print(f"Fixed by --set (out of the space, every trial runs it): {fixed}", flush=True)


def print_summary(
    experiment: Experiment,
    answer: Answer,
    *,
    paths: ExperimentPaths,
    state: str,
    resumed: dict[str, Any] | None,
) -> None:
    """Print the summary of a search: its trials by kind, its answer, where its files are."""
    for line in summary_lines(experiment, answer, state=state, resumed=resumed):
        print(line)
    print(f"Experiment folder: {paths.local}")
    print(f"Optuna study:      {paths.study_url} (study name {paths.name!r})")
    if state != "finished":
        print(f"Continue it with:  {paths.resume_command()}")
