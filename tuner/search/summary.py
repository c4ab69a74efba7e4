"""The end-of-search printout: counts, the best configurations, and where the results are."""

from __future__ import annotations

import csv
import math
from collections import Counter
from pathlib import Path
from typing import Any

from tuner.search.experiment import REMEASURE_FILE, ExperimentPaths
from tuner.search.progress import describe_params
from tuner.search.remeasure import TrialRecord, pareto_front, pick_candidates, summarize

__all__ = ["print_summary"]

SHOWN = 5


def print_summary(
    *,
    paths: ExperimentPaths,
    records: list[TrialRecord],
    objective: str,
    state: str,
    report_dir: Path | None,
) -> None:
    print()
    print(f"Search {state}: {len(records)} trials ({_counts(records)})")
    remeasured = _read_remeasure(paths.local / REMEASURE_FILE)
    if objective == "pareto":
        best = pareto_front(records)[:SHOWN]
    else:
        best = pick_candidates(records, objective=objective, top=SHOWN)
    title = "Pareto front (throughput vs accuracy)" if objective == "pareto" else "Best trials"
    if best:
        print(f"{title}, feasible trials only:")
    for record in best:
        print("  " + _line(record, remeasured.get(record.trial_id)))
    if not best:
        print("No feasible trial finished: loosen --max-memory or check the errors above.")
    print(f"Experiment folder: {paths.local}")
    print(f"Optuna study:      {paths.study_url} (study name {paths.name!r})")
    if report_dir is not None:
        print(f"Report:            {report_dir}")
    if state != "finished":
        print(f"Continue it with:  python -m tuner search --resume --name {paths.name} "
              f"--storage {paths.storage}")  # fmt: skip


def _counts(records: list[TrialRecord]) -> str:
    kinds: Counter[str] = Counter()
    for record in records:
        if record.ray_status == "ERROR":
            kinds["error"] += 1
        elif not record.metrics:
            kinds["not started"] += 1
        elif record.ray_status != "TERMINATED":
            kinds[record.ray_status.lower()] += 1
        elif record.metrics.get("feasible"):
            kinds["feasible" if record.metrics.get("final") else "not run to the end"] += 1
        else:
            kinds["infeasible"] += 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))


def _line(record: TrialRecord, remeasured: dict[str, float] | None) -> str:
    m = record.metrics
    throughput = f"{m['images_per_second']:.1f}"
    if remeasured is not None:
        std = remeasured["std"]
        spread = f" ± {std:.1f}" if not math.isnan(std) else ""
        throughput = f"{remeasured['mean']:.1f}{spread} (re-measured x{remeasured['n']:.0f})"
    peak = m.get("peak_memory_bytes", math.nan)
    return (
        f"{record.trial_id}: {throughput} img/s, val acc {m['val_accuracy']:.3f}, "
        f"peak {peak / 2**20:.0f} MiB | {describe_params(record.config)}"
    )


def _read_remeasure(path: Path) -> dict[str, dict[str, float]]:
    if not path.exists():
        return {}
    rows: list[dict[str, Any]] = []
    with path.open() as handle:
        for row in csv.DictReader(handle):
            value = row.get("images_per_second") or "nan"
            rows.append({"trial_id": row["trial_id"], "images_per_second": float(value)})
    return summarize(rows)
