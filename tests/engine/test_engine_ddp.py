"""Data-parallel runs on CPU (gloo, 2 processes): the same engine code as one process.

Each test pays a process-group start-up (two fresh interpreters importing torch and timm), so
there are two: the weights test and the torchrun command.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from engine_helpers import tiny

from tuner.config import TrainConfig
from tuner.engine import train

# The hybrid ViT normalizes with GroupNorm and LayerNorm (per image, unlike BatchNorm's
# per-shard statistics) and has no dropout, so 2 workers at batch b are 1 worker at 2b.
STEPS, BATCH, LR = 4, 16, 1e-3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _final_weights(config: TrainConfig) -> tuple[dict[str, torch.Tensor], Any]:
    states: list[dict] = []
    result = train(config, on_eval=lambda p: states.append(p.state_dict()))
    return states[-1]["model"], result


def _worker(rank: int, port: int, params: dict[str, Any], out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=2)
    try:
        weights, result = _final_weights(TrainConfig(**params))
        if rank == 0:
            torch.save({"model": weights, "result": result.to_dict()}, out)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.machine
def test_two_workers_at_batch_b_train_as_one_worker_at_2b(tmp_path: Path) -> None:
    common = dict(steps=STEPS, warmup_steps=1, max_eval_batches=None, seed=3)
    # lr is per batch_size (the per-256 rule): 2 workers at LR train at 2 x LR, as one at 2b.
    two = tiny(**common, batch_size=BATCH, lr=LR)
    out = tmp_path / "rank0.pt"
    mp.spawn(_worker, args=(_free_port(), two.to_dict(), str(out)), nprocs=2, join=True)
    saved = torch.load(out, weights_only=False)
    torch.set_num_threads(1)
    weights, one = _final_weights(tiny(**common, batch_size=2 * BATCH, lr=2 * LR))
    ddp = saved["result"]
    assert ddp["status"] == "ok" and ddp["world_size"] == 2 and ddp["global_batch_size"] == 32
    assert ddp["steps"] == one.steps == STEPS and ddp["images_seen"] == one.images_seen
    for name, value in weights.items():  # gradients averaged over the shards
        torch.testing.assert_close(saved["model"][name], value, atol=1e-5, rtol=1e-4)
    # The whole validation set (359 digits), each worker scoring its share.
    assert ddp["val_images"] == one.val_images == 359
    assert abs(ddp["val_accuracy"] - one.val_accuracy) <= 1 / 359
    assert ddp["effective"]["lr"] == one.effective["lr"] == 2 * LR
    assert ddp["effective"]["batch_size"] == one.effective["batch_size"] == 2 * BATCH


@pytest.mark.slow
@pytest.mark.machine
def test_torchrun_trains_data_parallel_and_rank_0_prints_the_json(tmp_path: Path) -> None:
    flags = ["--model-kwargs", json.dumps(tiny().model_kwargs), "--img-size", "32",
             "--epochs", "none", "--steps", "3", "--warmup-steps", "1", "--batch-size", "16",
             "--max-eval-batches", "2", "--device", "cpu"]  # fmt: skip
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--master-port", str(_free_port()), "-m", "tuner", "train", "--data", "digits",
               "--json", *flags]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # rank 0 alone prints
    result = json.loads(lines[0])
    assert result["status"] == "ok" and result["world_size"] == 2
    assert result["global_batch_size"] == 32 and result["images_per_second"] > 0
    assert result["val_images"] == 32  # max_eval_batches=2 in all, as one process scores
