"""The digits read from scikit-learn's shipped file are scikit-learn's digits, and reading them
imports no scikit-learn (tuner/engine/digits.py says why)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from sklearn.datasets import load_digits as sklearn_load_digits

from tuner.engine.digits import load_digits


def test_the_digits_are_scikit_learn_s_own() -> None:
    images, target = load_digits()
    theirs = sklearn_load_digits()
    assert images.shape == (1797, 8, 8)
    np.testing.assert_array_equal(images, theirs.images)
    np.testing.assert_array_equal(target, theirs.target)
    assert target.dtype == theirs.target.dtype and images.dtype == theirs.images.dtype


def test_without_the_shipped_file_scikit_learn_s_own_loader_serves(monkeypatch) -> None:
    import tuner.engine.digits as digits

    monkeypatch.setattr(digits, "_FILE", ("datasets", "data", "moved.csv.gz"))
    images, target = load_digits()
    theirs = sklearn_load_digits()
    np.testing.assert_array_equal(images, theirs.images)
    np.testing.assert_array_equal(target, theirs.target)


def test_a_digits_run_s_data_imports_no_scikit_learn() -> None:
    probe = (
        "import sys\n"
        "from tuner.config import TrainConfig\n"
        "from tuner.engine.data import load_ahead\n"
        "load_ahead(TrainConfig(model='test_resnet', data='digits', img_size=16))\n"
        "print(sorted(m for m in ('sklearn', 'scipy.stats') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
