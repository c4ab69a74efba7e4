"""Where a data-parallel CPU trial's time goes once its worker group is up (issue 29).

Three arms, each ``--rounds`` times, interleaved (a busy machine's drift hits every arm alike):

- ``ray-2``: one search of one trial on 2 gloo workers through Ray Train (tuner's 0.1 s
  controller poll; ``--ray-poll 2.0`` adds an arm at Ray's default);
- ``tune-1``: the same trial on one worker, a plain Tune trial;
- ``torchrun-2``: the same run on 2 gloo workers under ``torchrun -m tuner train``: no Ray, no
  report, no checkpoint (the floor a worker group could reach).

For each run, from the engine's own clocks on rank 0 (``RunResult``): its wall time from the
start of its training loop (the group up, data and model built: ``setup_time_s``, reported
apart) to its end, and in it the training steps (``train_time_s``), the evaluations
(``eval_time_s``) and the search's report and checkpoint after each evaluation
(``report_time_s``). **Outside** is what is left besides training and evaluation (the issue's
goal: at most 10 %): the reports and checkpoints, the loader's own measurement after
training. The workload is the issue's: a micro ViT whose steps take milliseconds, evaluated
(and so reported) every 10 steps; checkpointed at the first evaluation and the end.

    PYTHONPATH=. python bench/data_parallel_overhead.py --rounds 3
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
from pathlib import Path
from typing import Any

from tuner.tune.ddp_trial import _POLL_EVERY_S
from tuner.workloads import MICRO_VIT

OUT = Path(__file__).resolve().parents[1] / "reports" / "benchmarks"
RUN = {**MICRO_VIT, "data": "digits", "img_size": 16, "batch_size": 16, "epochs": None,
       "steps": 60, "eval_every_steps": 10, "max_eval_batches": 1, "warmup_steps": 2}  # fmt: skip
_SPACE = f"""
WORKLOADS = {{"cpu": {RUN!r}}}
NUM_SAMPLES = {{"cpu": 1}}
def space(trial, *, cuda):
    trial.suggest_categorical("variant", ["only"])
    return {{}}
"""
SHARES = ("train", "eval", "report", "outside")


def _search(folder: Path, world_size: int, poll: str) -> dict[str, Any]:
    """The trial's final report, from a real one-trial search."""
    space = folder / "one_trial_space.py"
    space.write_text(_SPACE)
    name = f"w{world_size}-{poll}-{len(list(folder.iterdir()))}"
    env = {k: v for k, v in os.environ.items() if k != "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"}
    if poll != "tuner":
        env["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] = poll
    command = [sys.executable, "-m", "tuner", "search", str(space), "--name", name,
               "--storage", str(folder), "--world-size", str(world_size), "--cpus-per-trial",
               "1", "--speed-repeats", "0", "--remeasure-top", "0", "--effects-repeats", "0",
               "--no-report", "--no-early-stopping"]  # fmt: skip
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=900)
    (result,) = (folder / name).glob("*/result.json")
    lines = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
    return lines[-1]


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


def _arms(ray_polls: list[str]) -> dict[str, Any]:
    label = {"tuner": f"tuner's {_POLL_EVERY_S}"}
    arms: dict[str, Any] = {
        f"ray-2 poll {label.get(p, p)}": (lambda f, p=p: _search(f, 2, p)) for p in ray_polls
    }
    arms["tune-1"] = lambda f: _search(f, 1, "tuner")
    arms["torchrun-2"] = _torchrun
    return arms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ray-poll", action="append", help="also Ray's default poll: 2.0")
    args = parser.parse_args()
    arms = _arms(["tuner", *(args.ray_poll or [])])
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for name, run in arms.items():
                seen[name].append(_shares(run(Path(folder))))
    record = {"rounds": args.rounds, "run": RUN, "load_average": os.getloadavg(), "arms": {}}
    lines = ["| arm | images/s | setup s | then wall s | training | evaluation "
             "| report + checkpoint | outside |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, runs in seen.items():
        keys = ("images_per_second", "setup_s", "wall_s", *SHARES)
        cells = {k: [r[k] for r in runs] for k in keys}
        record["arms"][name] = cells
        rate, setup, wall = (statistics.median(cells[k]) for k in keys[:3])
        shares = [_median_range(cells[k]) for k in SHARES]
        lines.append(
            f"| {name} | {rate:,.0f} | {setup:.2f} | {wall:.2f} | " + " | ".join(shares) + " |"
        )
    table = "\n".join(lines)
    print(table)
    OUT.joinpath("dp_overhead_cpu.json").write_text(json.dumps(record, indent=2) + "\n")
    OUT.joinpath("dp_overhead_cpu.md").write_text(
        "# Data-parallel trials: where the time goes once the group is up\n\n"
        f"`PYTHONPATH=. python bench/data_parallel_overhead.py {' '.join(sys.argv[1:])}` "
        "(medians [min-max] of the interleaved rounds; shares of the run's wall time on rank 0, "
        f"2 CPU cores; load average at the end {os.getloadavg()[0]:.1f}).\n\n{table}\n"
    )


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.0%} [{min(values):.0%}-{max(values):.0%}]"


if __name__ == "__main__":
    main()
