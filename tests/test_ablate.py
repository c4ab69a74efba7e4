"""tuner ablate: the plan (every rung, skips, errors) and a real tiny CPU ablation."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest

from tuner import ablate
from tuner.cli import main
from tuner.config import TrainConfig
from tuner.errors import TunerError

LADDER_NAMES = [name for name, _ in ablate.LADDER]
TINY = TrainConfig(
    model="vit_tiny_r_s16_p8_224",
    model_kwargs={"patch_size": 2, "embed_dim": 32, "depth": 1, "num_heads": 2},
    img_size=16,
    batch_size=16,
    epochs=None,
    steps=3,
    warmup_steps=1,
    max_eval_batches=1,
    device="cpu",
)


def test_ladder_keeps_every_earlier_change() -> None:
    steps = ablate.plan_ablation(TINY, amp="bf16", groups=(4, 8))
    names = [s.name for s in steps]
    assert names == [*LADDER_NAMES, "batchnorm", "groupnorm/4", "groupnorm/8"]
    top = steps[len(LADDER_NAMES) - 1].config
    assert (top.amp, top.set_to_none, top.non_blocking, top.pin_memory) == (
        "bf16",
        True,
        True,
        True,
    )
    assert (top.prefetch, top.channels_last, top.compile) == ("cuda_stream", True, "default")
    for before, after in itertools.pairwise(steps[: len(LADDER_NAMES)]):
        assert after.previous == before.name
        changed = {k for k, v in after.config.to_dict().items() if before.config.to_dict()[k] != v}
        assert changed == set(after.changes)  # exactly one rung's change per step
    for step in steps[len(LADDER_NAMES) :]:
        assert step.config.replace(norm="native", gn_groups=32) == TINY  # techniques off


def test_norm_comparison_can_run_on_another_model() -> None:
    steps = ablate.plan_ablation(TINY, amp="bf16", groups=(4,), norm_model="resnet18")
    ladder, norms = steps[: len(LADDER_NAMES)], steps[len(LADDER_NAMES) :]
    assert {s.config.model for s in ladder} == {TINY.model}
    assert {s.config.model for s in norms} == {"resnet18"}
    assert all(not s.config.model_kwargs for s in norms)  # the ladder's kwargs fit another model
    assert ablate.default_norm_model(cuda=True) == "vit_small_r26_s32_224"


@pytest.mark.parametrize("skipped", ["amp", "non_blocking", "compile", "norm"])
def test_skip(skipped: str) -> None:
    names = [s.name for s in ablate.plan_ablation(TINY, amp="bf16", skip=[skipped])]
    assert not any(
        skipped in n.replace("batchnorm", "norm").replace("groupnorm", "norm") for n in names
    )
    assert names[0] == "baseline"


@pytest.mark.parametrize(
    "argv", [["--skip", "dropout"], ["--groups", "eight"], ["--groups", "0"], ["--repeats", "0"]]
)
def test_bad_cli_input_is_one_line(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(["ablate", "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_plan_rejects_bad_amp() -> None:
    with pytest.raises(TunerError, match="amp"):
        ablate.plan_ablation(TINY, amp="fp8")


def test_tiny_cpu_ablation(tmp_path: Path) -> None:
    steps = ablate.plan_ablation(TINY, amp="bf16", groups=(4,), skip=["compile"])
    seen: list[tuple[int, str]] = []
    runs = ablate.run_ablation(steps, repeats=3, on_run=lambda r, s, _: seen.append((r, s.name)))
    # Round-robin: every step once per repeat, in order, three times.
    assert seen == [(r, s.name) for r in range(3) for s in steps]
    assert (runs["status"] == "ok").all(), runs[["step", "status", "error"]]
    assert (runs["images_per_second"] > 0).all() and (runs["peak_memory_bytes"] >= 0).all()
    summary = ablate.summarize(runs, steps).set_index("step")
    assert list(summary.index) == [s.name for s in steps]
    for name, group in runs.groupby("step"):
        assert summary.at[name, "images_per_second"] == pytest.approx(
            group["images_per_second"].mean()
        )
        assert summary.at[name, "images_per_second_std"] == pytest.approx(
            group["images_per_second"].std()
        )
        assert summary.at[name, "repeats_ok"] == "3/3"
    ips = summary["images_per_second"]
    expected = 100 * (ips["+set_to_none"] / ips["+amp"] - 1)
    assert summary.at["+set_to_none", "throughput_vs_previous_pct"] == pytest.approx(expected)
    assert summary.at["groupnorm/4", "throughput_vs_baseline_pct"] == pytest.approx(
        100 * (ips["groupnorm/4"] / ips["batchnorm"] - 1)
    )
    # No CUDA here: the CUDA-only techniques fell back, and the table says so.
    assert "prefetch" in summary.at["+prefetch", "fell_back"]
    assert "non_blocking" in summary.at["+non_blocking/pinned", "fell_back"]
    assert summary.at["+amp", "fell_back"] == ""  # bf16 autocast runs on CPU
    out = ablate.write_ablation(summary.reset_index(), runs, out_dir=tmp_path, title="t", about=[])
    for name in ("ablation.csv", "ablation.md", "ablation.html", "ablation.png", "runs.csv"):
        assert (out / name).stat().st_size > 0
    assert len(pd.read_csv(out / "runs.csv")) == len(steps) * 3
