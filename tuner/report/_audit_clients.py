"""The auditor's checks of what other clients show (:mod:`tuner.report.audit`): the report's
plots (the points each one drew, kept in report.html), every tracker's runs (TensorBoard event
files, an MLflow store, W&B offline run files), and values nobody measured. Each reader is the
client's own; a client whose package is not installed is skipped with a note."""

from __future__ import annotations

import html
import json
import math
import re
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.record import (
    KIND,
    KINDS,
    MEMORY_VIOLATION,
    TRIAL_ID,
    hparams_status,
    mlflow_status,
    optuna_state,
)
from tuner.report._audit_text import Finding, kinds_of

__all__ = ["check_plots", "check_trackers", "check_unmeasured", "wandb_records"]

_IMAGE = re.compile(
    r"<img alt='([^']*)' data-points='([^']*)' data-legend='[^']*' data-title='([^']*)'"
)
_FRONT = "Pareto front"
_PARETO = "Pareto front with intervals"
_TEXT_TAG = "ray/tune/"  # where Ray's TensorBoard logger writes a trial's text and scalars


# ---- plots -----------------------------------------------------------------------------------


def plots_of(page: str) -> Iterator[tuple[str, list[dict[str, Any]], str]]:
    """Each plot of report.html: its alt text, the points it drew and its title."""
    for alt, points, title in _IMAGE.findall(page):
        yield html.unescape(alt), json.loads(html.unescape(points)), html.unescape(title)


def check_plots(page: str, where: str, trials: pd.DataFrame) -> list[Finding]:
    """Every plot's title count against the trials it drew; in the Pareto plot, every trial
    present (drawn, or named as not measured) and each told apart from the others."""
    found: list[Finding] = []
    for alt, points, title in plots_of(page):
        drawn = [p for p in points if p.get("series") != _FRONT and p.get(TRIAL_ID)]
        ids = {str(p[TRIAL_ID]) for p in drawn}
        count = re.search(r"\((\d+)\b[^)]*\)", title)
        if count and "trial" in title.lower() and int(count.group(1)) != len(ids):
            why = f"it draws {len(ids)} trials"
            found.append(Finding("plot", f"{where}: {alt}", title, why))
        if alt == _PARETO:
            found += _pareto(drawn, title, f"{where}: {alt}", trials)
    return found


def _pareto(
    drawn: list[dict[str, Any]], title: str, where: str, trials: pd.DataFrame
) -> list[Finding]:
    found = []
    kinds = kinds_of(trials)
    ids = {str(p[TRIAL_ID]) for p in drawn}
    unsaid = Counter(kinds[t] for t in kinds if t not in ids)
    named = Counter({m[2]: int(m[1]) for m in re.finditer(rf"(\d+) ({'|'.join(KINDS)})", title)})
    if unsaid and unsaid != named:
        missing = ", ".join(f"{n} {k}" for k, n in unsaid.items())
        found.append(Finding("plot", where, title, f"not drawn and not named: {missing}"))
    at: dict[tuple[Any, ...], list[str]] = {}
    for p in drawn:
        at.setdefault((p["x"], p["y"], p.get("marker"), p.get("color")), []).append(
            str(p[TRIAL_ID])
        )
    for (x, y, *_), stacked in at.items():
        if len(set(stacked)) > 1:
            why = f"trials {', '.join(sorted(set(stacked)))} are drawn alike at ({x}, {y})"
            found.append(Finding("plot", where, title, why))
    styles: dict[tuple[Any, Any], set[str]] = {}
    for p in drawn:
        if "marker" in p:
            styles.setdefault((p["marker"], p["color"]), set()).add(
                kinds.get(str(p[TRIAL_ID]), "?")
            )
    for (marker, color), shared in styles.items():
        if len(shared) > 1:
            why = f"kinds {', '.join(sorted(shared))} share one glyph ({marker}, {color})"
            found.append(Finding("plot", where, title, why))
    return found


# ---- trackers --------------------------------------------------------------------------------


def check_trackers(
    experiment: Path, trials: pd.DataFrame, mlflow_uri: str | None
) -> tuple[list[Finding], list[str]]:
    """Every tracker's run of each trial ended, with the trial's kind; and the notes of the
    clients that could not be read here."""
    found: list[Finding] = []
    notes: list[str] = []
    for reader in (_tensorboard, _wandb):
        try:
            found += reader(experiment, trials)
        except ImportError as exc:
            notes.append(f"not checked: {exc.name} is not installed")
    if mlflow_uri:
        try:
            found += _mlflow(mlflow_uri, experiment.name, trials)
        except ImportError as exc:
            notes.append(f"not checked: {exc.name} is not installed")
    return found, notes


def _trial_dirs(experiment: Path) -> dict[str, Path]:
    dirs = (p.parent for p in experiment.glob("*/params.json"))
    return {d.name.split("_")[1]: d for d in dirs if d.name.startswith("t_")}


def _tensorboard(experiment: Path, trials: pd.DataFrame) -> list[Finding]:
    dirs = {
        t: d for t, d in _trial_dirs(experiment).items() if any(d.glob("events.out.tfevents.*"))
    }
    if not dirs:
        return []
    found = []
    for trial_id, kind in kinds_of(trials).items():
        where = f"TensorBoard: trial {trial_id}"
        if trial_id not in dirs:
            found.append(Finding("tracker", where, kind, "no event file: the trial was never told"))
            continue
        said, status, violations = _events(dirs[trial_id])
        if said != kind or status != hparams_status(kind):
            expected = hparams_status(kind)
            why = f"it says {said!r} with HParams {status}; trials.csv: {kind!r} ({expected})"
            found.append(Finding("tracker", where, said, why))
        found += _unmeasured_in(where, trial_id, trials, violations)
    return found


def _events(trial_dir: Path) -> tuple[str, str, list[float]]:
    """A trial's kind text, HParams status and memory violations, from its event files, read
    with tensorboardX's own protos (TFRecord framing: length, its CRC, the event, its CRC)."""
    from tensorboardX.proto import api_pb2, event_pb2, plugin_hparams_pb2

    kind, status, violations = "no kind", "no status", []
    for path in sorted(trial_dir.glob("events.out.tfevents.*")):
        data, position = path.read_bytes(), 0
        while position + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[position : position + 8])
            event = event_pb2.Event.FromString(data[position + 12 : position + 12 + length])
            position += 12 + length + 4
            for value in event.summary.value:
                if value.tag == f"{_TEXT_TAG}{KIND}/text_summary":
                    kind = value.tensor.string_val[0].decode()
                elif value.tag == "_hparams_/session_end_info":
                    content = value.metadata.plugin_data.content
                    end = plugin_hparams_pb2.HParamsPluginData.FromString(content).session_end_info
                    status = api_pb2.Status.Name(end.status)
                elif value.tag == f"{_TEXT_TAG}{MEMORY_VIOLATION}":
                    violations.append(value.simple_value)
    return kind, status, violations


def _mlflow(uri: str, name: str, trials: pd.DataFrame) -> list[Finding]:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    by_trial = {
        str(r.data.tags.get("trial_name", "")).rsplit("_", 1)[-1]: r
        for r in runs
        if "mlflow.parentRunId" in r.data.tags
    }
    found = []
    for trial_id, kind in kinds_of(trials).items():
        where = f"MLflow: trial {trial_id}"
        run = by_trial.get(trial_id)
        if run is None:
            found.append(Finding("tracker", where, kind, "no run: the trial was never told"))
            continue
        said, status = run.data.tags.get(KIND, "no kind"), run.info.status
        if said != kind or status != mlflow_status(kind):
            expected = mlflow_status(kind)
            why = f"its run is {status} with kind {said!r}; trials.csv: {kind!r} ({expected})"
            found.append(Finding("tracker", where, said, why))
        if MEMORY_VIOLATION in run.data.metrics:
            found += _unmeasured_in(where, trial_id, trials, [run.data.metrics[MEMORY_VIOLATION]])
    return found


def _wandb(experiment: Path, trials: pd.DataFrame) -> list[Finding]:
    files = sorted(experiment.glob("wandb/offline-run-*/run-*.wandb"))
    if not files:
        return []
    runs: dict[str, tuple[str, int | None, list[float]]] = {}
    for path in files:
        records = list(wandb_records(path))
        run = [r.run for r in records if r.WhichOneof("record_type") == "run"]
        if not run:
            continue
        exits = [r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"]
        tags = [t.removeprefix("kind: ") for t in run[-1].tags if t.startswith("kind: ")]
        violations = [
            json.loads(item.value_json)
            for r in records
            if r.WhichOneof("record_type") == "history"
            for item in r.history.item
            if item.key == MEMORY_VIOLATION
        ]
        earlier = runs.get(run[-1].run_id, ("", None, []))[2]
        runs[run[-1].run_id] = (  # a run's later file (the time to target) has the last word
            tags[-1] if tags else "no kind",
            exits[-1] if exits else None,
            earlier + violations,
        )
    found = []
    for trial_id, kind in kinds_of(trials).items():
        where = f"W&B: trial {trial_id}"
        if trial_id not in runs:
            found.append(Finding("tracker", where, kind, "no run: the trial was never told"))
            continue
        said, code, violations = runs[trial_id]
        expected = 1 if optuna_state(kind) == "FAIL" else 0
        if said != kind or code != expected:
            ended = "no exit record (never ended)" if code is None else f"exit {code}"
            why = f"its run has {ended} with kind {said!r}; trials.csv: {kind!r} (exit {expected})"
            found.append(Finding("tracker", where, said, why))
        found += _unmeasured_in(where, trial_id, trials, violations)
    return found


def wandb_records(path: Path) -> Iterator[Any]:
    """The records of a ``.wandb`` file. wandb ships no Python reader of its own (the datastore
    module went with the Go core), so this reads its documented layout: a 7-byte header
    (``:W&B``, magic, version) and LevelDB log blocks of 32 KiB holding chunks (4-byte CRC,
    2-byte length, 1-byte type: full, first, middle, last) of ``Record`` protos."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    if data[:4] != b":W&B":
        return
    position, chunks = 7, b""
    while position + 7 <= len(data):
        left = 32768 - position % 32768
        if left < 7:  # a block's tail too short for a header is padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        chunks += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # full or last: a whole record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            chunks = b""
            yield record


# ---- values nobody measured ------------------------------------------------------------------


def check_unmeasured(trials: pd.DataFrame, where: str) -> list[Finding]:
    """A memory violation is a measurement of the peak: none where the peak was not measured
    (an OOM is one: its violation is what it is)."""
    if MEMORY_VIOLATION not in trials or "peak_memory_bytes" not in trials:
        return []
    peak = pd.to_numeric(trials["peak_memory_bytes"], errors="coerce")
    violation = pd.to_numeric(trials[MEMORY_VIOLATION], errors="coerce")
    oom = trials.get("status", pd.Series("", index=trials.index)).astype(str) == "oom"
    bad = trials[peak.isna() & violation.notna() & ~oom]
    return [
        Finding(
            "unmeasured",
            where,
            f"trial {row[TRIAL_ID]} ({row[KIND]}): {MEMORY_VIOLATION} = {row[MEMORY_VIOLATION]}",
            "its peak memory was never measured",
        )
        for _, row in bad.iterrows()
    ]


def _unmeasured_in(
    where: str, trial_id: str, trials: pd.DataFrame, values: list[Any]
) -> list[Finding]:
    """A tracker's memory violations of a trial whose trials.csv has none: never measured."""
    row = trials[trials[TRIAL_ID].astype(str) == trial_id]
    if row.empty or MEMORY_VIOLATION not in row:
        return []
    told = pd.to_numeric(row[MEMORY_VIOLATION], errors="coerce").iloc[0]
    shown = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
    if math.isnan(told) and shown:
        why = "trials.csv has none: it was never measured"
        return [Finding("unmeasured", where, f"{MEMORY_VIOLATION} = {shown[-1]}", why)]
    return []
