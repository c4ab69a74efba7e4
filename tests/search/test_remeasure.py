"""When re-measured candidates count as separated (choosing them: tests/test_answer.py)."""

from __future__ import annotations

from tuner.search.remeasure import separated


def test_separated_needs_every_adjacent_pair_apart() -> None:
    apart = [[100.0, 104.0, 98.0], [200.0, 190.0, 210.0]]
    assert separated(apart)
    close = [[100.0, 104.0, 98.0], [101.0, 99.0, 103.0], [200.0, 190.0, 210.0]]
    assert not separated(close)
