"""What a search prints at its start (what it runs, where) and its end: the summary
(:func:`tuner.report.console.summary_lines`) and where things are.
"""

from __future__ import annotations

from typing import Any

from tuner.answer import Answer
from tuner.experiment import Experiment
from tuner.report.console import summary_lines
from tuner.tune.context import ExperimentPaths, SearchContext
from tuner.tune.plan import SpaceProfile

__all__ = ["print_start", "print_summary"]


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
