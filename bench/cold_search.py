"""Benchmark: the main job on a cold machine cache, as every new user, machine and GPU meets it.

Runs ``python -m tuner search SPACE`` (the README's main command) in a subprocess with a fresh
``TUNER_CACHE_DIR``, optionally beside a busy loop pinned to one CPU (``--cpu-hog``), and reads
what the trials did from the experiment's own trials table:

- the probe share: the trials' speed-probe seconds (their own probes, and the time they waited
  for another trial's probes of a shared setting) over their whole wall time;
- the training steps of each trial, and how many were starved (fewer than the first rung);
- the search's wall time, the kinds, and the pick.

``--code DIR`` runs another checkout (``git worktree add /tmp/before <commit>``), so a before
and after can be interleaved on one machine:

    .venv/bin/python bench/cold_search.py --code /tmp/before --code . --runs 3 --label quiet
    .venv/bin/python bench/cold_search.py --code /tmp/before --code . --runs 2 --cpu-hog

Appends one record per run to reports/benchmarks/cold_search.json and rewrites the .md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports" / "benchmarks"
PROBE_KEYS = ("speed_probe_time_s", "speed_probe_wait_s")


def run_once(code: Path, space: str, extra: list[str], *, hog: bool) -> dict[str, Any]:
    """One cold-cache main job from checkout ``code``: its record (see the module doc)."""
    with tempfile.TemporaryDirectory(prefix="cold-search-") as tmp:
        env = {**os.environ, "TUNER_CACHE_DIR": f"{tmp}/cache", "PYTHONPATH": str(code)}
        cmd = [sys.executable, "-m", "tuner", "search", space, "--name", "cold"]
        cmd += ["--storage", f"{tmp}/experiments", "--reports-dir", f"{tmp}/reports", *extra]
        load_before = os.getloadavg()[0]  # what else ran: a busy machine reads as one
        hog_process = _start_hog() if hog else None
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
        finally:
            if hog_process is not None:
                hog_process.kill()
        wall = time.perf_counter() - start
        folder = Path(tmp) / "reports" / "cold"  # the report holds trials.csv
        record = _measure(folder, done.stdout)
        commit = _commit(code)
        Path(OUT / "cold_search_logs").mkdir(parents=True, exist_ok=True)
        log = OUT / "cold_search_logs" / f"{commit}-{int(time.time())}.log"
        log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr[-20000:])
        if (folder / "trials.csv").exists():  # what the cost model's CPU check predicts from
            log.with_suffix(".trials.csv").write_text((folder / "trials.csv").read_text())
    return {
        "commit": commit,
        "space": space,
        "args": extra,
        "cpu_hog": hog,
        "exit_code": done.returncode,
        "wall_s": round(wall, 1),
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before, after
        "log": str(log.relative_to(ROOT)),
        **record,
    }


def _measure(folder: Path, console: str) -> dict[str, Any]:
    """What the trials did, from the report's ``trials.csv`` (none: the search wrote none)."""
    table_path = folder / "trials.csv"
    if not table_path.exists():
        return {"trials": 0}
    table = pd.read_csv(table_path)
    probe = sum(table[k].fillna(0).sum() for k in PROBE_KEYS if k in table)
    trial_time = table["trial_time_s"].fillna(0).sum()
    steps = table["steps"].fillna(0) if "steps" in table else pd.Series(dtype=float)
    kinds = table["kind"].value_counts().to_dict() if "kind" in table else {}
    return {
        "trials": len(table),
        "probe_s": round(float(probe), 1),
        "trial_time_s": round(float(trial_time), 1),
        "probe_share": round(float(probe / trial_time), 3) if trial_time else math.nan,
        "steps": [int(s) for s in steps],
        "kinds": kinds,
        "pick": _pick(console),
    }


def _pick(console: str) -> str:
    """The console's answer line naming the pick (``... is the pick: ...``), if any."""
    for line in console.splitlines():
        if " is the pick" in line or line.startswith("Recommended"):
            return line.strip()[:200]
    return ""


def _start_hog() -> subprocess.Popen[bytes]:
    """A busy loop pinned to CPU 0 (taskset where it exists)."""
    loop = [sys.executable, "-c", "while True: pass"]
    pinned = ["taskset", "-c", "0", *loop] if _has("taskset") else loop
    return subprocess.Popen(pinned)


def _has(program: str) -> bool:
    return any((Path(p) / program).exists() for p in os.environ.get("PATH", "").split(":"))


def _commit(code: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(code), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def write_markdown(records: list[dict[str, Any]], path: Path) -> None:
    """One row per run, then per (commit, hog) the medians with their range."""
    lines = [
        "# The main job on a cold machine cache",
        "",
        "`bench/cold_search.py`: `python -m tuner search vit_space` with a fresh "
        "`TUNER_CACHE_DIR`; probe share = (speed-probe seconds + seconds waiting for another "
        "trial's probes) / trial seconds, from trials.csv. Runs in the order they ran.",
        "",
        "| when (UTC) | label | commit | hog | exit | wall s | probe share | steps per trial "
        "| kinds | pick |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted((r.get("kinds") or {}).items()))
        lines.append(
            f"| {r.get('when', '')} | {r.get('label', '')} | {r['commit']} | "
            f"{'yes' if r['cpu_hog'] else 'no'} | {r['exit_code']} | {r['wall_s']} | "
            f"{_pct(r.get('probe_share'))} | {r.get('steps', [])} | {kinds} | "
            f"{r.get('pick', '')[:80]} |"
        )
    lines += ["", *_medians(records)]
    path.write_text("\n".join(lines) + "\n")


def _medians(records: list[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r.get("label", ""), r["commit"], r["cpu_hog"]), []).append(r)
    lines = [
        "| label | commit | hog | runs | wall s median [min–max] | probe share median [min–max] "
        "| median steps per trial |",
        "|---|---|---|---|---|---|---|",
    ]
    for (label, commit, hog), runs in groups.items():
        walls = [r["wall_s"] for r in runs if _finite(r.get("wall_s"))] or [math.nan]
        shares = [r["probe_share"] for r in runs if _finite(r.get("probe_share"))]
        steps = [s for r in runs for s in r.get("steps", [])]
        share = (
            f"{_pct(statistics.median(shares))} [{_pct(min(shares))}–{_pct(max(shares))}]"
            if shares
            else "n/a"
        )
        lines.append(
            f"| {label} | {commit} | {'yes' if hog else 'no'} | {len(runs)} | "
            f"{_range(walls)} | {share} | "
            f"{statistics.median(steps) if steps else 'n/a'} |"
        )
    return lines


def _range(values: list[float]) -> str:
    if not all(_finite(v) for v in values):
        return "n/a"
    return f"{statistics.median(values):.0f} [{min(values):.0f}–{max(values):.0f}]"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _pct(value: Any) -> str:
    return f"{100 * value:.0f} %" if _finite(value) else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", type=Path, help="checkout(s) to run, in turn")
    parser.add_argument("--space", default="vit_space")
    parser.add_argument("--runs", type=int, default=1, help="rounds over every --code")
    parser.add_argument("--cpu-hog", action="store_true", help="a busy loop on CPU 0 meanwhile")
    parser.add_argument("--label", default="", help="a word kept with each record")
    parser.add_argument("extra", nargs="*", help="more search flags (after --)")
    args = parser.parse_args()
    codes = args.code or [ROOT]
    path = OUT / "cold_search.json"
    for _ in range(args.runs):
        for code in codes:  # interleaved: A, B, A, B ...
            record = run_once(code.resolve(), args.space, args.extra, hog=args.cpu_hog)
            record["label"] = args.label
            record["when"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
            record["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()}"
            print(json.dumps(record), flush=True)
            # Read again: another bench run may have appended meanwhile.
            records = json.loads(path.read_text()) if path.exists() else []
            records.append(record)
            path.write_text(json.dumps(records, indent=1) + "\n")  # kept as each run ends
            write_markdown(records, OUT / "cold_search.md")


if __name__ == "__main__":
    main()
