"""scikit-learn's embedded 8x8 handwritten digits, read from the file scikit-learn ships.

The default workload's data. ``sklearn.datasets.load_digits`` imports scikit-learn and with it
scipy.stats: 2.5-4.5 s of CPU in every process that loads the digits (the driver's checks, each
trial's process, each re-measurement's), on 2 cores a tenth of a short trial. The file is one
gzipped CSV (64 pixel columns of 0..16 levels, then the label); reading it takes milliseconds.
The numbers are scikit-learn's own: ``tests/engine/test_digits.py`` compares them.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

from tuner.errors import TunerError

__all__ = ["load_digits"]

_FILE = ("datasets", "data", "digits.csv.gz")  # inside the scikit-learn package


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 digits as ``images`` float64 ``[N, 8, 8]`` (0..16) and ``target`` int
    ``[N]``, as ``sklearn.datasets.load_digits()`` gives them."""
    path = _shipped_file()
    if path is None:  # scikit-learn in a zip, or a release that moved the file: its own loader
        return _through_scikit_learn()
    with gzip.open(path, mode="rt", encoding="utf-8") as text:
        data = np.loadtxt(text, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


def _shipped_file() -> Path | None:
    """The CSV's path, found without importing scikit-learn (``find_spec`` of a top-level
    package runs none of its code); None where it is not a plain file."""
    try:
        spec = importlib.util.find_spec("sklearn")
    except (ImportError, ValueError):  # a module object without a spec, say
        return None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder, *_FILE)
        if path.is_file():
            return path
    return None


def _through_scikit_learn() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits as sklearn_load_digits
    except ImportError:
        raise TunerError(
            "data=digits needs scikit-learn, which this environment lacks; "
            "install it: pip install scikit-learn"
        ) from None
    digits = sklearn_load_digits()
    return digits.images, digits.target
