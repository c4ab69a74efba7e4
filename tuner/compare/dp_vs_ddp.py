"""DataParallel vs DDP over one machine's GPUs, arms of ``tuner ablate``: the same global batch
(N x ``batch_size``) and peak lr, each in fresh processes (no shared CUDA contexts or allocator):
one process ``train(config, dataparallel=True)``, or N under torchrun; images/s global in both.
"""

from __future__ import annotations

import json
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.compare._arms import Arm
from tuner.compare._process import child_env, run_json
from tuner.config import TrainConfig

if TYPE_CHECKING:
    from tuner.engine import RunResult

__all__ = ["GROUP", "SKIP", "arms", "left_out_note", "setup_line"]

GROUP = "data parallel"
SKIP = "data_parallel"  # its name in ``tuner ablate --skip``
_TIMEOUT_S = 3600  # one run; a worker stuck in a collective must not hang the ablation


def left_out_note(*, cuda: bool, gpus: int) -> str | None:
    """Why the pair cannot run here (one line), or ``None`` when it can."""
    if gpus < 2:
        return f"DataParallel vs DDP: needs 2 or more CUDA GPUs; this machine has {gpus}"
    if not cuda:
        return f"DataParallel vs DDP: needs the CUDA GPUs; this run is on the CPU ({gpus} GPUs)"
    return None


def arms(base: TrainConfig, *, gpus: int) -> list[Arm]:
    """DataParallel over ``gpus`` GPUs (the reference), then DDP over the same GPUs."""
    per_worker = base.replace(device="cuda")
    whole = {"batch_size": gpus * base.batch_size, "lr": gpus * base.lr}
    first = f"DataParallel x{gpus}"
    ddp = partial(_ddp_run, gpus=gpus)
    return [
        Arm(first, GROUP, per_worker.replace(**whole), whole, measure=_dataparallel_run),
        Arm(f"DDP x{gpus}", GROUP, per_worker, {"world_size": gpus}, first, first, measure=ddp),
    ]


def setup_line(gpus: int) -> str:
    """What the pair measured, for the ablation report's setup."""
    return (
        f"DataParallel vs DDP over {gpus} GPUs: the same global batch and peak lr; images/s of "
        "all GPUs together; each run in fresh processes (DDP: one per GPU, torchrun); peak "
        "memory is GPU 0's for DataParallel (where it gathers), the max over workers for DDP"
    )


def _dataparallel_run(config: TrainConfig) -> RunResult:
    return _run([sys.executable, "-m", __spec__.name, json.dumps(config.to_dict())])


def _ddp_run(config: TrainConfig, *, gpus: int) -> RunResult:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        path.write_text(json.dumps(config.to_dict()))
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        train = ["-m", "tuner", "train", "--config", str(path), "--json"]
        return _run([*launch, f"--nproc-per-node={gpus}", *train])


def _run(command: list[str]) -> RunResult:
    """One run in fresh processes (its last line a RunResult's JSON); a failure is a result."""
    from tuner.engine import RunResult

    measured = run_json(command, env=child_env(), timeout=_TIMEOUT_S, limit=500)
    if isinstance(measured, str):
        return RunResult(status="error", error=measured)
    return RunResult(**measured)


def _main(argv: list[str]) -> None:
    """``python -m tuner.compare.dp_vs_ddp CONFIG_JSON``: one DataParallel run, its JSON."""
    from tuner.engine import train

    result = train(TrainConfig.from_params(json.loads(argv[0])), dataparallel=True)
    print(result.to_json(), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
