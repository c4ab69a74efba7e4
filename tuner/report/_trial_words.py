"""The words of the report's claims on the trials' rows and the clock (a measuring phase's time
is tuner.measure.measured_text's), each from a record's subjects and ``words`` alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.measure.load import LOADED_CORES
from tuner.report.document import user
from tuner.units import duration_text, format_bytes, plural

__all__ = [
    "PHASE_KEYS",
    "busy_load",
    "front_text",
    "load_text",
    "no_pick_text",
    "not_tried_text",
    "probe_budget_text",
    "wall_time_problem",
    "wall_time_text",
    "words_as_recorded",
]

# What a measuring phase's record in the metadata holds that its words read (measured_text):
# its rounds, method and what ended it, its measuring seconds and limit, its clock's two ends.
PHASE_KEYS = (
    "repeats_done", "method", "stopped", "resolution", "time_limit_s", "seconds",
    "started_unix_s", "ended_unix_s",
)  # fmt: skip
# A trial's wall time is kept beside its start and end in whole seconds: it may differ from
# what they give by this much.
ROW_SLACK_S = 1.5


def wall_time_text(words: Mapping[str, Any]) -> str:
    """The trials' summed wall time."""
    return f"summed trial wall time: {duration_text(float(words['seconds']))}"


def wall_time_problem(words: Mapping[str, Any]) -> str:
    """Why a trial's time is not its clock's (its end minus its start, less the time the
    driver was down in between: tuner.experiment.limits.down_time_s); "" when each is."""
    for trial, (seconds, clock_s) in words["trials"].items():
        if seconds is None or clock_s is None:
            return f"trial {trial} ran, and the trials table has no start, end or time"
        if abs(seconds - clock_s) > ROW_SLACK_S:
            return (
                f"trial {trial}'s trial_time_s is {seconds:.1f}s, its clock's {clock_s:.1f}s "
                "(its end less its start, less the driver's down time)"
            )
    return ""


def probe_budget_text(words: Mapping[str, Any]) -> str:
    """What the speed probes cost the trials, and the budget they had: their runs' seconds (the
    one probe figure: each run's start to its end) and the trials' waits, apart."""
    if "runs_s" not in words:  # a record written before the two were told apart
        return _probe_budget_text_before(words)
    limit, measured = _budget_and_share(words, float(words["runs_s"]))
    wait = float(words["wait_s"])
    waited = (
        f"; trials waited {duration_text(wait)} more for another trial's probes" if wait else ""
    )
    short = int(words["unprobed"])
    left = f"; {plural(short, 'trial')} ran with knobs left unprobed" if short else ""
    return (
        f"**Probe budget**: the speed probes {limit} (--probe-share); here their runs took "
        f"{measured} of the trials' wall time, each run from its start to its end (the trials' "
        f"probe seconds, speed_probe_time_s, summed){waited}{left}. A knob left unprobed keeps "
        "its default: not probed is not tried and lost."
    )


def words_as_recorded(
    kind: str, built: Mapping[str, Any], recorded: Mapping[str, Any]
) -> dict[str, Any]:
    """The words the data gives, in the form of the record checked: a ``probe_budget`` record
    written before the runs and the waits were told apart holds their sum (``probe_s``); an
    ``effects_say_nothing`` record written before the phase_time record owned its duration
    holds it (``measured``: the phase_time record checks that duration against the clock)."""
    if kind == "effects_say_nothing" and "measured" in recorded and "measured" not in built:
        return {**built, "measured": recorded["measured"]}
    if kind != "probe_budget" or "runs_s" in recorded or "runs_s" not in built:
        return dict(built)
    older = {k: v for k, v in built.items() if k not in ("runs_s", "wait_s")}
    return {**older, "probe_s": float(built["runs_s"]) + float(built["wait_s"])}


def _probe_budget_text_before(words: Mapping[str, Any]) -> str:
    """The words of a record with the probes' and the waits' seconds together (``probe_s``)."""
    limit, measured = _budget_and_share(words, float(words["probe_s"]))
    short = int(words["unprobed"])
    left = f"; {plural(short, 'trial')} ran with knobs left unprobed" if short else ""
    return (
        f"**Probe budget**: the speed probes {limit} "
        f"(--probe-share); here their share was {measured} of the trials' wall time, waiting "
        f"for another trial's probes included{left}. A knob left unprobed keeps its default: not "
        "probed is not tried and lost."
    )


def _budget_and_share(words: Mapping[str, Any], spent: float) -> tuple[str, str]:
    """The probes' bound (``share``), and ``spent`` as a share of the trials' time."""
    share, whole = words["share"], float(words["trials_s"])
    limit = (
        f"may take at most {share:.0%} of the trials' time"
        if isinstance(share, int | float)
        else "had no bound"
    )
    if not whole:
        return limit, "not timed"
    return limit, f"{spent / whole:.0%} ({duration_text(spent)} of {duration_text(whole)})"


def load_text(words: Mapping[str, Any]) -> str:
    """The machine's load from other work as measured (tuner.measure.load): during the trials
    (``cores``: the trials' median, lowest, highest, and how many; None: not measured) and
    during the re-measurement (``remeasure``)."""
    cores, total, again = words["cores"], words["total_cpus"], words["remeasure"]
    of = f" of the {total:g}" if isinstance(total, int | float) else ""  # Ray's count: the search's
    if not cores:
        trials = "was not measured during the trials (recorded since issue 48)"
    else:
        median, low, high, n = cores
        spread = f", {low:.1f}-{high:.1f}" if n > 1 else ""
        trials = (
            f"kept {median:.1f}{of} cores busy during the trials (median over "
            f"{plural(int(n), 'trial')}{spread})"
        )
    remeasure = (
        f" and {again:.1f} during the re-measurement"
        if isinstance(again, int | float)
        else ", not measured during a re-measurement"
    )
    caveat = ": a busy machine, whose speeds (the probes' and the trials') are lower and noisier"
    caveat = f"{caveat} than a quiet one's" if busy_load(words) else ""
    return f"**Machine load**: other processes {trials}{remeasure}{caveat}."


def busy_load(words: Mapping[str, Any]) -> bool:
    """Whether other work kept at least :data:`LOADED_CORES` busy during the trials (their
    median) or the re-measurement: a load every speed stated beside it felt."""
    cores, again = words["cores"], words["remeasure"]
    busy = max(cores[0] if cores else 0, again if isinstance(again, int | float) else 0)
    return busy >= LOADED_CORES


def front_text(front: tuple[str, ...], words: Mapping[str, Any]) -> str:
    """How many trials the front holds (``front``: their ids), and on which measurements."""
    source = (
        "re-measured medians (only re-measured candidates can be picked)"
        if words["remeasured"]
        else "the search's own measurements"
    )
    return (
        f"{plural(len(front), 'trial is', 'trials are')} Pareto-optimal for throughput vs "
        f"accuracy, judged on {source}"
    )


def no_pick_text(words: Mapping[str, Any]) -> str:
    """Why no configuration can be recommended, from the trials counted by kind (``counts``:
    the counts record's) and the memory limit."""
    counts, total = words["counts"], int(words["total"])
    limit = format_bytes(words["limit_bytes"])
    why = {  # by the kind of the trials
        "over budget": f"measured more than the budget of {limit}: raise --max-memory or search "
        "smaller batch sizes.",
        "errored": "failed with an error: the Trials section has each.",
        "incomplete": "did not end before the search did (incomplete): give the search more "
        "time (--search-time-budget-s) or resume it.",
    }
    # "within the memory budget" only where memory ended some: beside a CPU hog, 8 starved
    # trials and none over it read as a memory problem (a record before it always said it).
    budget = " within the memory budget" if words.get("memory_said", True) else ""
    lines = [
        f"**No configuration can be recommended**: none of the {plural(total, 'trial')} "
        f"finished ok{budget}.",
        *(f"{plural(int(counts[k]), 'trial')} {said}" for k, said in why.items() if counts.get(k)),
    ]
    return " ".join(lines)


def not_tried_text(what: str, words: Mapping[str, Any]) -> str:
    """Searched values no trial ran ok with (``what``: "not tried", or tried and not ok, each
    value with the kinds its trials were)."""
    return f"{what.capitalize()}, so not compared: {', '.join(map(user, words['values']))}."
