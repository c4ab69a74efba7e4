"""tuner ablate: the plan (every rung, skips, errors) and a real tiny CPU ablation."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest

from tuner.cli import main
from tuner.compare import ablation
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.techniques import ladder
from tuner.workloads import GPU_NORM_MODEL, MICRO_VIT

TINY = TrainConfig(
    **MICRO_VIT,
    img_size=16,
    batch_size=16,
    epochs=None,
    steps=3,
    warmup_steps=1,
    max_eval_batches=1,
    device="cpu",
)
CPU_LADDER = [r.name for r in ladder(cuda=False)[0]]
GPU_LADDER = [r.name for r in ladder(cuda=True)[0]]


def test_ladder_keeps_every_earlier_change() -> None:
    arms, _ = ablation.plan_ablation(TINY, cuda=True, amp="fp16", groups=(4, 8))
    names = [a.name for a in arms]
    assert names == [*GPU_LADDER, "batchnorm", "groupnorm/4", "groupnorm/8"]
    top = arms[len(GPU_LADDER) - 1].config
    assert (top.amp, top.set_to_none, top.non_blocking, top.pin_memory) == ("fp16", True, True,
                                                                            True)  # fmt: skip
    assert (top.prefetch, top.channels_last, top.compile) == ("cuda_stream", True, "default")
    for before, after in itertools.pairwise(arms[: len(GPU_LADDER)]):
        assert after.reference == before.name and after.baseline == "plain"
        changed = {k for k, v in after.config.to_dict().items() if before.config.to_dict()[k] != v}
        assert changed == set(after.changes)  # exactly one rung's change per step
    for arm in arms[len(GPU_LADDER) :]:
        assert arm.config.replace(norm="native", gn_groups=32) == TINY  # techniques off


def test_cpu_plan_leaves_out_what_needs_cuda() -> None:
    arms, left_out = ablation.plan_ablation(TINY, cuda=False, amp="bf16", skip=["norm"])
    assert [a.name for a in arms] == CPU_LADDER
    assert left_out == ["non_blocking: needs CUDA", "prefetch: needs CUDA"]


def test_norm_comparison_can_run_on_another_model() -> None:
    arms, _ = ablation.plan_ablation(
        TINY, cuda=False, amp="bf16", groups=(4,), norm_model="resnet18"
    )
    ladder_arms, norms = arms[: len(CPU_LADDER)], arms[len(CPU_LADDER) :]
    assert {a.config.model for a in ladder_arms} == {TINY.model}
    assert {a.config.model for a in norms} == {"resnet18"}
    assert all(not a.config.model_kwargs for a in norms)  # the ladder's kwargs fit another model
    assert ablation.default_norm_model(cuda=True) == GPU_NORM_MODEL


@pytest.mark.parametrize("skipped", ["amp", "set_to_none", "compile", "norm"])
def test_skip(skipped: str) -> None:
    arms, _ = ablation.plan_ablation(TINY, cuda=False, amp="bf16", skip=[skipped])
    names = [a.name for a in arms]
    assert not any(
        skipped in n.replace("batchnorm", "norm").replace("groupnorm", "norm") for n in names
    )
    assert names[0] == "plain"


@pytest.mark.parametrize(
    "argv",
    [
        ["--skip", "dropout"],
        ["--groups", "eight"],
        ["--groups", "0"],
        ["--repeats", "0"],
        ["--amp", "fp16"],
    ],
)
def test_bad_cli_input_is_one_line(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(["ablate", "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_plan_rejects_an_amp_mode_this_device_cannot_run() -> None:
    with pytest.raises(TunerError, match="amp"):
        ablation.plan_ablation(TINY, cuda=False, amp="fp16")


def test_tiny_cpu_ablation(tmp_path: Path) -> None:
    arms, _ = ablation.plan_ablation(TINY, cuda=False, amp="bf16", groups=(4,), skip=["compile"])
    seen: list[tuple[int, str]] = []
    runs = ablation.run_ablation(arms, repeats=3, on_run=lambda r, a, _: seen.append((r, a.name)))
    # Round-robin: every step once per repeat, in order, three times.
    assert seen == [(r, a.name) for r in range(3) for a in arms]
    assert (runs["status"] == "ok").all(), runs[["arm", "status", "error"]]
    assert (runs["images_per_second"] > 0).all() and (runs["peak_memory_bytes"] > 0).all()
    summary = ablation.summarize(runs, arms).set_index("arm")
    assert list(summary.index) == [a.name for a in arms]
    for name, group in runs.groupby("arm"):
        values = sorted(group["images_per_second"])
        assert summary.at[name, "images_per_second"] == pytest.approx(values[1])  # the median
        assert summary.at[name, "images_per_second_low"] == pytest.approx(values[0])
        assert summary.at[name, "images_per_second_high"] == pytest.approx(values[2])
        assert summary.at[name, "repeats_ok"] == "3/3"
    # The change vs the rung before is the paired ratio of the same repeats.
    before = runs[runs["arm"] == "+amp"].set_index("repeat")["images_per_second"]
    after = runs[runs["arm"] == "+set_to_none"].set_index("repeat")["images_per_second"]
    expected = float(pd.Series(after / before).map(float).prod() ** (1 / 3))
    assert summary.at["+set_to_none", "throughput_ratio_vs_reference"] == pytest.approx(expected)
    # Memory is counted, not sampled: set_to_none frees the gradients between steps.
    assert summary.at["+set_to_none", "memory_change_bytes_vs_reference"] < 0
    assert not summary.at["+set_to_none", "memory_change_bytes_vs_reference_tie"]
    assert summary.at["+amp", "fell_back"] == ""  # bf16 autocast runs on CPU
    out = ablation.write_ablation(
        summary.reset_index(), runs, out_dir=tmp_path, title="t", about=[]
    )
    for name in ("ablation.csv", "ablation.md", "ablation.html", "ablation.png", "runs.csv"):
        assert (out / name).stat().st_size > 0
    assert len(pd.read_csv(out / "runs.csv")) == len(arms) * 3
    assert "tie" in (out / "ablation.md").read_text() or "x [" in (out / "ablation.md").read_text()
