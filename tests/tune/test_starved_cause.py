"""What cut a starved trial short of the steps its budget holds (``starved_by``), from real
numbers: the speed its probes measured, else the speed it trained at."""

from __future__ import annotations

from tuner.engine import RunResult
from tuner.speed import SpeedChoice
from tuner.tune.trainable import TrialContext, _TrialRun
from tuner.tune.trials_actor import NullStore

PLANNED = 50  # the steps its image budget holds


def _trial(plain_ips: float | None) -> _TrialRun:
    context = TrialContext(
        max_memory_bytes=None,
        probe_steps=5,
        threads=1,
        device="cpu",
        search_only=(),
        speed_repeats=1,
        actor_namespace="",
    )
    run = _TrialRun(context, NullStore())
    if plain_ips is not None:
        run.counters.speed = SpeedChoice(settings={}, plain_images_per_second=plain_ips)
    return run


def _ended(steps: int, step_time_s: float | None) -> RunResult:
    config = {"batch_size": 256, "time_budget_s": 12.0}
    return RunResult(
        status="ok", steps=steps, planned_steps=PLANNED, step_time_s=step_time_s, config=config
    )


def test_a_trial_that_trained_its_budget_is_not_starved() -> None:
    assert _trial(900.0)._starved_by(_ended(PLANNED, 0.2)) == ""


def test_probed_speed_decides_between_budget_and_load() -> None:
    # 256 images at 900 img/s: 0.28 s a step, 14 s for 50 steps: more than the 12 s budget.
    assert _trial(900.0)._starved_by(_ended(40, 0.3)) == "budget"
    # At 2000 img/s the budget holds its steps: its steps ran slower than its probe's.
    assert _trial(2000.0)._starved_by(_ended(40, 0.3)) == "machine load"
    # Its steps ran no slower than its probe's (0.1 s against 0.128 s): not its steps' speed.
    assert _trial(2000.0)._starved_by(_ended(40, 0.1)).startswith("unknown (its steps ran no")


def test_unprobed_trial_goes_by_the_speed_it_trained() -> None:
    # No probe measured it: 0.3 s a step trained holds 40 of the 50 steps in 12 s.
    cause = _trial(None)._starved_by(_ended(40, 0.3))
    assert cause.startswith("budget (at the speed it trained")
    # Its own steps would have held its 50 steps (slow warm-up ate the budget): no cause claimed.
    assert _trial(None)._starved_by(_ended(40, 0.1)).startswith("unknown")


def test_a_run_the_feasibility_check_stopped_names_no_cause() -> None:
    """Issue 48: an every-kind search's over-budget trial (stopped by the feasibility check
    after its first steps) had starved_by "machine load (...)" on a busy machine: the memory
    check cut it, not its time, and its kind (over budget) says so."""
    run = _trial(2000.0)
    run.rejected = True
    assert run._starved_by(_ended(7, 0.3)) == ""
    run.rejected = False  # the same steps cut by the time: a cause
    assert run._starved_by(_ended(7, 0.3)) == "machine load"


def test_under_load_a_budget_short_at_the_probes_speed_is_budget_or_load() -> None:
    """Issue 48: beside a one-core hog, trials whose budget falls short of their steps at
    their probes' speed (as it does on a quiet machine) were said cut "by machine load". The
    load slows the probes too, so either could have: the cause says both, and the load."""
    run = _trial(900.0)  # 14 s for 50 steps at the probes' speed: over the 12 s budget
    run.machine_load_cores = 1.2
    cause = run._starved_by(_ended(40, 0.3))
    assert cause.startswith("budget or machine load (other processes kept 1.2 of ")
    assert cause.endswith(" cores busy while it ran)")
    run.machine_load_cores = 0.2  # under half a core: the load is not said
    assert run._starved_by(_ended(40, 0.3)) == "budget"
    # The budget holds its steps at the probes' speed: load slowed its steps.
    fast = _trial(2000.0)
    fast.machine_load_cores = 1.2
    assert fast._starved_by(_ended(40, 0.3)).startswith("machine load (other processes kept 1.2")
    # Unprobed, its own (loaded) steps fall short of the budget: either, too.
    unprobed = _trial(None)
    unprobed.machine_load_cores = 1.2
    assert unprobed._starved_by(_ended(40, 0.3)).startswith("budget or machine load (")
    # ... but its own loaded steps fit the budget: the load did not cut its steps.
    assert unprobed._starved_by(_ended(40, 0.1)).startswith("unknown (no probe measured")


def test_an_untimed_trial_under_load_names_the_load() -> None:
    """Beside a one-core hog (and more), a trial that trained 1 of its 25 steps, all warm-up
    (no step timed, no probe of its own), said only "unknown (no probe measured its speed)"
    though 1.9 of the 2 cores were busy while it ran: the cause stays unknown, the load is
    named with its figure."""
    run = _trial(None)
    run.machine_load_cores = 1.9
    cause = run._starved_by(_ended(1, None))
    assert cause.startswith("unknown (no probe measured its speed; other processes kept 1.9 of ")
    assert cause.endswith(" cores busy while it ran)")
    run.machine_load_cores = 0.2  # under half a core: not said
    assert run._starved_by(_ended(1, None)) == "unknown (no probe measured its speed)"
