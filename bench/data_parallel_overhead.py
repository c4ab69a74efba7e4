"""Where a data-parallel CPU trial's time goes once its worker group is up (issue 29): one real
search of one trial, on 2 gloo workers through Ray Train, and the same trial on one worker (a
plain Tune trial), each ``--rounds`` times interleaved. Between a trial's first and last report
it measures the wall time and the training time (the steps in between at the run's measured
steady-state step time); the rest is outside training (evaluation, Ray's waits). The workload is
the issue's: a micro ViT whose steps take milliseconds, evaluated every 10 steps. ``--poll``
sets Ray Train's controller poll (RAY_TRAIN_HEALTH_CHECK_INTERVAL_S): 2.0 is Ray's default,
``tuner`` leaves tuner's 0.1 s.

    PYTHONPATH=. python bench/data_parallel_overhead.py --rounds 2 --poll 2.0 --poll tuner
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_SPACE = """
from tuner.workloads import MICRO_VIT
WORKLOADS = {"cpu": {**MICRO_VIT, "data": "digits", "img_size": 16, "batch_size": 16,
                     "epochs": None, "steps": 60, "eval_every_steps": 10, "max_eval_batches": 1,
                     "warmup_steps": 2}}
NUM_SAMPLES = {"cpu": 1}
def space(trial, *, cuda):
    trial.suggest_categorical("variant", ["only"])
    return {}
"""


def _trial(folder: Path, world_size: int, poll: str) -> dict[str, float]:
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
    first, last = lines[0], lines[-1]
    wall = last["reported_unix_s"] - first["reported_unix_s"]
    # Training: the steps between the reports at the run's own steady-state step time (the
    # engine's clocks run on while a report waits, so they cannot tell the wait apart).
    training = (last["step"] - first["step"]) * last["step_time_s"]
    return {"wall_s": wall, "train_s": training, "outside": 1 - training / wall,
            "steps": last["step"] - first["step"], "reports": len(lines)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--poll", action="append", help="2.0 (Ray's default) or tuner (0.1)")
    args = parser.parse_args()
    arms = [(2, poll) for poll in args.poll or ["2.0", "tuner"]] + [(1, "tuner")]
    seen: dict[tuple[int, str], list[dict[str, float]]] = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):  # interleaved: a busy machine's drift hits every arm alike
            for workers, poll in arms:
                seen[(workers, poll)].append(_trial(Path(folder), workers, poll))
    for (workers, poll), runs in seen.items():
        outside = [r["outside"] for r in runs]
        each = " / ".join(f"{r['wall_s']:.1f} s wall, {r['train_s']:.2f} s training" for r in runs)
        print(
            f"{workers} worker(s), poll {poll:5s}: outside training "
            f"{statistics.median(outside):.0%} [{min(outside):.0%}-{max(outside):.0%}] of the "
            f"time between first and last report; "
            f"{each}"
            f" ({runs[0]['steps']:.0f} steps, {runs[0]['reports']:.0f} reports)"
        )


if __name__ == "__main__":
    main()
