"""The words of the recommendation, for every verdict its intervals can give (issue 19's rule:
"faster", "beyond noise" and "best" only where an interval excludes no change; a tie named a
tie). Built from the verdicts themselves, so that every branch is read, including those a real
search on a quiet machine rarely reaches (tests/report/test_honest.py reads real experiments)."""

from __future__ import annotations

import math

import pytest

from tuner.answer import Margin, PairVerdict
from tuner.report.claims import _fastest_why, _one_pick_why
from tuner.stats import Change

NAN = math.nan
SPEED = {  # verdict -> a throughput ratio fast/slow with that verdict
    "none": Change(1.2, NAN, NAN, 0, 1.0),
    "uninformative": Change(1.2, 0.1, 9.0, 2, 1.0),
    "tie": Change(1.04, 0.97, 1.11, 6, 1.0),
    "separated": Change(1.2, 1.1, 1.3, 6, 1.0),
}
ACCURACY = {  # fast minus slow accuracy
    "no interval": Change(-0.03, NAN, NAN, 0, 0.0),
    "tie": Change(-0.01, -0.02, 0.01, 100, 0.0),
    "separated": Change(-0.03, -0.05, -0.01, 100, 0.0),
}


# Tied on speed with the slower one more accurate beyond noise, the more accurate one is the
# recommendation (Answer.recommended): the fastest is then never the pick these words explain.
CASES = [(s, a) for s in SPEED for a in ACCURACY if (s, a) != ("tie", "separated")]


@pytest.mark.parametrize(("speed", "accuracy"), CASES)
def test_the_fastest_pick_claims_only_what_its_intervals_show(speed: str, accuracy: str) -> None:
    assert SPEED[speed].verdict == speed
    why = _fastest_why(PairVerdict("f", "s", SPEED[speed], ACCURACY[accuracy]))
    assert ("beyond noise" in why) == (speed == "separated")
    assert ("a tie on speed" in why) == (speed == "tie")
    assert ("no verdict on speed" in why) == (speed in ("none", "uninformative"))
    if speed in ("uninformative", "tie", "separated"):
        assert f"{SPEED[speed].value:.2f}x" in why  # the interval it rests on is shown
    if speed == "tie":  # as fast: the accuracy decides, or says it cannot
        said = {"tie": "a tie on both", "no interval": "more accurate, with no interval: no"}
        assert said[accuracy] in why
    if speed == "separated":
        assert ("as accurate as the most accurate" in why) == (accuracy == "tie")
        said = "`s` is 3.0 accuracy points " in why and " more accurate" in why
        assert said == (accuracy != "tie")  # with its interval (issue 48), or "no interval"
        assert ("no interval" in why) == (accuracy == "no interval")


def test_one_pick_ahead_on_both_says_beyond_noise_only_where_both_intervals_do() -> None:
    ahead = Change(1.2, 1.1, 1.3, 6, 1.0)
    level = Change(1.02, 0.95, 1.1, 6, 1.0)
    points = Change(0.02, 0.01, 0.03, 100, 0.0)
    both = {"images_per_second": Margin("b", ahead), "val_accuracy": Margin("b", points)}
    assert _one_pick_why(both, 2) == ("the best on both throughput and accuracy, beyond noise")
    speed_tie = {**both, "images_per_second": Margin("b", level)}
    why = _one_pick_why(speed_tie, 2)
    assert why == (
        "the fastest and the most accurate as measured, but not beyond noise on speed (the "
        "margins are below)"
    )
    assert _one_pick_why({}, 3) == (
        "the best of 3 on the search's objective as measured (no interval against the next)"
    )
    assert _one_pick_why({}, 1) == (
        "the only configuration that can be picked (nothing was compared with it)"
    )
