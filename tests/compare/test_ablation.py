"""tuner ablate: the plan (every rung, skips, errors) and a real tiny CPU ablation."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from tuner.commands import main
from tuner.compare import ablation
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.report.ablation import write_ablation
from tuner.techniques import ladder, ladder_knobs
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
CPU_LADDER_KNOBS = [k.field for k in ladder_knobs()]


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
    assert left_out == [
        "non_blocking: needs CUDA",
        "prefetch: needs CUDA",
        "DataParallel vs DDP: needs 2 or more CUDA GPUs; this machine has 0",
    ]


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
    out = write_ablation(summary.reset_index(), runs, out_dir=tmp_path, title="t", about=[])
    for name in ("ablation.csv", "ablation.md", "ablation.html", "ablation.png", "runs.csv"):
        assert (out / name).stat().st_size > 0
    assert len(pd.read_csv(out / "runs.csv")) == len(arms) * 3
    assert "tie" in (out / "ablation.md").read_text() or "x [" in (out / "ablation.md").read_text()


def test_data_parallel_pair_on_two_or_more_gpus() -> None:
    arms, left_out = ablation.plan_ablation(TINY, cuda=True, amp="fp16", skip=["norm"], gpus=4)
    dataparallel, ddp = arms[-2:]
    assert (dataparallel.name, ddp.name) == ("DataParallel x4", "DDP x4")
    assert not any("DataParallel" in line for line in left_out)
    # The same global batch and peak lr: one process at 4b, or 4 workers at b (the engine
    # multiplies lr by the world size).
    assert dataparallel.config == TINY.replace(device="cuda", batch_size=64, lr=4 * TINY.lr)
    assert ddp.config == TINY.replace(device="cuda")
    assert ddp.reference == ddp.baseline == dataparallel.name
    assert dataparallel.measure is not None and ddp.measure is not None  # fresh processes


@pytest.mark.parametrize(
    ("cuda", "gpus", "why"),
    [
        (False, 0, "needs 2 or more CUDA GPUs; this machine has 0"),
        (True, 1, "needs 2 or more CUDA GPUs; this machine has 1"),
        (False, 2, "this run is on the CPU"),
    ],
)
def test_data_parallel_pair_is_left_out_with_a_note(cuda: bool, gpus: int, why: str) -> None:
    amp = "fp16" if cuda else "bf16"
    arms, left_out = ablation.plan_ablation(TINY, cuda=cuda, amp=amp, skip=["norm"], gpus=gpus)
    assert not any(a.group == "data parallel" for a in arms)
    (note,) = [line for line in left_out if line.startswith("DataParallel vs DDP: ")]
    assert why in note
    _, left_out = ablation.plan_ablation(
        TINY, cuda=cuda, amp=amp, skip=["norm", "data_parallel"], gpus=gpus
    )
    assert not any("DataParallel" in line for line in left_out)  # skipped: nothing to say


def test_the_engine_refuses_dataparallel_without_two_gpus() -> None:
    from tuner.engine import train

    with pytest.raises(TunerError, match="DataParallel needs one process on 2 or more CUDA GPUs"):
        train(TINY, dataparallel=True)


def test_cli_says_why_data_parallel_was_not_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    gpus = torch.cuda.device_count()
    if gpus >= 2:
        pytest.skip("this machine measures DataParallel vs DDP")
    flags = ["--model", TINY.model, "--model-kwargs", json.dumps(dict(TINY.model_kwargs)),
             "--img-size", "16", "--batch-size", "16", "--steps", "2", "--warmup-steps", "1",
             "--device", "cpu", "--repeats", "1", "--reports-dir", str(tmp_path), "--json",
             "--skip", ",".join([*CPU_LADDER_KNOBS, "norm"])]  # fmt: skip
    assert main(["ablate", *flags]) == 0
    out, err = capsys.readouterr()
    note = f"DataParallel vs DDP: needs 2 or more CUDA GPUs; this machine has {gpus}"
    assert f"left out: {note}" in err.splitlines()
    document = json.loads(out.strip().splitlines()[-1])
    assert note in document["left_out"]
    assert [row["arm"] for row in document["summary"]] == ["plain"]
    for name in ("ablation.md", "ablation.html"):
        assert note in (tmp_path / "ablation" / name).read_text()
