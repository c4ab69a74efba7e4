"""``tuner.units``: the one reading of reported numbers, the one way values become JSON, and the
one way a ratio and an interval are written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tuner.stats import median_interval
from tuner.units import as_number, finite_or_none, interval_text, json_ready, ratio_text


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


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ((1.0712, 1.011, 1.129), "1.07x [1.01–1.13]"),
        ((1.07, None, None), "1.07x"),
        ((1.07, float("nan"), 1.2), "1.07x"),  # one pair: no interval
        ((None,), "n/a"),
        ((float("nan"), 1.0, 2.0), "n/a"),
        # Issue 48: "0.80x [0.64–1.00] slower": a bound that is not 1 never prints as 1.
        ((0.80, 0.64, 0.9978), "0.80x [0.64–0.998]"),
        ((1.20, 1.0041, 1.5), "1.20x [1.004–1.50]"),
        ((1.0, 0.95, 1.0), "1.00x [0.95–1.00]"),  # 1 itself stays 1.00
    ],
)
def test_every_ratio_is_written_one_way(args: tuple, text: str) -> None:
    assert ratio_text(*args) == text


def test_intervals_use_one_dash_whatever_the_numbers() -> None:
    assert interval_text(-0.012, 0.004, "{:+.3f}".format) == "[-0.012–+0.004]"
    assert interval_text(None, 1.0) == ""
    assert median_interval([1.0, 2.0, 3.0]).format(".1f") == "2.0 [1.0–3.0]"


def test_one_duration_format_for_console_and_report() -> None:
    from tuner.units import duration_text

    assert [duration_text(s) for s in (0, 44.6, 60, 185, 3600, 4331)] == [
        "0s",
        "45s",
        "1m00s",
        "3m05s",
        "1h00m",
        "1h12m",
    ]
    assert duration_text(float("nan")) == "unknown" and duration_text(-3) == "0s"


def test_a_paired_change_s_bound_near_one_keeps_its_digits() -> None:
    """Issue 48: the effects table read "num_workers=1 0.80x [0.64–1.00] slower"."""
    from tuner.report.document import change_text

    row = {"r_ratio": 0.80, "r_ratio_low": 0.64, "r_ratio_high": 0.9978, "r_ratio_n": 6}
    assert change_text(row, "r_ratio") == "0.80x [0.64–0.998]"
