"""Which speed knobs change their verdict with batch size, norm or AMP: the measurement behind
sharing one probe verdict across training configs (tuner.speed: ``SHARED_ACROSS``).

Reads the measured grids (``bench/search_grid.py``: per speed key batch size x norm x AMP, each
CPU speed knob probed as the search probes it, 4 interleaved repeats) and applies the search's
own decision rule (:func:`tuner.speed.decide`) to each key's plain setting and each knob alone.
A knob's verdict is *kept* (a candidate: faster in every pair) or not, and *clear* (its
interval excludes 1x). For each knob it counts the pairs of keys that differ in one field only
(batch size, norm or AMP) and whose verdicts differ. lr is not in a probe at all: a probe's
steps time the maths, not what they learn.

    .venv/bin/python bench/probe_verdicts.py     # seconds: reads bench/data, trains nothing
Writes reports/benchmarks/probe_verdicts.md and .json.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.compare import Arm
from tuner.speed import decide

ROOT = Path(__file__).resolve().parent.parent
GRIDS = {"vit (vit_space cpu)": "search_grid.json", "resnet": "search_grid_resnet.json"}
FIELDS = ("batch_size", "norm", "amp")


def verdicts(path: Path, repeats: int | None = None) -> pd.DataFrame:
    """One row per (speed key, knob): the ratio, interval and verdict by the search's rule,
    from the grid's first ``repeats`` repeats (all by default)."""
    grid = json.loads(path.read_text())
    knobs = grid["about"]["speed_knobs"]
    cells = {
        (json.dumps(c["key"], sort_keys=True), json.dumps(c["combo"], sort_keys=True)): c
        for c in grid["speed"]
    }
    keys = sorted({k for k, _ in cells}, key=str)
    rows = []
    for key in keys:
        plain = {k: (0 if k == "num_workers" else False) for k in knobs}
        arms = [Arm("plain", "speed", None)]  # type: ignore[arg-type]
        runs = _runs(cells[(key, json.dumps(plain, sort_keys=True))], "plain", repeats)
        for knob in knobs:
            combo = {**plain, knob: (1 if knob == "num_workers" else True)}
            cell = cells.get((key, json.dumps(combo, sort_keys=True)))
            if cell is None:
                continue
            arms.append(Arm(knob, "speed", None, {knob: combo[knob]}, "plain"))  # type: ignore[arg-type]
            runs += _runs(cell, knob, repeats)
        table, _ = decide(pd.DataFrame(runs), arms, max_memory_bytes=None)
        for row in table:
            rows.append(
                {
                    **json.loads(key),
                    "knob": row["name"],
                    "ratio": row["ratio"],
                    "low": row["low"],
                    "high": row["high"],
                    "kept": row["kept"],
                    "clear": row["clear"],
                }
            )
    return pd.DataFrame(rows)


def _runs(cell: dict[str, Any], arm: str, repeats: int | None) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(cell["repeats"][:repeats]):
        out.append(
            {
                "arm": arm,
                "group": "speed",
                "reference": "" if arm == "plain" else "plain",
                "baseline": "",
                "repeat": i,
                "status": r["status"],
                "images_per_second": r.get("images_per_second"),
                "peak_memory_bytes": r.get("peak_memory_bytes"),
                "memory_kind": "",
                "fell_back": "",
                "val_accuracy": float("nan"),
                "val_images": 0,
            }
        )
    return out


def flips(table: pd.DataFrame, verdict: str) -> pd.DataFrame:
    """Per knob and field: of the key pairs differing in that field only, how many disagree."""
    out = []
    for knob, group in table.groupby("knob"):
        for field in FIELDS:
            others = [f for f in FIELDS if f != field]
            pairs = differ = 0
            for _, same in group.groupby(others):
                for a, b in itertools.combinations(same.to_dict("records"), 2):
                    pairs += 1
                    differ += bool(a[verdict]) != bool(b[verdict])
            out.append({"knob": knob, "field": field, "pairs": pairs, "differ": differ})
    return pd.DataFrame(out)


def _markdown(table: pd.DataFrame) -> str:
    """A Markdown table (pandas' own needs the optional tabulate)."""
    rows = [list(table.columns), ["---"] * len(table.columns), *table.astype(str).values.tolist()]
    return "\n".join("| " + " | ".join(map(str, row)) + " |" for row in rows)


def main() -> None:
    md = ["# Speed-probe verdicts across training configs", "", __doc__.split("\n\n")[1], ""]
    record: dict[str, Any] = {}
    for name, file in GRIDS.items():
        path = ROOT / "bench" / "data" / file
        if not path.exists():
            continue
        table = verdicts(path)
        about = json.loads(path.read_text())["about"]
        record[name] = {
            "verdicts": table.to_dict("records"),
            "kept_flips": flips(table, "kept").to_dict("records"),
            "clear_flips": flips(table, "clear").to_dict("records"),
        }
        md += [
            f"## {name}: {about['workload']['model']}, {about['date']}, torch {about['torch']}",
            "",
            "Verdict per key (kept = a candidate by the rule; clear = beyond noise):",
            "",
            _markdown(table.round({"ratio": 3, "low": 3, "high": 3})),
            "",
            "Key pairs that differ in one field only, and how many of them disagree:",
            "",
        ]
        both = flips(table, "kept").rename(columns={"differ": "kept differs"})
        both["clear differs"] = flips(table, "clear")["differ"]
        md += [_markdown(both), ""]
    out = ROOT / "reports" / "benchmarks"
    (out / "probe_verdicts.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    (out / "probe_verdicts.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
