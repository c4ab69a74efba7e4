from __future__ import annotations

import pytest
import torch
from engine_helpers import tiny

from tuner.engine import train
from tuner.engine.data import build_data, normalize
from tuner.engine.prefetch import CudaPrefetcher

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_prefetch_falls_back_to_the_plain_loader_on_cpu() -> None:
    result = train(tiny(prefetch="cuda_stream", device="cpu"))
    assert result.status == "ok" and result.effective["prefetch"] == "off"
    assert any("cuda_stream needs CUDA" in note for note in result.notes)
    with pytest.raises(ValueError, match="CUDA"):
        CudaPrefetcher([], torch.device("cpu"), (0.5,), (0.5,))


@cuda
def test_prefetcher_yields_the_same_normalized_batches_as_the_plain_path() -> None:
    device = torch.device("cuda")
    data = build_data(tiny(pin_memory=True, device="cuda"), device)
    loader = data.train_loader
    prefetcher = CudaPrefetcher(loader, device, data.mean, data.std, channels_last=True)
    mean = torch.tensor(data.mean).view(1, -1, 1, 1)
    std = torch.tensor(data.std).view(1, -1, 1, 1)
    data.generator.manual_seed(0)
    plain = [(normalize(x, mean, std), y) for x, y in loader]
    data.generator.manual_seed(0)
    fetched = [(x.cpu(), y.cpu()) for x, y in prefetcher]
    assert len(fetched) == len(plain) == len(prefetcher)
    for (xa, ya), (xb, yb) in zip(plain, fetched, strict=True):
        torch.testing.assert_close(xa, xb)
        assert torch.equal(ya, yb)


@cuda
def test_prefetcher_reserved_memory_stays_flat_across_epochs() -> None:
    device = torch.device("cuda")
    data = build_data(tiny(pin_memory=True, device="cuda", batch_size=64), device)
    prefetcher = CudaPrefetcher(data.train_loader, device, data.mean, data.std)
    weight = torch.randn(3 * 32 * 32, 10, device=device)
    reserved = []
    for _ in range(6):
        for x, _y in prefetcher:
            (x.flatten(1) @ weight).sum().item()  # compute that reads the batch
        torch.cuda.synchronize()
        reserved.append(torch.cuda.memory_reserved(device))
    # A leaking prefetcher (a new side stream per epoch) grows every epoch; this one must not.
    assert max(reserved[1:]) <= reserved[1]


@cuda
def test_prefetch_run_reports_cuda_memory_and_stays_flat() -> None:
    reserved: list[int] = []
    result = train(
        tiny(
            prefetch="cuda_stream",
            pin_memory=True,
            non_blocking=True,
            device="cuda",
            steps=None,
            epochs=4,
            batch_size=256,
        ),
        on_eval=lambda p: reserved.append(torch.cuda.memory_reserved()),
    )
    assert result.status == "ok" and result.effective["prefetch"] == "cuda_stream"
    assert result.memory_kind == "cuda_max_memory_reserved"
    assert result.peak_memory_allocated_bytes <= result.peak_memory_reserved_bytes
    assert max(reserved[1:]) <= reserved[1]
