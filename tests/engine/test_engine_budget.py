"""The budget's unit: images (equal for every batch size, within one batch), or seconds, and the
evaluations at equal images or equal seconds, so trials are compared at equal cost."""

from __future__ import annotations

import math

import pytest
from engine_helpers import tiny

from tuner.engine import Progress, train
from tuner.errors import TunerError

IMAGES, EVERY = 96, 32


@pytest.mark.parametrize("batch", [8, 24])
def test_an_image_budget_trains_the_same_images_whatever_the_batch(batch: int) -> None:
    seen: list[Progress] = []
    config = tiny(batch_size=batch, img_size=16, steps=None, images=IMAGES, eval_every_images=EVERY)
    result = train(config, on_eval=seen.append)
    assert result.status == "ok"
    assert result.planned_steps == result.steps == math.ceil(IMAGES / batch)
    assert IMAGES <= result.images_seen < IMAGES + batch
    # The k-th evaluation comes at the first step past k x 32 images: equal for every batch.
    reported = [p.result.images_seen for p in seen]
    assert len(reported) == IMAGES // EVERY
    for k, images in enumerate(reported, start=1):
        assert k * EVERY <= images < k * EVERY + batch


def test_a_time_budget_evaluates_at_equal_seconds() -> None:
    seen: list[Progress] = []
    config = tiny(steps=None, time_budget_s=1.2, eval_every_s=0.4, batch_size=16, img_size=16)
    result = train(config, on_eval=seen.append)
    assert result.status == "ok" and result.planned_steps is None  # never starved by its budget
    assert result.train_time_s >= 1.2
    clocks = [p.result.train_time_s for p in seen]
    assert 1 <= len(clocks) <= 3 and clocks == sorted(clocks)
    for k, clock in enumerate(clocks, start=1):  # the k-th after k x 0.4 s of training at least
        assert clock >= k * 0.4
    assert seen[-1].result.val_accuracy == result.val_accuracy  # the end's evaluation, once


def test_step_limit_is_the_images_at_the_global_batch_rounded_up() -> None:
    config = tiny(batch_size=20, steps=None, images=IMAGES)
    assert config.step_limit() == 5 and config.step_limit(world_size=2) == 3
    assert config.replace(steps=3).step_limit() == 3  # the first limit ends the run
    assert tiny(steps=None, time_budget_s=1.0).step_limit() is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"eval_every_steps": 2, "eval_every_images": 64}, "are set together"),
        ({"eval_every_images": 64, "eval_every_s": 1.0}, "are set together"),
        ({"images": 0}, r"images=0 must be positive"),
        ({"eval_every_s": -1.0}, r"eval_every_s=-1.0 must be positive"),
        ({"steps": None, "images": None}, "give epochs, images, steps or time_budget_s"),
    ],
)
def test_a_bad_budget_is_one_line(changes: dict, message: str) -> None:
    with pytest.raises(TunerError, match=message) as error:
        tiny(**changes)
    assert "\n" not in str(error.value)


def test_the_evaluation_of_a_run_its_time_budget_cut_says_so() -> None:
    seen: list[Progress] = []
    capped = tiny(steps=None, images=100_000, time_budget_s=0.5, eval_every_images=10_000)
    result = train(capped.replace(batch_size=16, img_size=16), on_eval=seen.append)
    assert result.steps < result.planned_steps  # the cap cut it: a search calls it starved
    # Its one evaluation (at the cut, off the cadence) is flagged: no rung may judge it.
    assert [p.cut for p in seen] == [True]
    full: list[Progress] = []
    train(
        tiny(steps=None, images=IMAGES, eval_every_images=EVERY, img_size=16), on_eval=full.append
    )
    assert full and not any(p.cut for p in full)
