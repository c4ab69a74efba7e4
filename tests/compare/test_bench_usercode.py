"""tuner bench on the user's own model and data: MFU's FLOPs counted on the user's own input
shape (one channel here) and classes."""

from __future__ import annotations

from pathlib import Path

import torch

from tuner.compare.bench import _forward_flops
from tuner.config import TrainConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_space.py"


def test_forward_flops_of_a_one_channel_user_model() -> None:
    own = {"model": f"{EXAMPLE}:build_model", "data": f"{EXAMPLE}:build_data"}
    narrow = _forward_flops(
        TrainConfig(**own, img_size=16, model_kwargs={"width": 8}), torch.device("cpu")
    )
    wide = _forward_flops(
        TrainConfig(**own, img_size=16, model_kwargs={"width": 16}), torch.device("cpu")
    )
    assert 0 < narrow < wide
