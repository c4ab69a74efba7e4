from __future__ import annotations

import pytest
import torch
from engine_helpers import tiny

from tuner.engine import train
from tuner.engine.data import build_data, normalize
from tuner.engine.prefetch import CudaPrefetcher

# Marked ``cuda``: skipped without a CUDA device (tests/engine/conftest.py); the GPU suite's
# cuda-tests stage runs them with ``pytest tests/engine -m cuda``.
EPOCHS = 6  # "flat across epochs" is judged over at least five epochs after the first


def test_prefetch_falls_back_to_the_plain_loader_on_cpu() -> None:
    result = train(tiny(prefetch="cuda_stream", device="cpu"))
    assert result.status == "ok" and result.effective["prefetch"] == "off"
    assert any("cuda_stream needs CUDA" in note for note in result.notes)
    with pytest.raises(ValueError, match="CUDA"):
        CudaPrefetcher([], torch.device("cpu"), (0.5,), (0.5,))


@pytest.mark.cuda
def test_prefetcher_yields_the_same_normalized_batches_as_the_plain_path() -> None:
    device = torch.device("cuda")
    data = build_data(tiny(pin_memory=True, device="cuda"), device)
    loader = data.train_loader
    prefetcher = CudaPrefetcher(loader, device, data.mean, data.std, channels_last=True)
    mean = torch.tensor(data.mean).view(1, -1, 1, 1)
    std = torch.tensor(data.std).view(1, -1, 1, 1)
    plain = [(normalize(x, mean, std), y) for x, y in loader]
    fetched = [(x.cpu(), y.cpu()) for x, y in prefetcher]
    assert len(fetched) == len(plain) == len(prefetcher)
    for (xa, ya), (xb, yb) in zip(plain, fetched, strict=True):
        torch.testing.assert_close(xa, xb)
        assert torch.equal(ya, yb)


@pytest.mark.cuda
def test_prefetcher_reserved_memory_stays_flat_across_epochs() -> None:
    device = torch.device("cuda")
    data = build_data(tiny(pin_memory=True, device="cuda", batch_size=64), device)
    prefetcher = CudaPrefetcher(data.train_loader, device, data.mean, data.std)
    weight = torch.randn(3 * 32 * 32, 10, device=device)
    reserved = []
    for _ in range(EPOCHS):
        for x, _y in prefetcher:
            (x.flatten(1) @ weight).sum().item()  # compute that reads the batch
        torch.cuda.synchronize()
        reserved.append(torch.cuda.memory_reserved(device))
    # A leaking prefetcher (a new side stream per epoch) grows every epoch; this one must not.
    assert max(reserved[1:]) <= reserved[1]


@pytest.mark.cuda
def test_prefetch_run_reports_cuda_memory_and_stays_flat() -> None:
    reserved: list[int] = []
    result = train(
        tiny(
            prefetch="cuda_stream",
            pin_memory=True,
            non_blocking=True,
            device="cuda",
            steps=None,
            epochs=EPOCHS,
            batch_size=256,
        ),
        on_eval=lambda p: reserved.append(torch.cuda.memory_reserved()),
    )
    assert result.status == "ok" and result.effective["prefetch"] == "cuda_stream"
    assert len(reserved) == EPOCHS
    assert result.memory_kind == "cuda_max_memory_reserved"
    assert result.peak_memory_allocated_bytes <= result.peak_memory_reserved_bytes
    assert max(reserved[1:]) <= reserved[1]


@pytest.mark.cuda
@pytest.mark.parametrize(
    "path",
    [
        {"non_blocking": True, "pin_memory": True},
        {"prefetch": "cuda_stream", "non_blocking": True, "pin_memory": True},
    ],
    ids=["non_blocking", "prefetch"],
)
def test_the_data_path_techniques_train_the_same_model(path: dict) -> None:
    # Same seed, same batches, same normalization math: only where the copy happens differs.
    config = tiny(device="cuda", steps=12, warmup_steps=1)
    plain, fast = train(config), train(config.replace(**path))
    assert plain.status == fast.status == "ok", (plain.error, fast.error)
    assert all(fast.effective[k] == v for k, v in path.items())
    assert [s for s, _ in fast.train_loss_curve] == [s for s, _ in plain.train_loss_curve]
    for (_, a), (_, b) in zip(plain.train_loss_curve, fast.train_loss_curve, strict=True):
        assert b == pytest.approx(a, rel=1e-3)
    assert fast.val_accuracy == pytest.approx(plain.val_accuracy, abs=0.02)
