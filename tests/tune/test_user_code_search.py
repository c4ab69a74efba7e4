"""User code in a real search: a failure that only shows inside a trial is recorded as errored,
with the user's traceback in the trial's folder (the fast sibling: the engine's own test of the
same failure, tests/engine/test_engine_usercode.py)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import tuner
from tuner.experiment import RUN_TRACEBACK_FILE

SPACE = Path(__file__).parent / "spaces" / "failing_user_space.py"


@pytest.mark.slow
@pytest.mark.parametrize(
    "world_size", [1, pytest.param(2, marks=pytest.mark.machine, id="data-parallel")]
)
def test_a_failure_inside_a_trial_is_errored_with_the_users_traceback(
    tmp_path: Path, world_size: int
) -> None:
    """The search also leaves the process's signal handlers as it found them (Ray's and Tune's
    own put back: tests/tune/test_driver_signals.py has the fast half)."""
    handlers = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (9, 19)}
    result = tuner.search(
        str(SPACE),
        name="fails",
        world_size=world_size,
        cpus_per_trial=1,
        storage=str(tmp_path),
        report=False,
        remeasure_top=0,
        effects_repeats=0,
        speed_repeats=0,
    )
    (kind,) = result.trials["kind"].tolist()
    assert kind == "errored" and result.usable == 0
    now = {s: signal.getsignal(s) for s in handlers}
    assert now == handlers, {signal.Signals(s).name: h for s, h in now.items() if handlers[s] != h}
    (kept,) = (tmp_path / "fails").glob(f"*/{RUN_TRACEBACK_FILE}")
    text = kept.read_text()
    assert str(SPACE) in text and "my forward failed at step 3" in text
