"""The one interleaving loop and the one pairing by repeat (no training: plain callables)."""

from __future__ import annotations

import pandas as pd
import pytest

from tuner.compare import Arm, interleave, paired, run_interleaved
from tuner.config import TrainConfig
from tuner.errors import TunerError


def test_arms_alternate_after_a_dropped_warmup() -> None:
    calls: list[str] = []
    seen: list[tuple[int, str, str]] = []

    def measure(arm: str) -> str:
        calls.append(arm)
        return arm.upper()

    done = interleave(
        ["a", "b"],
        repeats=3,
        measure=measure,
        on_run=lambda r, arm, result: seen.append((r, arm, result)),
        warmup=["a"],
    )
    assert done == 3
    assert calls == ["a", "a", "b", "a", "b", "a", "b"]  # the warm-up first, never recorded
    assert seen == [(r, x, x.upper()) for r in range(3) for x in "ab"]


def test_keep_going_stops_before_a_round_and_none_drops_an_arm() -> None:
    asked: list[int] = []

    def keep_going(repeat: int, slowest: float) -> bool:
        asked.append(repeat)
        assert slowest >= 0
        return repeat < 2

    seen: list[tuple[int, str]] = []
    done = interleave(
        ["ok", "broken"],
        repeats=5,
        measure=lambda arm: None if arm == "broken" else arm,
        on_run=lambda r, arm, _: seen.append((r, arm)),
        keep_going=keep_going,
    )
    assert done == 2 and asked == [0, 1, 2]
    assert seen == [(0, "ok"), (1, "ok")]


class _Result:
    def __init__(self, ips: float) -> None:
        self.ips = ips

    def to_dict(self) -> dict[str, object]:
        return {"status": "ok", "images_per_second": self.ips}


def test_run_interleaved_keeps_a_row_per_run_and_drops_what_cannot_be_built() -> None:
    base = TrainConfig(device="cpu")
    arms = [Arm("a", "g", base), Arm("b", "g", base.replace(batch_size=48), {}, "a")]

    def measure(config: TrainConfig) -> _Result:
        if config.batch_size == 48:
            raise TunerError("cannot build")
        return _Result(100.0)

    runs = run_interleaved(arms, repeats=2, measure=measure, drop_invalid=True, warmup=False)
    assert list(runs["arm"]) == ["a", "a"] and list(runs["repeat"]) == [0, 1]
    assert runs.attrs["dropped"] == ["b: cannot build"] and runs.attrs["repeats_done"] == 2
    with pytest.raises(TunerError, match="cannot build"):
        run_interleaved(arms, repeats=1, measure=measure, warmup=False)
    with pytest.raises(TunerError, match="at least 1"):
        run_interleaved(arms, repeats=0, measure=measure)


def test_a_time_limit_ends_the_repeats_but_never_the_first() -> None:
    base = TrainConfig(device="cpu")
    runs = run_interleaved(
        [Arm("a", "g", base)], repeats=4, measure=lambda c: _Result(1.0), time_limit_s=0.0
    )
    assert runs.attrs["repeats_done"] == 1 and len(runs) == 1


def test_pairs_are_the_repeats_both_arms_finished() -> None:
    runs = pd.DataFrame(
        {
            "arm": ["a", "b", "a", "b", "a", "b"],
            "repeat": [0, 0, 1, 1, 2, 2],
            "status": ["ok", "ok", "ok", "oom", "ok", "ok"],
            "images_per_second": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    )
    a, b = paired(runs, "a", "b")
    assert list(a.index) == list(b.index) == [0, 2]
    assert list(b["images_per_second"]) == [2.0, 6.0]
    empty_a, empty_b = paired(runs.iloc[:0], "a", "b")
    assert empty_a.empty and empty_b.empty
