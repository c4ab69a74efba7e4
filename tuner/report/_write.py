"""Assemble the report: the answer first, then the evidence, then the details (folded)."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.answer import Answer, decide
from tuner.experiment import (
    CLAIMS_FILE,
    EFFECTS_FILE,
    METADATA_FILE,
    PARAM_PREFIX,
    REPORT_FILE,
    REPORT_HTML_FILE,
    Experiment,
    column_meanings,
    load_experiment,
    memory_limit,
    speed_settings_of,
    write_trials_csv,
)
from tuner.record import (
    ERROR,
    INFEASIBLE_REASON,
    KIND,
    LAST_ERROR,
    RETRIES,
    SPEED_SETTINGS,
    STATUS,
    TRIAL_ID,
    TRIAL_TIME_S,
)
from tuner.report import _effects, _plots
from tuner.report._answer import answer_section
from tuner.report._batch import batch_section
from tuner.report._build_claims import claims_for, counts_said, sentence_text
from tuner.report._importance import param_importances
from tuner.report._input import input_section
from tuner.report._scaling import scaling_section
from tuner.report._speed import speed_section
from tuner.report._speed_claims import with_speed_choices
from tuner.report._status import (
    EFFECTS_STEP,
    Progress,
    progress_of,
    status_details,
    status_lead,
)
from tuner.report.claims import Claims, write_claims
from tuner.report.document import (
    Details,
    Section,
    Table,
    code,
    estimate_text,
    render_html,
    render_markdown,
    user,
)
from tuner.techniques import settings_text
from tuner.time_to_target import with_time_to_target
from tuner.units import MIB, as_number, format_bytes

__all__ = ["placed_claims", "write_report"]


def write_report(
    experiment: Path | Experiment, answer: Answer | None = None, *, out_dir: Path
) -> Path:
    """Write ``trials.csv``, ``trials.parquet``, ``report.md``, ``report.html``, plots and
    ``recommended_<metric>.json`` for an experiment (finished, partial or all-failed) into
    ``out_dir`` (created if needed, its files overwritten); return ``out_dir``.

    ``experiment`` is the folder (``<storage>/<name>``) or it already loaded; ``answer`` is
    given when the caller decided already (``tuner search`` has).

    Raises:
        TunerError: the folder is missing or not an experiment.
    """
    if not isinstance(experiment, Experiment):
        experiment = load_experiment(experiment)
    answer = answer or decide(experiment)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    claims = claims_for(experiment, answer)
    # Its speed_choice column: each recorded trial's record's words (placing the record).
    table = with_speed_choices(with_time_to_target(experiment.trials, answer.trials), claims)
    write_trials_csv(table, out_dir / "trials.csv")
    table.to_parquet(out_dir / "trials.parquet", index=False)  # keeps the dtypes
    progress = progress_of(experiment)
    lead = status_lead(experiment, progress, claims)  # unfinished: said before anything else
    sections = [
        *_claim_sections(experiment, answer, progress, out_dir, claims),
        *filter(None, [scaling_section(experiment, recommended=answer.recommended)]),
        *filter(None, [batch_section(experiment, answer, out_dir, claims)]),
        _trials(experiment, answer, claims),
        _importance(experiment, answer, out_dir),
        _more_plots(experiment, out_dir),
        _details(experiment, progress, claims),
    ]
    title = f"Tuning report: {user(experiment.name)}"
    (out_dir / REPORT_FILE).write_text(render_markdown(title, sections, lead))
    (out_dir / REPORT_HTML_FILE).write_text(render_html(title, sections, lead))
    write_claims(claims, out_dir / CLAIMS_FILE)
    return out_dir


def _claim_sections(
    experiment: Experiment,
    answer: Answer,
    progress: Progress,
    out_dir: Path,
    claims: Claims,
    *,
    plots: bool = True,
) -> list[Section]:
    """Sections 1-5, the ones that say claims (each ``claims.text`` call places one: what
    claims.json keeps), in the report's order; ``plots``: draw theirs (no plot places a claim)."""
    effects = _effects.controlled_effects(experiment.effects)
    return [
        answer_section(experiment, answer, effects, progress, out_dir, claims),
        _front(experiment, answer, out_dir if plots else None, claims),
        _techniques(experiment, answer, effects, progress, out_dir if plots else None, claims),
        *filter(None, [input_section(answer.recommended, effects, claims)]),
        speed_section(experiment, claims),
    ]


def placed_claims(experiment: Experiment, answer: Answer) -> Claims:
    """The claims :func:`write_report` places (what it writes to claims.json), made in memory
    by the same sections (the auditor's: a record claims.json lacks is found), with no plot
    drawn. Their files (the recommended configs) go to a scratch folder, removed after."""
    claims = claims_for(experiment, answer)
    with_speed_choices(experiment.trials, claims)  # trials.csv's speed_choice column
    progress = progress_of(experiment)
    status_lead(experiment, progress, claims)  # how far it got, said first
    with tempfile.TemporaryDirectory(prefix="tuner-claims-") as scratch:
        _claim_sections(experiment, answer, progress, Path(scratch), claims, plots=False)
    batch_section(experiment, answer, None, claims)  # its verdicts, no plot drawn
    _trials(experiment, answer, claims)  # the trials section says the trials' counts
    _summary(experiment, progress, claims)  # the details': the clock's, counts, the state
    claims.text("unread")  # the details' first: what the folder held that could not be read
    return claims


# ---- 2. the front ----------------------------------------------------------------------------


def _front(experiment: Experiment, answer: Answer, out: Path | None, claims: Claims) -> Section:
    """Section 2 (``out`` None: its plot not drawn)."""
    trials, front = answer.trials, answer.front
    blocks: list[Any] = ["No trial ran ok to its end within the budget: there is no front."]
    if not front.empty:
        phase = claims.text("phase_time", "remeasure")  # its clock, a record
        how = f" Re-measured {phase}." if answer.remeasured and phase else ""
        front_ids = front[TRIAL_ID].astype(str)
        blocks = [
            f"{claims.text('front', *front_ids)}.{how} {sentence_text(answer, claims)}",
            Table(_front_table(experiment, front), "Pareto front"),
        ]
    if out is not None and trials[[m for m, _ in answer.objectives[:2]]].notna().any().any():
        blocks.append(_plots.pareto_plot(trials, front, answer.objectives, out / "pareto.png"))
    return Section("Pareto front", blocks, anchor="front")


def _front_table(experiment: Experiment, front: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            TRIAL_ID: row[TRIAL_ID],
            "images/s": estimate_text(row, "images_per_second", ",.0f"),
            "throughput from": row["throughput_source"],
            "val accuracy": estimate_text(row, "val_accuracy", ".3f"),
            "peak memory": format_bytes(row.get("peak_memory_bytes")),
            **_config_columns(experiment, row),
        }
        for _, row in front.iterrows()
    )


def _config_columns(experiment: Experiment, row: pd.Series) -> dict[str, Any]:
    """What a trial ran: its searched parameters and the speed settings its probes chose."""
    return {
        **{n: row.get(PARAM_PREFIX + n) for n in experiment.param_names},
        "speed settings": settings_text(speed_settings_of(row.get(SPEED_SETTINGS))),
    }


# ---- 3. techniques ---------------------------------------------------------------------------


def _techniques(
    experiment: Experiment,
    answer: Answer,
    effects: pd.DataFrame,
    progress: Progress,
    out: Path | None,
    claims: Claims,
) -> Section:
    """Section 3 (``out`` None: its plot not drawn)."""
    title = "What each technique does for the recommended config"
    if effects.empty:
        why = progress.not_run.get(EFFECTS_STEP, f"not run ({EFFECTS_FILE} has no rows)")
        blocks = [f"Not measured: the technique effects step was {why}."]
        return Section(title, blocks, anchor="techniques")
    info = experiment.metadata.get("effects") or {}
    left = [*info.get("left_out", []), *info.get("dropped", [])]
    measured = claims.text("phase_time", "effects")  # its clock, a record
    if _effects.says_nothing(effects):  # no table: its claim says why, its clock how long
        said = claims.text("effects_say_nothing") + (f" Measured {measured}." if measured else "")
        return Section(title, [said, *_left_out(left)], anchor="techniques")
    blocks = [
        f"Each row is the recommended config (trial `{info.get(TRIAL_ID, '?')}`) with one "
        f"change, measured interleaved with the recommended config itself, {measured}; "
        "changes are paired by round, with 95% intervals. **No measurable effect** means the "
        "interval contains no change: on this machine the difference is inside the noise, and "
        "+-X % says how large an effect could still hide in it. "
        "**Fell back** means the setting could not run here, so nothing was compared. Accuracy "
        "is not re-measured here: the speed techniques do not change the maths of training; AMP "
        "and the norm layers do, and the search's trials show their accuracy.",
        _reference_note(answer),
        Table(_effects.effects_table(effects, _verdicts(effects, claims)), "One change at a time"),
        _plots.effects_plot(effects, out / "effects.png") if out is not None else None,
        *_left_out(left),
    ]
    return Section(title, [block for block in blocks if block], anchor="techniques")


def _verdicts(effects: pd.DataFrame, claims: Claims) -> dict[str, str]:
    """Each change's verdict, its claim's words."""
    return {str(arm): claims.text("effect", str(arm)) for arm in effects["arm"]}


def _left_out(left: list[str]) -> list[str]:
    return ["\n".join(f"- not compared: {user(line)}" for line in left)] if left else []


def _reference_note(answer: Answer) -> str:
    """Why this table's figure for the recommended config is not the answer's."""
    pick = answer.recommended
    figure = ""
    if pick is not None:  # its throughput_source: "search" or "re-measured"
        ips = estimate_text(pick, "images_per_second", ",.0f")
        figure = f" (section 1: {ips} images/s, {pick['throughput_source']})"
    return (
        "The first row's images/s is the recommended config measured again here, in this "
        f"table's own short interleaved runs, so it differs from the answer's figure{figure}: "
        "compare the rows of this table with each other, not with other sections."
    )


# ---- 5. trials -------------------------------------------------------------------------------


def _trials(experiment: Experiment, answer: Answer, claims: Claims) -> Section:
    trials = experiment.trials
    section = Section("Trials", anchor="trials")
    counted = f"{counts_said(trials, claims)}. {claims.text('rule', 'candidates')}"
    section.blocks.append(counted)  # the console's words, then the rule
    failed = trials[trials[KIND] != "ok"]
    if not failed.empty:
        shown = failed[[TRIAL_ID, KIND, STATUS, INFEASIBLE_REASON, ERROR]].assign(
            peak_memory=[format_bytes(v) for v in failed["peak_memory_bytes"]]
        )
        section.blocks.append(Table(shown, "Trials that cannot be picked, and why"))
    if RETRIES in trials:  # an experiment before the key has none
        retried = trials[trials[RETRIES].fillna(0) > 0]
        if not retried.empty:
            shown = retried[[TRIAL_ID, KIND, RETRIES, LAST_ERROR]]
            section.blocks.append(Table(shown, "Trials retried from a checkpoint after a failure"))
    untried = [claims.text("not_tried", what) for what in ("not tried", _effects.TRIED_NOT_OK)]
    section.blocks += filter(None, untried)
    section.blocks.append(
        Details(
            "All trials (click a column header to sort)",
            [Table(_all_trials(experiment, answer), "All trials", sortable=True)],
        )
    )
    return section


def _all_trials(experiment: Experiment, answer: Answer) -> pd.DataFrame:
    """One row per trial: what it was, what it searched, how it ran, what it measured; the
    search's figure and the re-measured one in their own columns (they are two measurements)."""
    return pd.DataFrame(
        {
            TRIAL_ID: str(row[TRIAL_ID]),
            KIND: row[KIND],
            **_config_columns(experiment, row),
            "images/s in search": as_number(row["search_images_per_second"]),
            "images/s re-measured": as_number(row["images_per_second"])
            if row["throughput_source"] == "re-measured"
            else math.nan,
            "val accuracy": as_number(row["val_accuracy"]),
            "peak memory MiB": as_number(row["peak_memory_bytes"]) / MIB,
            "trial seconds": as_number(row[TRIAL_TIME_S]),
        }
        for _, row in answer.trials.iterrows()  # every trial, re-measured figures beside
    )


# ---- 6. importance, 7. plots -----------------------------------------------------------------


def _importance(experiment: Experiment, answer: Answer, out: Path) -> Section:
    found = param_importances(
        experiment.study, experiment.trials, [m for m, _ in answer.objectives]
    )
    blocks: list[Any] = []
    for metric, values in found.items():
        if isinstance(values, str):
            blocks.append(f"- {metric}: {values}")
        else:
            frame = pd.DataFrame(list(values.items()), columns=["parameter", "importance"])
            blocks.append(Table(frame, f"{metric}: fANOVA importance over finished trials"))
    blocks.append(_plots.importance_plot(found, out / "importance.png"))
    return Section("Parameter importance", [b for b in blocks if b], anchor="importance")


def _more_plots(experiment: Experiment, out: Path) -> Section:
    limit = memory_limit(experiment.metadata)
    plots = [
        _plots.throughput_plot(experiment.trials, out / "throughput_vs_batch.png"),
        _plots.memory_plot(experiment.trials, limit, out / "memory_vs_batch.png"),
    ]
    blocks: list[Any] = [p for p in plots if p is not None]
    if blocks:
        blocks.insert(0, "Throughput here is each trial's figure as measured in the search.")
    return Section("Plots", blocks or ["No trial with a batch size to plot."], anchor="plots")


# ---- 8. details ------------------------------------------------------------------------------


def _details(experiment: Experiment, progress: Progress, claims: Claims) -> Section:
    meta = experiment.metadata
    columns = pd.DataFrame(list(column_meanings().items()), columns=["column", "meaning"])
    keys = pd.DataFrame(_metadata_rows(meta), columns=["key", "value"])
    metadata = Details(f"Run metadata ({METADATA_FILE})", [Table(keys)])
    observed = Details(
        "Techniques across trials (observational)",
        [_OBSERVED, Table(_effects.observed_techniques(experiment.trials))],
    )
    column_list = Details("Columns of trials.csv / trials.parquet", [Table(columns), _COLUMNS_NOTE])
    unread = claims.text("unread")  # what could not be read, shown first
    blocks = [unread, _summary(experiment, progress, claims), metadata, observed, column_list]
    return Section("Details", [block for block in blocks if block], anchor="details")


def _summary(experiment: Experiment, progress: Progress, claims: Claims) -> str:
    """The details' list: what ran, and its counts, wall time and load (their records')."""
    meta = experiment.metadata
    limit = memory_limit(meta)
    return "\n".join(
        [
            f"- experiment: {code(experiment.name)} ({code(experiment.path)})",
            *status_details(experiment, progress, claims),
            f"- space: {code(meta.get('space', 'unknown'))}, sampler "
            f"{code(meta.get('sampler', '?'))}, seed {code(meta.get('seed', '?'))}",
            f"- memory limit: {format_bytes(limit) if limit else 'none'}",
            f"- trials: {counts_said(experiment.trials, claims)}",
            f"- {claims.text('wall_time')}",
            f"- {claims.text('machine_load')}",
            f"- searched parameters: {code(', '.join(experiment.searched_names) or 'unknown')}",
            f"- {claims.text('remeasure_rows')}",
            # --warm-start: how many of the study's trials came from which experiment
            *_warm_start_line(meta, claims),
        ]
    )


def _warm_start_line(meta: Mapping[str, Any], claims: Claims) -> list[str]:
    """How many of the study's trials came from which experiment: its record's words (an
    older experiment's metadata without every key it reads: its summary as written)."""
    said = claims.text("warm_start")
    if said:
        return [f"- {said}"]
    return [f"- {user(meta['warm_start']['summary'])}"] if meta.get("warm_start") else []


_OBSERVED = (
    "Counts of the trials that **ran** with each setting (the effective value: a switch that "
    "fell back counts as off), with their median images/s. Everything else varies between these "
    "groups, so this is a hint, not a measurement; section 3 is the controlled comparison."
)
_COLUMNS_NOTE = (
    "Then every other reported metric, and `param_<name>` per searched/derived setting. Counts "
    "are nullable integers, missing text is missing (not an empty string), flags are booleans "
    "and times are UTC. `trials.parquet` keeps these dtypes; read `trials.csv` with "
    "`tuner.experiment.read_trials_csv(path)` to get the same frame."
)


def _metadata_rows(meta: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, value in meta.items():
        if key == "options":
            continue  # the same settings as the top-level keys
        if isinstance(value, Mapping):
            yield from _metadata_rows(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", str(value)
