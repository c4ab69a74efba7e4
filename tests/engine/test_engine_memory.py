"""CPU memory that means something: the counted training state of real runs.

It must grow with the batch size, read the same in a short probe and in the full run, in any
order within one process, and after a checkpoint restore.
"""

from __future__ import annotations

import pytest
from engine_helpers import tiny

from tuner.engine import short_run, train


def test_memory_strictly_grows_with_batch_size() -> None:
    peaks = [short_run(tiny(batch_size=b), steps=2).peak_memory_bytes for b in (16, 32, 64)]
    assert peaks[0] < peaks[1] < peaks[2], peaks


def test_probe_and_full_run_agree_within_five_percent_in_any_order() -> None:
    config = tiny(batch_size=32, steps=6, warmup_steps=2)
    first_probe = short_run(config, steps=2).peak_memory_bytes
    full = train(config)
    later_probe = short_run(config, steps=2).peak_memory_bytes  # after a full run in this process
    assert full.status == "ok" and full.memory_kind == "cpu_training_state"
    for value in (first_probe, later_probe):
        assert value == pytest.approx(full.peak_memory_bytes, rel=0.05)


def test_the_breakdown_adds_up_and_set_to_none_frees_the_gradients() -> None:
    kept = short_run(tiny(batch_size=32), steps=2)
    freed = short_run(tiny(batch_size=32, set_to_none=True), steps=2)
    parts = (kept.memory_parameters_bytes, kept.memory_optimizer_bytes,
             kept.memory_activations_bytes, kept.memory_gradients_bytes)  # fmt: skip
    assert all(p and p > 0 for p in parts)
    assert kept.peak_memory_bytes == sum(parts)  # gradients kept through the next forward
    assert freed.peak_memory_bytes < kept.peak_memory_bytes
    # AdamW keeps two moments per parameter: twice the parameters' bytes (plus step counters).
    assert kept.memory_optimizer_bytes >= 2 * kept.memory_parameters_bytes


def test_memory_is_the_same_after_a_checkpoint_restore() -> None:
    config = tiny(batch_size=32, steps=6, warmup_steps=1, eval_every_steps=3)
    states = []
    first = train(config, on_eval=lambda p: states.append(p.state_dict()) or len(states) == 1)
    resumed = train(config, resume_state=states[0])
    assert first.status == resumed.status == "ok" and resumed.steps == 6
    assert resumed.peak_memory_bytes == pytest.approx(first.peak_memory_bytes, rel=0.05)


def test_bf16_autocast_halves_the_saved_activations() -> None:
    fp32 = short_run(tiny(batch_size=32), steps=2).memory_activations_bytes
    bf16 = short_run(tiny(batch_size=32, amp="bf16"), steps=2).memory_activations_bytes
    assert bf16 < 0.8 * fp32


def test_a_window_run_counts_the_same_training_state_as_a_probe() -> None:
    """Arms built side by side (tuner.compare.trust) each report their own state, not what the
    process holds: the same count a fresh probe of the config makes."""
    from tuner.engine import short_run
    from tuner.engine.windows import WindowRun

    config = tiny(warmup_steps=2)
    # Held beside it, with a loader worker that queues 2 batches while the other arm runs.
    other = WindowRun(tiny(warmup_steps=2, batch_size=64, num_workers=1), planned_steps=20)
    run = WindowRun(config, planned_steps=20)
    assert other.warm_up() is None and run.warm_up() is None
    window = run.window(3)
    assert window.status == "ok" and window.measured_steps == 3 and window.images_per_second > 0
    assert (run.queued, other.queued) == (0, 2)  # taken untimed before each of its windows
    assert other.window(3).measured_steps == 3
    assert window.peak_memory_bytes == short_run(config, steps=3).peak_memory_bytes > 0
    run.close()
    other.close()
