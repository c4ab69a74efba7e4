"""Numbers as reports hold them (``as_number``: the one reading of a missing number, whether
None, NaN, pd.NA or text), byte sizes for people, and the one way a ratio and an interval are
written (one dash, the en dash, so a negative bound never reads as a range)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tuner.errors import TunerError

__all__ = [
    "DASH",
    "MIB",
    "as_number",
    "duration_text",
    "finite_or_none",
    "format_bytes",
    "interval_text",
    "is_finite",
    "json_ready",
    "parse_memory_size",
    "plural",
    "ratio_bound_text",
    "ratio_text",
    "sum_or_none",
]

MIB = 2**20
GIB = 2**30
DASH = "–"  # between an interval's bounds, everywhere
_UNITS = {"": 1, "b": 1}  # then kb..tb (powers of 10) and kib..tib (of 2)
_UNITS |= {f"{p}b": 10 ** (3 * i) for i, p in enumerate("kmgt", 1)}
_UNITS |= {f"{p}ib": 2 ** (10 * i) for i, p in enumerate("kmgt", 1)}


def as_number(value: Any) -> float:
    """``value`` as a float; NaN when it is missing (None, pd.NA), text, a flag or no number."""
    if value is None or isinstance(value, str | bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def finite_or_none(value: Any) -> float | None:
    """A finite number, or None (what JSON and Optuna's attributes can store)."""
    number = as_number(value)
    return number if math.isfinite(number) else None


def is_finite(value: Any) -> bool:
    return math.isfinite(as_number(value))


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 pair``, ``3 pairs``, ``0 trials``: a count with its noun in the right number."""
    return f"{count:,} {noun if count == 1 else (nouns or noun + 's')}"


def sum_or_none(a: float | None, b: float | None) -> float | None:
    """``a + b``, a missing one counting 0; None when both are (seconds with no bound)."""
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


def json_ready(value: Any) -> Any:
    """NaN and infinities become ``None`` (JSON has no NaN), numpy scalars plain numbers, paths
    text, in nested mappings, lists and tuples."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def duration_text(seconds: float) -> str:
    """``45s``, ``3m05s``, ``1h12m``: how every console line and report tells a duration."""
    if not math.isfinite(seconds):
        return "unknown"
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def format_bytes(size: Any, *, digits: int = 1) -> str:
    """``1536 * 2**20`` -> ``"1.5 GiB"``, ``3e6`` -> ``"2.9 MiB"``;
    missing (None, NaN, pandas NA) -> ``"n/a"``."""
    try:
        size = float(size)  # also a pandas NA (TypeError) or an empty text (ValueError)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(size):
        return "n/a"
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", 2**10)):
        if abs(size) >= scale:
            return f"{size / scale:,.{digits}f} {unit}"
    return f"{int(size)} B"


def parse_memory_size(text: str) -> int:
    """``"20GiB"`` -> bytes. Accepts B, KB/MB/GB/TB (powers of 10) and KiB/MiB/GiB/TiB."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise TunerError(
            f"Memory size {text!r} is not understood; write e.g. 20GiB, 512MiB or 1.5GB."
        )
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise TunerError(f"Memory size {text!r} must be positive.")
    return size


def interval_text(low: Any, high: Any, show: Callable[[float], str] = "{:.2f}".format) -> str:
    """``[1.01–1.13]``; empty when either bound is missing (one measurement: no interval)."""
    if not (is_finite(low) and is_finite(high)):
        return ""
    return f"[{show(as_number(low))}{DASH}{show(as_number(high))}]"


def ratio_text(value: Any, low: Any = None, high: Any = None) -> str:
    """``1.07x [1.01–1.13]``; ``1.07x`` without an interval; ``n/a`` without a value. A bound
    that is not 1 but rounds onto it gets the digits that tell it from 1 (``0.80x
    [0.64–0.998]``): a reader judges "includes 1x" from what is printed."""
    if not is_finite(value):
        return "n/a"
    interval = interval_text(low, high, ratio_bound_text)
    return f"{as_number(value):.2f}x" + (f" {interval}" if interval else "")


def ratio_bound_text(value: float) -> str:
    """Two decimals, more (up to five) while a value other than 1 would print as 1.00."""
    digits = 2
    while digits < 5 and value != 1.0 and round(value, digits) == 1.0:
        digits += 1
    return f"{value:.{digits}f}"
