"""A data-parallel CPU trial's fixed cost (issue 40), and where its time goes once its worker
group is up (issue 29).

Three arms, each ``--rounds`` times, interleaved (a busy machine's drift hits every arm alike):

- ``ray-2``: one search of ``--trials`` trials (one at a time) on 2 gloo ranks (the trial's
  process and a pooled rank worker, tuner.tune.rank_pool; before that change, a Ray Train
  worker group per trial);
- ``tune-1``: the same trials on one worker, plain Tune trials;
- ``torchrun-2``: the same run on 2 gloo workers under ``torchrun -m tuner train``: no Ray, no
  report, no checkpoint (the floor a worker group could reach).

``--before PATH`` adds ``ray-2`` and ``tune-1`` arms that run another checkout of tuner (its
folder first on ``PYTHONPATH``): a change measured against the code before it, interleaved.

**Fixed cost** is a trial's time (Tune's ``time_total_s``, the trial's driver from its start
to its end) less its training loop (the engine's ``wall_time_s`` less its ``setup_time_s``):
the worker group's start (``group_start`` in the trial's phases.jsonl: from the trial's ask
for its ranks to rank 0's run), the engine's setup (data, model) and what follows the loop. The
first trial of a search and the later ones are shown apart (a later one reuses the ranks and
the process the first started). A one-process trial's process and imports come before Tune's
clock starts: its fixed cost is its setup alone, and a later one's is ~0 s (its process, data
and model reused), so a later trial's ratio is taken to the one-process first trial's.

For each run, from the engine's own clocks on rank 0 (``RunResult``): its wall time from the
start of its training loop (the group up, data and model built: ``setup_time_s``, reported
apart) to its end, and in it the training steps (``train_time_s``), the evaluations
(``eval_time_s``) and the search's report and checkpoint after each evaluation
(``report_time_s``). **Outside** is what is left besides training and evaluation (the issue's
goal: at most 10 %): the reports and checkpoints, the loader's own measurement after
training. The workload is the issue's: a micro ViT whose steps take milliseconds, evaluated
(and so reported) every 10 steps; checkpointed at the first evaluation and the end.

    PYTHONPATH=. python bench/data_parallel_overhead.py --rounds 3 [--before ../main-old]

(``--ray-poll`` sets Ray Train's controller poll in the environment: it reaches only a
``--before`` checkout that still ran Ray Train.)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tuner.workloads import MICRO_VIT

OUT = Path(__file__).resolve().parents[1] / "reports" / "benchmarks"
RUN = {**MICRO_VIT, "data": "digits", "img_size": 16, "batch_size": 16, "epochs": None,
       "steps": 60, "eval_every_steps": 10, "max_eval_batches": 1, "warmup_steps": 2}  # fmt: skip
_SPACE = f"""
WORKLOADS = {{"cpu": {RUN!r}}}
NUM_SAMPLES = {{"cpu": 1}}
def space(trial, *, cuda):
    trial.suggest_int("variant", 0, 10**9)  # the same run: only the trial differs
    return {{}}
"""
SHARES = ("train", "eval", "report", "outside")
FIXED = ("time_total_s", "group_start_s", "setup_s", "loop_s", "fixed_s")
_NONE_S = 0.25  # a fixed cost below this is none: no ratio to it


def _search(
    folder: Path, world_size: int, poll: str, *, trials: int, checkout: str | None = None
) -> list[dict[str, Any]]:
    """The trials' final reports in the order they ran, from a real search of ``trials``."""
    space = folder / "one_trial_space.py"
    space.write_text(_SPACE)
    name = f"w{world_size}-{poll}-{len(list(folder.iterdir()))}"
    env = {k: v for k, v in os.environ.items() if k != "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"}
    if poll != "tuner":
        env["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] = poll
    if checkout is not None:  # that checkout's tuner, in the search and its Ray workers
        env["PYTHONPATH"] = os.pathsep.join([checkout, env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "tuner", "search", str(space), "--name", name,
               "--storage", str(folder), "--world-size", str(world_size), "--cpus-per-trial",
               "1", "--speed-repeats", "0", "--remeasure-top", "0", "--effects-repeats", "0",
               "--no-report", "--no-early-stopping", "--num-samples", str(trials),
               "--concurrency", "1"]  # fmt: skip
    began = time.perf_counter()
    # From the run folder, not the checkout: ``-m`` puts the working folder first on the path.
    subprocess.run(command, env=env, cwd=folder, check=True, capture_output=True, timeout=900)
    search_s = time.perf_counter() - began
    finals = [_final(result) for result in (folder / name).glob("*/result.json")]
    finals.sort(key=lambda final: final["trial_started_unix_s"])
    return [{**final, "search_s": search_s} for final in finals]


def _final(result: Path) -> dict[str, Any]:
    """A trial's final report, with its worker group's start from its phase log."""
    lines = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
    phases = result.parent / "phases.jsonl"
    text = phases.read_text() if phases.exists() else ""
    parts = [json.loads(line) for line in text.splitlines() if line.strip()]
    starts = [p.get("seconds", 0.0) for p in parts if p.get("part") == "group_start"]
    return {**lines[-1], "group_start_s": sum(starts)}


def _torchrun(folder: Path) -> dict[str, Any]:
    """rank 0's result of the same run under torchrun (no Ray)."""
    config = folder / "run.json"
    config.write_text(json.dumps({**RUN, "device": "cpu"}))
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--master-port", str(_free_port()), "-m", "tuner", "train", "--config",
               str(config), "--json"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True, timeout=600)
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _shares(final: dict[str, Any]) -> dict[str, float]:
    """Shares of the run's time from its training loop's start (its setup left out) to its end."""
    wall = final["wall_time_s"] - final["setup_time_s"]
    train, evaluation = final["train_time_s"], final["eval_time_s"]
    return {"wall_s": wall, "setup_s": final["setup_time_s"], "train": train / wall,
            "eval": evaluation / wall, "report": final["report_time_s"] / wall,
            "outside": 1 - (train + evaluation) / wall,
            "images_per_second": final["images_per_second"]}  # fmt: skip


def _fixed(final: dict[str, Any]) -> dict[str, float]:
    """A trial's time, its worker group's start, the engine's setup, its training loop (the
    engine's run from the loop's start) and the fixed cost: the trial's time less the loop."""
    loop = final["wall_time_s"] - final["setup_time_s"]
    return {"time_total_s": final["time_total_s"], "group_start_s": final["group_start_s"],
            "setup_s": final["setup_time_s"], "loop_s": loop,
            "fixed_s": final["time_total_s"] - loop, "search_s": final["search_s"]}  # fmt: skip


def _arms(ray_polls: list[str], trials: int, before: str | None) -> dict[str, Any]:
    arms: dict[str, Any] = {
        "ray-2" if p == "tuner" else f"ray-2 poll {p}": (
            lambda f, p=p: _search(f, 2, p, trials=trials)
        )
        for p in ray_polls
    }
    arms["tune-1"] = lambda f: _search(f, 1, "tuner", trials=trials)
    if before is not None:
        arms["ray-2 before"] = lambda f: _search(f, 2, "tuner", trials=trials, checkout=before)
        arms["tune-1 before"] = lambda f: _search(f, 1, "tuner", trials=trials, checkout=before)
    arms["torchrun-2"] = lambda f: [_torchrun(f)]
    return arms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=2, help="trials per search (default 2)")
    parser.add_argument("--ray-poll", action="append", help="also Ray's default poll: 2.0")
    parser.add_argument("--before", help="another checkout of tuner, measured interleaved")
    args = parser.parse_args()
    arms = _arms(["tuner", *(args.ray_poll or [])], args.trials, args.before)
    seen: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in arms}
    load_at_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for name, run in arms.items():
                seen[name].append(run(Path(folder)))
    load = {"start": load_at_start, "end": os.getloadavg()}
    record = {"rounds": args.rounds, "trials": args.trials, "run": RUN, "load_average": load}
    shares, record["arms"] = _shares_table(seen)
    fixed, record["fixed_cost"] = _fixed_table(seen)
    print(shares, fixed, sep="\n\n")
    OUT.joinpath("dp_overhead_cpu.json").write_text(json.dumps(record, indent=2) + "\n")
    OUT.joinpath("dp_overhead_cpu.md").write_text(
        "# Data-parallel trials: fixed cost, and where the time goes once the group is up\n\n"
        f"`PYTHONPATH=. python bench/data_parallel_overhead.py {' '.join(sys.argv[1:])}` "
        "(medians [min-max] of the interleaved rounds, 2 CPU cores; load average "
        f"{load['start'][0]:.1f} at the start, {load['end'][0]:.1f} at the end).\n\n"
        "## Fixed cost\n\nSeconds per trial; fixed cost = the trial's time (Tune's "
        "`time_total_s`) less its training loop; the trials of one search ran one at a time. "
        "A one-process trial's process start and imports precede Tune's clock; a later "
        "one's fixed cost is ~0 s, so a later trial's ratio is to the first one-process "
        "trial's.\n\n"
        f"{fixed}\n\n## Once the group is up\n\nShares of the run's wall time on rank 0, "
        f"every trial.\n\n{shares}\n"
    )


def _shares_table(seen: dict[str, list[list[dict[str, Any]]]]) -> tuple[str, dict[str, Any]]:
    lines = ["| arm | images/s | setup s | then wall s | training | evaluation "
             "| report + checkpoint | outside |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    arms = {}
    for name, rounds in seen.items():
        runs = [_shares(final) for finals in rounds for final in finals]
        keys = ("images_per_second", "setup_s", "wall_s", *SHARES)
        cells = {k: [r[k] for r in runs] for k in keys}
        arms[name] = cells
        rate, setup, wall = (statistics.median(cells[k]) for k in keys[:3])
        parts = [_median_range(cells[k]) for k in SHARES]
        lines.append(
            f"| {name} | {rate:,.0f} | {setup:.2f} | {wall:.2f} | " + " | ".join(parts) + " |"
        )
    return "\n".join(lines), arms


def _fixed_table(seen: dict[str, list[list[dict[str, Any]]]]) -> tuple[str, dict[str, Any]]:
    """Per arm of searches: its first trials and its later ones, apart."""
    lines = ["| arm | trials | trial s | group start s | engine setup s | training loop s "
             "| fixed cost s | / tune-1's | search s |", "|---" * 9 + "|"]  # fmt: skip
    cells: dict[str, dict[str, dict[str, list[float]]]] = {}
    for name, rounds in seen.items():
        if name == "torchrun-2":
            continue
        for which, picked in (
            ("first", [r[:1] for r in rounds]),
            ("later", [r[1:] for r in rounds]),
        ):
            runs = [_fixed(final) for finals in picked for final in finals]
            if runs:
                keys = (*FIXED, "search_s")
                cells.setdefault(name, {})[which] = {k: [r[k] for r in runs] for k in keys}
    for name, by_which in cells.items():
        base = cells.get("tune-1 before" if name.endswith("before") else "tune-1", {})
        for which, got in by_which.items():
            one = statistics.median(base.get(which, {}).get("fixed_s") or [0.0])
            against = ""
            if one <= _NONE_S:  # a later one-process trial reuses its process and data: ~0 s
                one = statistics.median(base.get("first", {}).get("fixed_s") or [0.0])
                against = " of first"
            ratio = statistics.median(got["fixed_s"]) / one if one > _NONE_S else None
            row = [_seconds(got[k]) for k in FIXED]
            times = f"{ratio:.1f}x{against}" if ratio is not None else "-"
            search = _seconds(got["search_s"])
            lines.append(f"| {name} | {which} | " + " | ".join(row) + f" | {times} | {search} |")
    return "\n".join(lines), cells


def _seconds(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.0%} [{min(values):.0%}-{max(values):.0%}]"


if __name__ == "__main__":
    main()
