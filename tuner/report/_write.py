"""Assemble the report: the six sections of the issue, written as files into one folder."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.report import _plots, _tables
from tuner.report._effects import technique_effects
from tuner.report._importance import param_importances
from tuner.report._recommend import export_config, trial_config
from tuner.report._render import Image, Section, Table, render_html, render_markdown
from tuner.results import TRIAL_COLUMNS, Experiment, load_experiment, load_study

__all__ = ["write_report"]

_SHOWN_METRICS = ["images_per_second", "val_accuracy", "peak_memory_bytes", "data_wait_fraction"]


def write_report(experiment_dir: Path, *, out_dir: Path) -> Path:
    """Write ``trials.csv``, ``trials.parquet``, ``report.md``, ``report.html``, plots and
    ``recommended_<metric>.json`` for an experiment folder (finished, partial or all-failed).

    Args:
        experiment_dir: the experiment folder (``<storage>/<name>``).
        out_dir: the report folder; created if needed, files in it are overwritten.

    Returns:
        ``out_dir``.

    Raises:
        TunerError: the folder is missing or not an experiment.
    """
    experiment = load_experiment(experiment_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    trials = experiment.trials
    trials.to_csv(out_dir / "trials.csv", index=False)
    trials.to_parquet(out_dir / "trials.parquet", index=False)
    objs = _tables.objectives(experiment.metadata)
    sections = [
        _summary(experiment, objs),
        _pareto(experiment, objs, out_dir),
        _recommended(experiment, objs, out_dir),
        _importance(experiment, objs, out_dir),
        _effects(trials),
        _more_plots(experiment, out_dir),
        _columns_section(),
    ]
    title = f"Tuning report: {experiment.name}"
    (out_dir / "report.md").write_text(render_markdown(title, sections))
    (out_dir / "report.html").write_text(render_html(title, sections))
    return out_dir


def _summary(experiment: Experiment, objs: list[_tables.Objective]) -> Section:
    trials = experiment.trials
    meta = experiment.metadata
    limit = _tables.memory_limit(meta)
    lines = [
        f"- experiment: `{experiment.name}` ({experiment.path})",
        f"- state: {meta.get('state', 'unknown (no tuner_experiment.json)')}",
        f"- space: {meta.get('space', 'unknown')}",
        f"- objectives: {', '.join(f'{m} ({d})' for m, d in objs)}",
        f"- memory limit: {_bytes(limit) if limit else 'none'}",
        f"- trials: {len(trials)}, feasible: {int(trials['feasible'].sum())}",
        f"- summed trial wall time: {_hours(trials['wall_time_s'].sum())}",
        f"- searched parameters: {', '.join(experiment.searched_names) or 'unknown'}",
    ]
    blocks: list[Any] = [
        "\n".join(lines),
        Table(_tables.status_counts(trials), "Trials by status"),
        Table(
            _metadata_table(meta),
            "Run metadata (tuner_experiment.json): budget, sampler, hardware, library versions",
        ),
    ]
    failed = _tables.failures(trials)
    if not failed.empty:
        blocks.append(Table(failed, "Trials that are not feasible, and why"))
    return Section("Run summary", blocks)


def _pareto(experiment: Experiment, objs: list[_tables.Objective], out: Path) -> Section:
    trials = experiment.trials
    front = _tables.pareto_front(trials, objs)
    blocks: list[Any] = []
    if front.empty:
        blocks.append(
            "**No feasible trial**: no trial finished within the memory budget with a value "
            "for every objective. See the failures in section 1; lower the batch size range, "
            "raise --max-memory or fix the errors shown there."
        )
    else:
        blocks.append(
            f"{len(front)} of {int(trials['feasible'].sum())} feasible trials are "
            f"Pareto-optimal for {' vs '.join(m for m, _ in objs[:2])}."
        )
        blocks.append(Table(front[_shown_columns(experiment, objs)], "Pareto front (feasible)"))
    if trials[[m for m, _ in objs[:2]]].notna().any().any():
        blocks.append(Image(_plots.pareto_plot(trials, front, objs, out / "pareto.png"), "Pareto"))
    return Section("Pareto front (throughput vs accuracy, feasible trials only)", blocks)


def _recommended(experiment: Experiment, objs: list[_tables.Objective], out: Path) -> Section:
    best = _tables.best_per_objective(experiment.trials, objs)
    if not best:
        return Section("Recommended configuration", ["None: there is no feasible trial."])
    rows, blocks = [], []
    workload = experiment.metadata.get("workload")
    for metric, row in best.items():
        config = trial_config(experiment.configs.get(row["trial_id"], {}), _mapping(workload))
        path = export_config(config, out / f"recommended_{metric}.json")
        rows.append({"objective": metric, "file": path.name, **_row_values(experiment, objs, row)})
        rows[-1]["lr"] = config.lr  # as exported (equals param_lr when the space derives it)
    blocks.append(Table(pd.DataFrame(rows), "Best feasible trial per objective"))
    blocks.append(
        "Train with one: `python -m tuner train --config "
        f"{_shown_path(out / f'recommended_{objs[0][0]}.json')}`. The file is the full run config "
        "(fixed workload + searched settings, lr already computed from base_lr)."
    )
    if experiment.remeasure is not None:
        blocks.append(
            Table(
                _remeasure_summary(experiment.remeasure),
                "Re-measured candidates (median and std over repeats, remeasure.csv)",
            )
        )
    return Section("Recommended configuration per objective", blocks)


def _importance(experiment: Experiment, objs: list[_tables.Objective], out: Path) -> Section:
    study = load_study(experiment.path / "study.db", experiment.name)
    found = param_importances(study, experiment.trials, [m for m, _ in objs])
    blocks: list[Any] = []
    for metric, values in found.items():
        if isinstance(values, str):
            blocks.append(f"- {metric}: {values}")
        else:
            frame = pd.DataFrame({"parameter": list(values), "importance": list(values.values())})
            blocks.append(Table(frame, f"{metric}: fANOVA importance over finished trials"))
    plot = _plots.importance_plot(found, out / "importance.png")
    if plot:
        blocks.append(Image(plot, "parameter importance"))
    return Section("Parameter importance per objective", blocks)


def _effects(trials: pd.DataFrame) -> Section:
    effects = technique_effects(trials)
    note = (
        "**Observational**: medians over finished trials with the switch on vs off; other "
        "settings (batch size above all) differ between the groups, so a change here is a hint, "
        "not a measurement. Rows with few trials are weak. For a controlled comparison run "
        "`python -m tuner ablate`."
    )
    if effects.empty:
        return Section("Technique effects", [note, "No speed technique was searched."])
    return Section("Technique effects", [note, Table(effects, "Switch on vs off")])


def _more_plots(experiment: Experiment, out: Path) -> Section:
    limit = _tables.memory_limit(experiment.metadata)
    plots = [
        _plots.throughput_plot(experiment.trials, out / "throughput_vs_batch.png"),
        _plots.memory_plot(experiment.trials, limit, out / "memory_vs_batch.png"),
    ]
    blocks: list[Any] = [Image(p, p.stem) for p in plots if p is not None]
    return Section("Plots", blocks or ["No finished trial with a batch size to plot."])


def _columns_section() -> Section:
    frame = pd.DataFrame({"column": list(TRIAL_COLUMNS), "meaning": list(TRIAL_COLUMNS.values())})
    note = "Then every other reported metric, and `param_<name>` per searched/derived setting."
    return Section("Columns of trials.csv / trials.parquet", [Table(frame), note])


def _shown_columns(experiment: Experiment, objs: list[_tables.Objective]) -> list[str]:
    metrics = list(dict.fromkeys([m for m, _ in objs] + _SHOWN_METRICS))
    return ["trial_id", *metrics, *(f"param_{n}" for n in experiment.param_names)]


def _row_values(
    experiment: Experiment, objs: list[_tables.Objective], row: pd.Series
) -> dict[str, Any]:
    return {c: row[c] for c in _shown_columns(experiment, objs)}


def _remeasure_summary(frame: pd.DataFrame) -> pd.DataFrame:
    numeric = [c for c in ("images_per_second", "peak_memory_bytes", "val_accuracy") if c in frame]
    if "trial_id" not in frame or not numeric:
        return frame
    grouped = frame.groupby("trial_id", sort=False)[numeric]
    summary = grouped.median().add_suffix("_median").join(grouped.std().add_suffix("_std"))
    return summary.join(grouped.size().rename("repeats")).reset_index()


def _metadata_table(meta: Mapping[str, Any], prefix: str = "") -> pd.DataFrame:
    rows = []
    for key, value in meta.items():
        if key == "options":
            continue  # the same settings as the top-level keys
        if isinstance(value, Mapping):
            rows.extend(_metadata_table(value, f"{prefix}{key}.").itertuples(index=False))
        else:
            rows.append((f"{prefix}{key}", str(value)))
    return pd.DataFrame(rows, columns=["key", "value"])


def _shown_path(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _bytes(value: float) -> str:
    return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.1f} MiB"


def _hours(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "unknown"
    return f"{seconds:.1f} s" if seconds < 3600 else f"{seconds / 3600:.2f} h"
