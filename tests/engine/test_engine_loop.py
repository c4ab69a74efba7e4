from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_helpers import TINY_RESNET, tiny

from tuner.engine import Progress, RunResult, read_state_file, short_run, train, write_state_file
from tuner.engine.build import COMPILE_WARMUP_STEPS, Effective
from tuner.errors import TunerError
from tuner.techniques import KNOBS

# One switch at a time, then a sample of combinations: each must run and record what ran.
SWITCHES: list[dict[str, Any]] = [
    {"amp": "bf16"},
    {"amp": "fp16"},
    {"set_to_none": True},
    {"non_blocking": True, "pin_memory": True},
    {"prefetch": "cuda_stream"},
    {"channels_last": True},
    {"fused_adamw": True},
    {"label_smoothing": 0.1},
    {"grad_clip_norm": 1.0},
    {"weight_decay": 0.0, "warmup_fraction": 0.0},
    {"norm": "batch"},
    {"norm": "group", "gn_groups": 8},
    {"norm": "layer"},
    {"num_workers": 1, "persistent_workers": True},
    {"drop_last": False, "batch_size": 100},
    {"eval_every_steps": 2, "target_accuracy": 0.01},
]
COMBINATIONS: list[dict[str, Any]] = [
    {"amp": "bf16", "set_to_none": True, "channels_last": True, "fused_adamw": True},
    {"amp": "fp16", "prefetch": "cuda_stream", "non_blocking": True, "pin_memory": True},
    {"amp": "bf16", "grad_clip_norm": 0.5, "norm": "batch", "label_smoothing": 0.1},
    {"channels_last": True, "norm": "group", "gn_groups": 4, "set_to_none": True},
]
COMPILED: list[dict[str, Any]] = [
    {"compile": "default"},
    {"compile": "max-autotune", "amp": "bf16", "channels_last": True, "set_to_none": True},
]


def _assert_ran(result: RunResult, changes: dict[str, Any]) -> None:
    assert result.status == "ok", result.error
    assert result.steps == 3 and result.measured_steps == 2
    assert result.images_per_second and result.images_per_second > 0
    assert result.val_accuracy is not None and 0 <= result.val_accuracy <= 1
    assert result.memory_kind == "cpu_training_state" and result.peak_memory_bytes is not None
    for key in ("amp", "prefetch", "compile", "channels_last", "fused_adamw", "set_to_none"):
        assert key in result.effective
    if changes.get("norm") == "group":  # issue 39: effective_gn_groups was empty
        assert result.effective["gn_groups"] == changes["gn_groups"]


def test_what_ran_has_a_typed_field_per_registry_knob() -> None:
    # The trials table reads effective_<field> per registry knob: a knob added to the registry
    # must get its field in Effective, or its column would stay empty.
    fields = [f.name for f in dataclasses.fields(Effective)]
    assert {k.field for k in KNOBS} <= set(fields)
    assert fields[0] == "device" and fields[-1] == "warmup_steps"


@pytest.mark.parametrize("changes", SWITCHES + COMBINATIONS, ids=str)
def test_every_switch_runs_alone_and_combined(changes: dict[str, Any]) -> None:
    result = train(tiny(**changes))
    _assert_ran(result, changes)


@pytest.mark.slow
@pytest.mark.parametrize("changes", COMPILED, ids=str)
def test_compile_runs_and_its_time_is_excluded(changes: dict[str, Any]) -> None:
    result = train(tiny(**changes, steps=5))  # asks for 1 warm-up step: too few to compile
    assert result.status == "ok", result.error
    assert result.effective["compile"] == changes["compile"]
    # Compilation (and max-autotune's graph recording) happens in the excluded warm-up steps,
    # raised to COMPILE_WARMUP_STEPS; only the steps after them are measured.
    assert result.warmup_time_s is not None and result.warmup_time_s > 0
    assert result.effective["warmup_steps"] == COMPILE_WARMUP_STEPS
    assert result.steps == 5 and result.measured_steps == 5 - COMPILE_WARMUP_STEPS
    assert any("torch.compile time is not measured" in note for note in result.notes)


def test_cpu_fallbacks_are_reported() -> None:
    result = train(tiny(amp="fp16", prefetch="cuda_stream", pin_memory=True, non_blocking=True))
    assert result.effective["amp"] == "bf16" and result.effective["prefetch"] == "off"
    assert result.effective["pin_memory"] is False and result.effective["non_blocking"] is False
    notes = " ".join(result.notes)
    assert "fp16" in notes and "cuda_stream" in notes and "pin_memory" in notes


def test_result_is_complete_and_json_ready() -> None:
    result = train(tiny(steps=12, warmup_steps=1))
    data = result.to_dict()
    assert data["status"] == "ok" and data["device"] == "cpu" and data["torch_version"]
    assert data["config"]["steps"] == 12 and data["num_parameters"] > 0
    assert [s for s, _ in result.train_loss_curve] == [10, 12]
    assert 0 <= result.data_wait_fraction < 1
    assert result.measured_steps == 11 and len(result.images_per_second_windows) == 1
    assert result.epochs == pytest.approx(12 / (1438 // 32))
    assert result.train_time_s < result.wall_time_s


def test_train_time_covers_every_timed_moment_of_training() -> None:
    # Warm-up 3: the loss flushes (every 10 steps) fall between the throughput windows' edges.
    # On a GPU a flush waits for queued steps; that wait is training time, so train_time_s must
    # cover the warm-up and every throughput window, not only each step's own span.
    result = train(tiny(steps=25, warmup_steps=3))
    assert result.status == "ok", result.error
    timed = result.warmup_time_s + result.step_time_s * result.measured_steps
    assert result.train_time_s >= timed > 0


@pytest.mark.parametrize("model", ["vit", "resnet"])
def test_vit_and_resnet_learn_digits_well_above_chance(model: str) -> None:
    # One epoch (44 steps): a one-block hybrid ViT (1 token + cls at 32 px) and timm's test ResNet.
    vit = {"model_kwargs": {"depth": 1}}
    settings = vit if model == "vit" else {**TINY_RESNET, "img_size": 16, "lr": 3e-3}
    config = tiny(**settings, steps=None, epochs=1, max_eval_batches=None)
    result = train(config)
    assert result.status == "ok", result.error
    assert result.val_accuracy > 0.5  # chance is 0.1
    assert result.train_loss_curve[-1][1] < result.train_loss_curve[0][1]


def test_nan_loss_is_reported_as_diverged() -> None:
    result = train(tiny(lr=1e30, warmup_fraction=0.0, steps=4))
    assert result.status == "diverged" and "loss became" in result.error
    assert result.val_accuracy is None


def test_time_budget_stops_the_run() -> None:
    result = train(tiny(steps=None, epochs=None, time_budget_s=1.0, warmup_steps=0))
    assert result.status == "ok" and 1.0 <= result.train_time_s < 30
    assert not result.cut_by_time_budget  # the clock was its only budget: nothing was cut
    assert result.val_accuracy is not None


def test_a_run_its_time_budget_cuts_before_its_steps_says_so_on_its_threads() -> None:
    before = torch.get_num_threads()
    try:
        cut = train(tiny(steps=100_000, time_budget_s=0.5, warmup_steps=0, torch_threads=1))
        assert torch.get_num_threads() == 1 and cut.config["torch_threads"] == 1
    finally:
        torch.set_num_threads(before)  # the run set this process's threads: the next tests keep
    assert cut.status == "ok" and cut.steps < 100_000 and cut.cut_by_time_budget
    (note,) = [n for n in cut.notes if n.startswith("cut by its time budget")]
    assert f"after {cut.steps} of 100000 planned steps" in note
    whole = train(tiny(steps=3, time_budget_s=600.0))  # its steps ended it first: nothing cut
    assert whole.ok and not whole.cut_by_time_budget


def test_on_eval_sees_progress_and_can_stop_the_run() -> None:
    seen: list[Progress] = []

    def on_eval(progress: Progress) -> bool:
        seen.append(progress)
        return progress.step >= 4

    result = train(tiny(steps=10, eval_every_steps=2), on_eval=on_eval)
    assert [p.step for p in seen] == [2, 4] and result.steps == 4
    assert seen[-1].result.status == "ok" and seen[-1].result.val_accuracy is not None


def test_a_run_says_where_its_time_went_besides_training() -> None:
    # The hook sleeps 0.1 s at each of its 3 evaluations (steps 2, 4, 6): the caller's time.
    seen: list[Progress] = []

    def on_eval(progress: Progress) -> None:
        seen.append(progress)
        time.sleep(0.1)

    result = train(tiny(steps=6, eval_every_steps=2), on_eval=on_eval)
    assert result.status == "ok", result.error
    assert len(seen) == 3 and 0.3 <= result.report_time_s < 0.3 + 5
    assert seen[1].result.report_time_s >= 0.1  # so far: the first evaluation's hook
    assert result.eval_time_s > 0 and seen[0].result.eval_time_s > 0
    assert result.setup_time_s > 0
    parts = result.setup_time_s + result.train_time_s + result.eval_time_s + result.report_time_s
    assert parts <= result.wall_time_s  # disjoint shares of the run's wall time
    plain = train(tiny(steps=6, eval_every_steps=2))
    assert plain.report_time_s == 0 and plain.eval_time_s > 0


def test_resume_continues_from_the_checkpoint_step(tmp_path: Path) -> None:
    config = tiny(steps=None, epochs=2, batch_size=256)  # 5 steps per epoch
    states: dict[str, dict[int, dict]] = {"full": {}, "resumed": {}}

    def keep(name: str):
        return lambda p: states[name].__setitem__(p.step, p.state_dict())

    full = train(config, on_eval=keep("full"))
    write_state_file(states["full"][5], tmp_path / "ckpt.pt")
    state = read_state_file(tmp_path / "ckpt.pt")
    assert state["step"] == 5 and state["epoch"] == 1.0
    resumed = train(config, resume_state=state, on_eval=keep("resumed"))
    assert list(states["resumed"]) == [10] and resumed.steps == full.steps == 10
    # Same weights as the uninterrupted run: model, optimizer, schedule, RNG all carried on.
    for key, value in states["full"][10]["model"].items():
        torch.testing.assert_close(states["resumed"][10]["model"][key], value)
    assert resumed.val_accuracy == pytest.approx(full.val_accuracy)


def test_a_run_restored_at_its_last_step_reports_what_was_measured(tmp_path: Path) -> None:
    """A worker killed between the last evaluation and the final report: the restored run
    trains no step, and must not report an unmeasured (NaN) throughput or peak."""
    states: list[dict] = []
    full = train(
        tiny(steps=24, eval_every_steps=12), on_eval=lambda p: states.append(p.state_dict())
    )
    write_state_file(states[-1], tmp_path / "ckpt.pt")
    restored = train(
        tiny(steps=24, eval_every_steps=12), resume_state=read_state_file(tmp_path / "ckpt.pt")
    )
    assert restored.steps == full.steps == 24 and restored.measured_steps == full.measured_steps
    assert restored.images_per_second == pytest.approx(full.images_per_second)
    assert restored.peak_memory_bytes == full.peak_memory_bytes > 0


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"PK\x03\x04truncated"])
def test_a_corrupt_checkpoint_is_one_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ckpt.pt"
    path.write_bytes(content)
    with pytest.raises(TunerError, match=r"unreadable.*delete it"):
        read_state_file(path)


def test_a_checkpoint_that_holds_no_state_is_refused(tmp_path: Path) -> None:
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(TunerError, match="no training state"):
        read_state_file(tmp_path / "other.pt")


def test_checkpoint_of_a_compiled_or_channels_last_model_is_the_plain_state(tmp_path: Path) -> None:
    captured: list[dict] = []
    train(tiny(channels_last=True, amp="fp16"), on_eval=lambda p: captured.append(p.state_dict()))
    torch.save(captured[-1], tmp_path / "c.pt")
    state = torch.load(tmp_path / "c.pt", weights_only=True)
    assert not any(k.startswith("_orig_mod") for k in state["model"])
    assert {"optimizer", "scheduler", "scaler", "step", "epoch", "rng"} <= state.keys()


def test_probe_measures_speed_and_memory_without_evaluating() -> None:
    result = short_run(tiny(warmup_steps=2), steps=3)
    assert result.status == "ok" and result.steps == 5 and result.measured_steps == 3
    assert result.val_accuracy is None and result.images_per_second > 0
    assert result.memory_kind == "cpu_training_state" and result.peak_memory_bytes > 0


def test_probe_rejects_zero_steps() -> None:
    with pytest.raises(TunerError, match="steps=0 must be at least 1"):
        short_run(tiny(), steps=0)


def test_bad_input_raises_before_training() -> None:
    with pytest.raises(TunerError, match="gn_groups=7"):
        train(tiny(norm="group", gn_groups=7))
    with pytest.raises(TunerError, match="batch_size=4096"):
        train(tiny(batch_size=4096))


def test_non_finite_metrics_become_null_in_json() -> None:
    result = RunResult(status="error", val_loss=math.inf)
    assert result.to_dict()["val_loss"] is None
