"""What the test suite costs, tier by tier, from a fresh clone as CI runs it (issue 27).

For one commit of the repository: each tier's wall time (the README's test command without its
install, then the long tier `.ci/run` runs after it), the 30 slowest tests of each, the number
of tests and of test functions, and, with ``--coverage``, the line coverage of ``tuner/`` over
the whole suite, subprocesses included (coverage.py's ``patch = subprocess``: the CLI children,
pytest-xdist's workers and the Ray workers they start; a process killed with SIGKILL writes no
data, so what only such a process ran counts as missed). The record goes into
``reports/benchmarks/test_tiers.json`` under ``--label`` (other labels are kept, so a before
and an after sit side by side) and is rendered to ``test_tiers.md``.

    .venv/bin/python bench/tier_bench.py --label after              # the tiers' times
    .venv/bin/python bench/tier_bench.py --label after --coverage --no-timing
    .venv/bin/python bench/tier_bench.py --label busy --coverage --no-timing --cpu-hog
    .venv/bin/python bench/tier_bench.py --label cpu --cpu-per-test --no-timing
    .venv/bin/python bench/tier_bench.py --label before --commit 2e17d5b --coverage

The clone is tested with this checkout's virtual environment (the install is not timed),
its own code first on ``PYTHONPATH``. The timed runs and the coverage run are separate runs:
coverage slows a run, so its times are not the tiers' times.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_per_test import ENV as CPU_PER_TEST_ENV  # a script beside this one, not a package
from cpu_per_test import spent_seconds

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "reports" / "benchmarks" / "test_tiers.json"
_SUMMARY = re.compile(r"^=*\s*(?P<text>\d+ (passed|failed).*) in [\d.]+s")
_DURATION = re.compile(r"^(?P<s>[\d.]+)s (?P<when>call|setup|teardown)\s+(?P<test>\S+)")


def tier_commands(clone: Path) -> dict[str, str]:
    """The README's test command (its install left out) and the long tier from .ci/run."""
    readme = (clone / "README.md").read_text()
    block = readme.split("<!-- test-command -->", 1)[1].split("```")[1]
    fast = block.strip().splitlines()[-1].split("&&")[-1].strip()
    long = re.search(r"<!-- long-tier-command -->\s*`([^`]+)`", readme)
    return {"fast": fast, "long": long.group(1) if long else ""}


def run_tier(clone: Path, command: str, env: dict[str, str]) -> dict[str, Any]:
    """One tier's wall time, its pytest summary and its 30 slowest test phases."""
    argv = [sys.executable, *shlex.split(command)[1:], "--durations=30", "-p", "no:cacheprovider"]
    cpu_before = psutil.cpu_times()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True)
    wall_s = time.perf_counter() - start
    cpu_after = psutil.cpu_times()
    lines = done.stdout.splitlines()
    summary = next((m["text"] for line in lines if (m := _SUMMARY.match(line))), "")
    slowest = [
        {"seconds": float(m["s"]), "when": m["when"], "test": m["test"]}
        for line in lines
        if (m := _DURATION.match(line))
    ]
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-2000:], file=sys.stderr)
    return {
        "command": command,
        "wall_s": round(wall_s, 1),
        # The machine's CPU time busy over the run (every process, ours or not): near 1, the
        # tier is bound by the cores, and only less work (not more parallel work) shortens it.
        "cpu_busy_fraction": round(_busy(cpu_before, cpu_after), 3),
        "returncode": done.returncode,
        "summary": summary,
        "slowest": slowest,
    }


def _busy(before: Any, after: Any) -> float:
    """The share of the machine's CPU time between two ``psutil.cpu_times()`` not idle."""
    total, busy = spent_seconds(before, after)
    return busy / total if total else 0.0


def count_tests(clone: Path, env: dict[str, str]) -> dict[str, int]:
    """Collected test items (parametrized cases apart) and ``def test_`` functions."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n0"],
        cwd=clone, env=env, capture_output=True, text=True,
    )  # fmt: skip
    items = sum("::" in line for line in collected.stdout.splitlines())
    functions = 0
    for file in (clone / "tests").rglob("test_*.py"):
        tree = ast.parse(file.read_text())
        functions += sum(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test_")
            for node in ast.walk(tree)
        )
    return {"test_items": items, "test_functions": functions}


def coverage_of(clone: Path, commands: dict[str, str], env: dict[str, str]) -> dict[str, Any]:
    """Line coverage of tuner/ over every tier, subprocesses included."""
    data = clone / ".coverage-bench"
    rc = clone / ".coveragerc-bench"
    rc.write_text(
        f"[run]\nsource = {clone / 'tuner'}\nparallel = true\npatch = subprocess, _exit\n"
        f"sigterm = true\ndata_file = {data}\n"
    )
    results = {}
    for tier, command in commands.items():
        if not command:
            continue
        pytest_args = shlex.split(command)[3:]  # after `python -m pytest`
        done = subprocess.run(
            [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest",
             *pytest_args, "-q", "-p", "no:cacheprovider"],
            cwd=clone, env=env, capture_output=True, text=True,
        )  # fmt: skip
        lines = done.stdout.splitlines()
        results[tier] = next((m["text"] for line in lines if (m := _SUMMARY.match(line))), "")
        failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
        results[tier + "_failed"] = failed
        if done.returncode != 0:  # why, in the bench's own output (the record keeps one line)
            print(done.stdout[-20000:], done.stderr[-4000:], file=sys.stderr)
    coverage = [sys.executable, "-m", "coverage"]
    subprocess.run([*coverage, "combine", f"--rcfile={rc}"], cwd=clone, env=env, check=True)
    report = subprocess.run(
        [*coverage, "json", f"--rcfile={rc}", "-o", "-"],
        cwd=clone, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    measured = json.loads(report.stdout)
    totals = measured["totals"]
    return {
        "runs": results,  # each tier's pytest summary under coverage, and what failed
        "percent_covered": round(totals["percent_covered"], 2),
        "covered_lines": totals["covered_lines"],
        "num_statements": totals["num_statements"],
        # What the next change can aim at: each file's lines no test ran.
        # Files outside the clone (a process that imported this checkout's tuner through the
        # editable install instead) are left out of this list, not out of the totals.
        "missing_lines": {
            str(Path(name).resolve().relative_to(clone.resolve())): info["missing_lines"]
            for name, info in sorted(measured["files"].items())
            if info["missing_lines"] and Path(name).resolve().is_relative_to(clone.resolve())
        },
    }


PLUGIN = Path(__file__).with_name("cpu_per_test.py")
BACKGROUND_S = 30.0


def background_cpu(seconds: float = BACKGROUND_S) -> float:
    """The machine's busy CPU-seconds per second while no test runs: every test's count holds
    this much of what else the machine did."""
    before = psutil.cpu_times()
    time.sleep(seconds)
    return spent_seconds(before, psutil.cpu_times())[1] / seconds


def cpu_per_test(clone: Path, commands: dict[str, str], env: dict[str, str]) -> dict[str, Any]:
    """Each tier in one process (``-n0``, one test at a time): every test's machine-wide busy
    CPU-seconds (bench/cpu_per_test.py), and the machine's background before and after it."""
    plugin_dir = clone.parent / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    shutil.copy(PLUGIN, plugin_dir)
    measured: dict[str, Any] = {}
    for tier, command in commands.items():
        if not command:
            continue
        per_test = clone.parent / f"cpu-{tier}.jsonl"
        tier_env = {
            **env,
            "PYTHONPATH": f"{env['PYTHONPATH']}{os.pathsep}{plugin_dir}",
            CPU_PER_TEST_ENV: str(per_test),
        }
        before = background_cpu()
        run = run_tier(clone, f"{command} -n0 -p cpu_per_test", tier_env)
        background = [round(before, 3), round(background_cpu(), 3)]
        kept = ("command", "wall_s", "cpu_busy_fraction", "returncode", "summary")
        measured[tier] = {
            **{k: run[k] for k in kept},
            "background_cpu_s_per_s": background,
            **_cpu_summary(_read_lines(per_test)),
        }
    return measured


def _read_lines(per_test: Path) -> list[dict[str, Any]]:
    """The plugin's lines: none when the tier ended before its first test; a line a killed run
    left half-written is left out."""
    lines = per_test.read_text().splitlines() if per_test.exists() else []
    tests = []
    for line in lines:
        with contextlib.suppress(json.JSONDecodeError):
            tests.append(json.loads(line))
    return tests


def _cpu_summary(tests: list[dict[str, Any]]) -> dict[str, Any]:
    """A tier's CPU-seconds: in all, the 30 costliest tests, and each test file's sum."""
    by_file: dict[str, float] = {}
    for test in tests:
        file = test["test"].split("::")[0]
        by_file[file] = by_file.get(file, 0.0) + test["cpu_s"]
    return {
        "cpu_s": round(sum(t["cpu_s"] for t in tests), 1),
        "tests_wall_s": round(sum(t["wall_s"] for t in tests), 1),
        "tests_timed": len(tests),
        "costliest": sorted(tests, key=lambda t: -t["cpu_s"])[:30],
        "by_file": {f: round(c, 1) for f, c in sorted(by_file.items(), key=lambda fc: -fc[1])},
    }


def measure(
    commit: str,
    *,
    timing: bool,
    with_coverage: bool,
    tiers: tuple[str, ...] = ("fast", "long"),
    cpu: bool = False,
) -> dict[str, Any]:
    """The tiers' times (``timing``), the coverage and/or each test's CPU-seconds (``cpu``) of a
    fresh clone of ``commit``."""
    with tempfile.TemporaryDirectory(prefix="tiers-") as tmp:
        clone = Path(tmp) / "tuner"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], check=True)
        env = {**os.environ, "PYTHONPATH": str(clone), "CI": "true"}
        commands = {k: c for k, c in tier_commands(clone).items() if k in tiers}
        head = ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"]
        record: dict[str, Any] = {
            "commit": subprocess.run(head, capture_output=True, text=True).stdout.strip(),
            "cores": len(os.sched_getaffinity(0)),  # the CPUs this run may use
            **count_tests(clone, env),
        }
        if timing:
            record["tiers"] = {k: run_tier(clone, c, env) for k, c in commands.items() if c}
        if with_coverage:
            record["coverage"] = coverage_of(clone, commands, env)
        if cpu:
            record["cpu_per_test"] = cpu_per_test(clone, commands, env)
        return record


def to_markdown(records: dict[str, dict[str, Any]]) -> str:
    lines = [
        "# Test tiers: wall time, slowest tests, coverage",
        "",
        "Written by `bench/tier_bench.py` (a fresh clone, the install not timed).",
        "",
    ]
    for label, rec in records.items():
        lines += [f"## {label} (commit {rec['commit']}, {rec['cores']} cores)", ""]
        if rec.get("note"):
            lines += [rec["note"], ""]
        if rec.get("cpu_hog"):
            lines += [f"Run {rec['cpu_hog']}.", ""]
        if rec.get("tiers"):
            lines += [
                "| tier | command | wall | CPU busy | result |",
                "|---|---|---|---|---|",
            ]
        for tier, run in rec.get("tiers", {}).items():
            busy = run.get("cpu_busy_fraction")
            busy_text = f"{busy:.0%}" if busy is not None else "n/a"
            lines.append(
                f"| {tier} | `{run['command']}` | {run['wall_s'] / 60:.1f} min | {busy_text} | "
                f"{run['summary']} |"
            )
        lines.append("")
        lines.append(f"Tests: {rec['test_items']} collected, {rec['test_functions']} functions.")
        if "coverage" in rec:
            lines += _coverage_lines(rec["coverage"])
        for tier, run in rec.get("tiers", {}).items():
            lines += [
                "",
                f"Slowest of the {tier} tier:",
                "",
                "| s | phase | test |",
                "|---|---|---|",
            ]
            lines += [
                f"| {d['seconds']:.1f} | {d['when']} | `{d['test']}` |" for d in run["slowest"]
            ]
        if "cpu_per_test" in rec:
            lines += _cpu_lines(rec["cpu_per_test"], rec["cores"])
        lines.append("")
    return "\n".join(lines)


def _coverage_lines(cov: dict[str, Any]) -> list[str]:
    """The coverage, and how each tier ended under it (a run beside a hog shows it passed)."""
    lines = [
        f"Line coverage of tuner/: {cov['percent_covered']} % "
        f"({cov['covered_lines']} of {cov['num_statements']} statements)."
    ]
    runs = cov.get("runs", {})
    for tier in ("fast", "long"):
        if tier in runs:
            failed = runs.get(tier + "_failed") or []
            lines.append(f"Under coverage, the {tier} tier: {runs[tier] or 'no summary'}.")
            lines += [f"- {line}" for line in failed]
    return lines


def _cpu_lines(cpu: dict[str, Any], cores: int) -> list[str]:
    """What the tests cost in CPU-seconds, and the wall time that work takes on ``cores``."""
    lines = [
        "",
        "CPU-seconds per test: each tier in one process (`-n0`), each test's machine-wide busy "
        "CPU-seconds from its setup to its teardown, every process it started counted "
        "([bench/cpu_per_test.py](../../bench/cpu_per_test.py)). The background is the "
        "machine's busy CPU-seconds per second with no test running, before and after the tier; "
        "the larger is taken off the tests' sum.",
        "",
        "| tier | wall, one process | CPU-s of its tests | background, CPU-s/s | their own work, "
        "CPU-s | result |",
        "|---|---|---|---|---|---|",
    ]
    net = 0.0
    for tier, run in cpu.items():
        background = run["background_cpu_s_per_s"]
        own = max(run["cpu_s"] - max(background) * run["tests_wall_s"], 0.0)
        net += own
        lines.append(
            f"| {tier} | {run['wall_s'] / 60:.1f} min | {run['cpu_s']:.0f} | "
            f"{background[0]:.2f}, {background[1]:.2f} | {own:.0f} | {run['summary']} |"
        )
    lines += [
        "",
        f"The tests' own work: {net:.0f} CPU-s, {net / cores / 60:.1f} min on {cores} cores kept "
        "fully busy. An estimate, not a bound: a search held open by its time budget, and Ray's "
        "daemons, spend CPU for as long as they run, whatever the cores they find.",
    ]
    for tier, run in cpu.items():
        lines += [
            "",
            f"Costliest of the {tier} tier:",
            "",
            "| CPU-s | wall s | test |",
            "|---|---|---|",
        ]
        lines += [
            f"| {t['cpu_s']:.1f} | {t['wall_s']:.1f} | `{t['test']}` |" for t in run["costliest"]
        ]
        lines += [
            "",
            f"The {tier} tier by file (15 costliest):",
            "",
            "| CPU-s | file |",
            "|---|---|",
        ]
        lines += [f"| {c:.1f} | `{f}` |" for f, c in list(run["by_file"].items())[:15]]
    return lines


HOG_TEXT = "beside one busy loop pinned to one CPU (`taskset -c N`) for the whole run"


@contextlib.contextmanager
def cpu_hog(on: bool) -> Iterator[None]:
    """A process spinning on one CPU for the block (the suite must pass on a busy machine), ended
    by its PID after it."""
    if not on:
        yield
        return
    if shutil.which("taskset") is None:
        raise SystemExit("--cpu-hog needs taskset (util-linux) to pin the busy loop to one CPU")
    cpu = min(os.sched_getaffinity(0))
    hog = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"])
    time.sleep(1)
    if hog.poll() is not None:
        raise SystemExit(f"the busy loop on CPU {cpu} ended at once (exit {hog.returncode})")
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="the record's name, e.g. before / after")
    parser.add_argument("--commit", default="HEAD", help="the commit to clone and test")
    parser.add_argument("--coverage", action="store_true", help="also measure line coverage")
    parser.add_argument("--no-timing", action="store_true", help="no timed (both-core) runs")
    parser.add_argument(
        "--cpu-per-test",
        action="store_true",
        help="also run each tier in one process and count every test's CPU-seconds",
    )
    parser.add_argument(
        "--tier", choices=("fast", "long"), action="append", help="only this tier (repeatable)"
    )
    parser.add_argument(
        "--cpu-hog", action="store_true", help="run beside a busy loop pinned to one CPU (issue 27)"
    )
    args = parser.parse_args()
    records = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    with cpu_hog(args.cpu_hog):
        measured = measure(
            args.commit,
            timing=not args.no_timing,
            with_coverage=args.coverage,
            tiers=tuple(args.tier or ("fast", "long")),
            cpu=args.cpu_per_test,
        )
    if args.cpu_hog:
        measured["cpu_hog"] = HOG_TEXT
    kept = records.get(args.label, {})
    if kept.get("commit") != measured["commit"] or kept.get("cpu_hog") != measured.get("cpu_hog"):
        kept = {}  # another commit or another load: nothing of the old record stands beside it
    merged = {**kept, **measured}
    for key in ("tiers", "cpu_per_test"):  # one tier at a time adds up
        if tiers := {**kept.get(key, {}), **measured.get(key, {})}:
            merged[key] = tiers
    records[args.label] = merged
    RECORD.write_text(json.dumps(records, indent=2) + "\n")
    RECORD.with_suffix(".md").write_text(to_markdown(records))
    print(RECORD.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
