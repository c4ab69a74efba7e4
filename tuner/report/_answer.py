"""Section 1 of the report, the answer: its first line is the pick and why; then each pick's
figures (a chance-level pick flagged), the re-measurements that failed, the gain over the plain
loop, whether the picks differ beyond noise, and the command to train the pick."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.answer import (
    TOO_NOISY,
    Answer,
    world_size_of,
)
from tuner.decision import ACCURACY_SEEDS
from tuner.experiment import Experiment
from tuner.record import (
    ERROR,
    TARGET_ACCURACY,
    TIME_TO_TARGET_EST_S,
    TIME_TO_TARGET_SOURCE,
    TRAIN_TIME_TO_TARGET_S,
    TRIAL_ID,
)
from tuner.report import _effects
from tuner.report._build_claims import (
    lead_lines,
    pick_groups,
    pick_rows,
    sentence_text,
    starved_said,
)
from tuner.report._configs import describe, export_config, num_classes, train_command
from tuner.report._seeds import seeds_text
from tuner.report._status import EFFECTS_STEP, Progress
from tuner.report._trial_words import busy_load
from tuner.report.claims import Claims
from tuner.report.document import Section, estimate_text, user
from tuner.time_to_target import seconds_text
from tuner.units import as_number, format_bytes, is_finite, plural

__all__ = ["answer_section", "load_said"]


def answer_section(
    experiment: Experiment,
    answer: Answer,
    effects: pd.DataFrame,
    progress: Progress,
    out: Path,
    claims: Claims,
) -> Section:
    if not answer.best:
        blocks = [_no_pick(experiment, claims), load_said(claims)]
        return Section("The answer", [b for b in blocks if b], anchor="answer")
    recommended = answer.recommended
    config = answer.configs[str(recommended[TRIAL_ID])]
    lead = lead_lines(answer, claims)  # the rule's pick, the rule, the accuracy beside it
    by_rule = answer.rule is not None  # else the rule said why it picked nothing
    blocks = [
        _bold_head(answer.noise_note()),  # before the pick: it could not be decided on speed
        _pick_line(recommended, config, answer, claims, lead[:1] if by_rule else ()),
        *(lead[1:] if by_rule else lead),
        load_said(claims),  # the figures below were measured beside that load
        _chance_warning(recommended, config),
    ]
    picks = pick_rows(answer)
    for metric, row in picks.items():
        workers = world_size_of(row)
        path = out / f"recommended_{metric}.json"
        export_config(answer.configs[str(row[TRIAL_ID])], path, world_size=workers)
    failed = {f[TRIAL_ID] for f in progress.failures}
    for trial, metrics in pick_groups(answer).items():
        blocks += _pick_text(picks[metrics[0]], answer, failed, claims.text("pick_title", trial))
    chosen = next(m for m, r in picks.items() if r[TRIAL_ID] == recommended[TRIAL_ID])
    blocks += [
        _failures_text(progress.failures, claims),
        claims.text("gain", str(recommended[TRIAL_ID])) or _gain_missing(effects, progress),
        seeds_text(experiment, answer),
        starved_said(experiment.trials, claims),
        sentence_text(answer, claims),
        _train_line(recommended, out / f"recommended_{chosen}.json"),
    ]
    return Section("The answer", [block for block in blocks if block], anchor="answer")


def _train_line(row: pd.Series, path: Path) -> str:
    """The command that trains the pick, on the workers it was measured on."""
    workers = world_size_of(row)
    where = f"; on {workers} data-parallel workers, as it was measured" if workers > 1 else ""
    return (
        f"Train with it (trial `{row[TRIAL_ID]}`): `{train_command(_shown_path(path), workers)}` "
        "(the full run config: the fixed workload plus the chosen settings, lr already computed"
        f"{where})."
    )


def _pick_line(
    row: pd.Series, config: Any, answer: Answer, claims: Claims, why_by_time: Sequence[str] = ()
) -> str:
    """The first line of the answer: the pick, and why it is the pick (what its intervals
    allow: a tie is named as one)."""
    trial = f"**Recommended: trial `{row[TRIAL_ID]}`**"
    if why_by_time:  # the rule's pick: the sentence after the rule says why
        return f"{trial}, by the rule: {describe(config)}{_on_workers(row)}. {why_by_time[0]}"
    why = claims.text("pick_why", str(row[TRIAL_ID]))
    if answer.picks is not None and str(row[TRIAL_ID]) != answer.picks.slower:
        why += _faster_in_search(row, answer)
    return f"{trial}, {why}: {describe(config)}{_on_workers(row)}."


def _bold_head(note: str) -> str:
    return note.replace(TOO_NOISY, f"**{TOO_NOISY}**", 1)


def _faster_in_search(row: pd.Series, answer: Answer) -> str:
    """Said beside "the fastest": the candidates the search measured faster than the pick (its
    trials ran beside each other and whatever else loaded the machine; only the side-by-side
    re-measurement is compared, and they were not in it)."""
    if not answer.remeasured or "search_images_per_second" not in answer.trials:
        return ""
    trials = answer.trials[answer.trials["candidate"]]
    speed = pd.to_numeric(trials["search_images_per_second"], errors="coerce")
    own = as_number(row.get("search_images_per_second"))
    faster = trials[(speed > own) & (trials["throughput_source"] != "re-measured")]
    if faster.empty or math.isnan(own):
        return ""
    named = ", ".join(
        f"`{r[TRIAL_ID]}` {as_number(r['search_images_per_second']):,.0f}"
        for _, r in faster.iterrows()
    )
    return (
        f" (among those re-measured: the search measured {named} images/s against its "
        f"{own:,.0f}, with trials beside each other and any other load on the machine, and "
        "did not re-measure them)"
    )


def _chance_warning(row: pd.Series, config: Any) -> str:
    """A flag when the pick's accuracy is no better than guessing among the classes."""
    classes = num_classes(config)
    accuracy = as_number(row.get("val_accuracy"))
    if not classes or math.isnan(accuracy):
        return ""
    chance = 1 / classes
    low = as_number(row.get("val_accuracy_low"))
    at_chance = low <= chance if not math.isnan(low) else accuracy <= 1.1 * chance
    if not at_chance:
        return ""
    return (
        f"**Warning: accuracy at chance level.** The pick's validation accuracy "
        f"{accuracy:.3f} is no better than guessing among {plural(classes, 'class', 'classes')} "
        f"(1/{classes} = {chance:.3f}): it learned nothing measurable in its budget, so its "
        "speed is all it shows. Train longer (--set steps=...) or check the lr before using it."
    )


def _failures_text(failures: list[dict[str, Any]], claims: Claims) -> str:
    """The re-measurements that failed: counted (their record's words), each error named."""
    failed = [c for c in claims.all.values() if c.kind == "remeasure_failed"]
    if not failures or not failed:
        return ""
    named = "\n".join(
        f"- trial `{f[TRIAL_ID]}`, {plural(int(f['runs']), 'run')}: {user(f[ERROR])}"
        for f in failures
    )
    return f"{claims.text(failed[0].kind, *failed[0].subjects)}\n\n{named}"


def _pick_text(row: pd.Series, answer: Answer, failed: set[str], title: str) -> list[str]:
    """A pick's heading (its claim's words: what it is best at, as its intervals allow) and its
    figures."""
    source = (
        "re-measured, median over interleaved repeats"
        if row.get("throughput_source") == "re-measured"
        else "as measured in the search"
        + (": its re-measurement failed, see below" if str(row[TRIAL_ID]) in failed else "")
    )
    acc = estimate_text(row, "val_accuracy", ".3f")
    images = int(row["val_images"]) if is_finite(row.get("val_images")) else 0
    facts = [
        f"- throughput {estimate_text(row, 'images_per_second', ',.0f')} images/s ({source})",
        f"- validation accuracy {acc} ({_accuracy_basis(row, images)})",
        f"- peak memory {format_bytes(row.get('peak_memory_bytes'))} "
        f"({row.get('memory_kind') or 'kind unknown'})",
        _time_fact(row),
    ]
    config = describe(answer.configs[str(row[TRIAL_ID])]) + _on_workers(row)
    return [f"**{title}**: {config}.", "\n".join(facts)]


def _accuracy_basis(row: pd.Series, images: int) -> str:
    """What the accuracy's interval covers: the validation sample, and the seeds' spread where
    the pick was retrained (:func:`tuner.decision.decision_values`' mean over seeds)."""
    seeds = as_number(row.get(ACCURACY_SEEDS))
    if is_finite(seeds) and seeds >= 2:
        return (
            f"mean of {int(seeds)} runs with different seeds; 95% interval over the seeds and "
            f"{images:,} images"
        )
    return f"95% interval over {images:,} images"


def _time_fact(row: pd.Series) -> str:
    """The pick's two times to target: the estimate the rule uses and the stopwatch's."""
    target = as_number(row.get(TARGET_ACCURACY))
    if math.isnan(target):
        return "- time to target: no target"
    if not is_finite(row.get(TIME_TO_TARGET_EST_S)):
        return f"- time to target {target:.3f}: never reached in its budget"
    stopwatch = as_number(row.get(TRAIN_TIME_TO_TARGET_S))
    return (
        f"- time to target {target:.3f}: {seconds_text(row)} estimated (images to target / "
        f"images/s, {row.get(TIME_TO_TARGET_SOURCE)}); the stopwatch in the search: "
        f"{stopwatch:.3g} s (machine load and trials beside it included)"
    )


def _on_workers(row: pd.Series) -> str:
    """``, on 2 data-parallel workers (batch size per worker)`` for a data-parallel pick."""
    workers = world_size_of(row)
    if workers < 2:
        return ""
    return f", on {workers} data-parallel workers (the batch size is per worker)"


def _gain_missing(effects: pd.DataFrame, progress: Progress) -> str:
    """Why there is no gain over the plain loop to state."""
    if _effects.plain_loop_gain(effects) is not None:
        return ""
    why = progress.not_run.get(EFFECTS_STEP)
    if why:
        return f"The gain over the plain loop was not measured: the technique effects {why}."
    return "The recommended config already is the plain loop (no speed technique on)."


def _no_pick(experiment: Experiment, claims: Claims) -> str:
    """Why nothing can be recommended (the trials counted by kind), and the trials cut short."""
    starved = starved_said(experiment.trials, claims)
    return " ".join(filter(None, [claims.text("no_pick"), starved]))


def load_said(claims: Claims) -> str:
    """The machine load record's words, on the first screen when other work kept the machine
    busy during the trials or the re-measurement (issue 48: a pick beside a CPU hog said
    nothing of it); "" on a quiet machine (section 4 and Details state it anyway)."""
    claim = claims.all.get(("machine_load", ()))
    return claims.text("machine_load") if claim and busy_load(claim.words) else ""


def _shown_path(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it."""
    full = path.resolve()
    return full.relative_to(Path.cwd()) if full.is_relative_to(Path.cwd()) else path
