"""scikit-learn's 8x8 digits (the default workload's data), read from the gzipped CSV it
ships: ``sklearn.datasets.load_digits`` imports scipy.stats, 2.5-4.5 s of CPU in every process
that loads them; the CSV takes milliseconds (tests/engine/test_digits.py compares the numbers).
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
    """``images`` float64 ``[N, 8, 8]`` (0..16) and ``target``, as scikit-learn gives them."""
    path = _shipped_file()
    if path is None:  # scikit-learn in a zip, or a release that moved the file: its own loader
        return _through_scikit_learn()
    with gzip.open(path, mode="rt", encoding="utf-8") as text:
        data = np.loadtxt(text, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


def _shipped_file() -> Path | None:
    """The CSV's path, found without running scikit-learn's code (None: not a plain file)."""
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
