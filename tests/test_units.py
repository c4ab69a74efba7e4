"""``tuner.units``: the one reading of reported numbers and the one way values become JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tuner.units import as_number, finite_or_none, json_ready


def test_json_ready_makes_any_report_strict_json() -> None:
    report = {
        "rate": np.float32(2.5),
        "steps": np.int64(3),
        "nan": math.nan,
        "nested": {1: [math.inf, (np.float64("nan"), -math.inf)]},
        "where": Path("/tmp/x"),
    }
    ready = json_ready(report)
    assert json.loads(json.dumps(ready, allow_nan=False)) == {
        "rate": 2.5, "steps": 3, "nan": None, "nested": {"1": [None, [None, None]]},
        "where": "/tmp/x"}  # fmt: skip


def test_reported_numbers_read_alike_whatever_spells_them_missing() -> None:
    # Text and flags are not numbers, even when they look like one.
    values = (None, "1.5", True, math.inf, 1.5, np.float64(2))
    assert [finite_or_none(v) for v in values] == [None, None, None, None, 1.5, 2.0]
    assert math.isnan(as_number(object()))
