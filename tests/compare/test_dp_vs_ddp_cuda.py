"""DataParallel vs DDP in ``tuner ablate``, measured: needs 2 or more CUDA GPUs (skipped
elsewhere; on a CPU the pair is left out with a note, tested in test_ablation.py)."""

from __future__ import annotations

import pytest
import torch

from tuner.compare import ablation
from tuner.config import TrainConfig
from tuner.workloads import MICRO_VIT

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")


def test_dataparallel_and_ddp_train_the_same_global_batch_over_every_gpu() -> None:
    gpus = torch.cuda.device_count()
    base = TrainConfig(**MICRO_VIT, data="synthetic", synthetic_size=512, num_classes=10,
                       img_size=32, batch_size=16, epochs=None, steps=12, warmup_steps=2,
                       max_eval_batches=2)  # fmt: skip
    planned, left_out = ablation.plan_ablation(base, cuda=True, amp="fp16", gpus=gpus)
    arms = [arm for arm in planned if arm.group == "data parallel"]
    assert [a.name for a in arms] == [f"DataParallel x{gpus}", f"DDP x{gpus}"]
    assert not any("DataParallel" in line for line in left_out)
    one, workers = (arm.measure(arm.config) for arm in arms)
    assert (one.status, one.world_size, one.global_batch_size) == ("ok", 1, gpus * 16)
    assert any(note.startswith(f"DataParallel over {gpus} GPUs") for note in one.notes)
    assert (workers.status, workers.world_size, workers.global_batch_size) == (
        "ok",
        gpus,
        gpus * 16,
    )
    assert one.effective["lr"] == workers.effective["lr"] == gpus * base.lr
    runs = ablation.run_ablation(arms, repeats=2)
    assert (runs["status"] == "ok").all(), runs[["arm", "status", "error"]]
    assert (runs["images_per_second"] > 0).all()
    summary = ablation.summarize(runs, arms).set_index("arm")
    assert summary.at[f"DDP x{gpus}", "throughput_ratio_vs_reference"] > 0
