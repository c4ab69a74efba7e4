"""Stage ``data-parallel``: the warm rank pool's group on this machine's GPUs (issue 49).

1. **group**: this process joins a world-size-1 process group as a trial's rank 0 does
   (:func:`tuner.tune.rank_pool.join_group`: nccl on a GPU, gloo in a dry run; the TCP store on
   loopback), all-reduces one tensor on its device, and records the variables it saw and where
   the store listened.
2. **trial** (where 2 GPUs exist; in a dry run, 2 gloo ranks on the CPU): a real
   ``tuner search smoke_space --world-size 2`` trial, one GPU per rank; the environment each rank
   saw (rank variables, ``CUDA_VISIBLE_DEVICES`` shared by a node's ranks, nccl's error
   handling) is read from the trial's phase log, where rank 0 writes it.

``data-parallel.json`` holds both; the stage fails when a part fails or a rank's variables are
not what Ray Train would set (tuner.tune.rank_layout).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from tuner.experiment import PHASES_FILE

from ._context import StageContext, StageResult, run_stoppable

__all__ = ["run"]

_TRIAL_FLAGS = ["--num-samples", "1", "--set", "images=2560", "--speed-repeats", "0",
                "--remeasure-top", "0", "--effects-repeats", "0", "--no-report"]  # fmt: skip


def run(ctx: StageContext) -> StageResult:
    group = _group(ctx)
    ctx.log(f"  group: {group['backend']} world size 1, all-reduce {group['all_reduce']}")
    trial = _trial(ctx)
    found = {"group": group, "trial": trial}
    ctx.write_json("data-parallel.json", found)
    problems = _problems(group, trial, cuda=ctx.cuda)
    ok = not problems
    ranks = trial.get("ranks") or []
    summary = (
        f"{group['backend']} group of 1 all-reduced {group['all_reduce']}, store on "
        f"{','.join(group['listening'])}; trial at world size {len(ranks) or '-'}: "
        f"{trial.get('status', 'not run')}"
    )
    return StageResult(ok, summary + (f"; {'; '.join(problems)}" if problems else ""))


def _group(ctx: StageContext) -> dict[str, Any]:
    """A world-size-1 group joined as rank 0 joins a pool's: what it saw, where it listened."""
    import psutil
    import torch
    import torch.distributed as dist

    from tuner.tune.rank_layout import LAYOUT_VARIABLES, LOOPBACK
    from tuner.tune.rank_pool import join_group

    backend = "nccl" if ctx.cuda else "gloo"
    listener = socket.create_server((LOOPBACK, 0))
    port = int(listener.getsockname()[1])
    join_group(backend=backend, host=LOOPBACK, port=port, rank=0, size=1, listener=listener)
    try:
        device = torch.device("cuda", 0) if ctx.cuda else torch.device("cpu")
        tensor = torch.ones(4, device=device)
        dist.all_reduce(tensor)
        listening = sorted(
            {
                c.laddr.ip
                for c in psutil.Process().net_connections("inet")
                if c.status == psutil.CONN_LISTEN and c.laddr.port == port
            }
        )
        env = {k: v for k, v in os.environ.items() if k in LAYOUT_VARIABLES}
        return {"backend": backend, "all_reduce": float(tensor.sum()), "listening": listening,
                "env": env}  # fmt: skip
    finally:
        dist.destroy_process_group()


def _trial(ctx: StageContext) -> dict[str, Any]:
    import torch

    gpus = torch.cuda.device_count() if ctx.cuda else 0
    if ctx.cuda and gpus < 2:
        return {"status": f"skipped: {gpus} GPU (2 needed)"}
    resources = ["--gpus-per-trial", "1", "--cpus-per-trial", "1"] if ctx.cuda else [
        "--cpus-per-trial", "1"]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="dp-stage-") as storage:
        command = [sys.executable, "-m", "tuner", "search", "smoke_space", "--world-size", "2",
                   *resources, *_TRIAL_FLAGS, "--name", "dp", "--storage", storage]  # fmt: skip
        code = run_stoppable(command, ctx.path("trial.log"), timeout=max(30.0, ctx.remaining_s()))
        phases = list(Path(storage).glob(f"dp/*/{PHASES_FILE}"))
        starts = [
            json.loads(line)
            for path in phases
            for line in path.read_text().splitlines()
            if '"group_start"' in line
        ]
    ranks = starts[0].get("ranks", []) if starts else []
    return {"status": "ok" if code == 0 else f"exit {code}", "ranks": ranks}


def _problems(group: dict[str, Any], trial: dict[str, Any], *, cuda: bool) -> list[str]:
    problems = []
    if group["all_reduce"] != 4.0:
        problems.append(f"the all-reduce gave {group['all_reduce']}, not 4")
    if not group["listening"] or any("127.0.0.1" not in ip for ip in group["listening"]):
        problems.append(f"the store listened on {group['listening']}, not loopback only")
    if cuda and group["env"].get("TORCH_NCCL_ASYNC_ERROR_HANDLING") is None:
        problems.append("nccl's async error handling was not set")
    status = str(trial.get("status", ""))
    if status.startswith("skipped"):
        return problems
    if status != "ok":
        problems.append(f"the trial ended with {status} (trial.log)")
    ranks = trial.get("ranks") or []
    if [r.get("RANK") for r in ranks] != ["0", "1"]:
        problems.append(f"the ranks saw RANK {[r.get('RANK') for r in ranks]}")
    elif [r.get("LOCAL_RANK") for r in ranks] != ["0", "1"]:
        problems.append("LOCAL_RANK is not 0, 1 on one node")
    if cuda and len({r.get("CUDA_VISIBLE_DEVICES") for r in ranks}) != 1:
        problems.append("the node's ranks did not share CUDA_VISIBLE_DEVICES")
    return problems
