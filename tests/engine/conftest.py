"""The ``cuda`` marker: a test that needs a CUDA device, skipped without one.

``python -m bench.gpu_suite cuda-tests`` runs ``pytest tests/engine -m cuda`` on a GPU, where
none of them may skip.
"""

from __future__ import annotations

import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cuda: needs a CUDA device (skipped without one; the GPU suite runs them)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)
