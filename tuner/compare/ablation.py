"""The controlled technique ablation (``tuner ablate``): one workload, one change per step.

Arms of :mod:`tuner.compare` on :data:`tuner.workloads.ABLATION`, run in-process with the engine
(no Ray): the registry's technique ladder (each step keeps the ones before and is compared with
the step before and the plain loop), the norm comparison (BatchNorm, then GroupNorm at each group
count) and, on 2 or more GPUs, DataParallel vs DDP (:mod:`tuner.compare.dp_vs_ddp`). Every
step trains ``repeats`` times with the same seed, interleaved. A technique this hardware cannot
run is left out (and listed); one that falls back in the engine is marked with its note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.compare import Arm, plan_ladder, run_interleaved, summarize
from tuner.compare import dp_vs_ddp as dp
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.techniques import knob, ladder_knobs
from tuner.workloads import GPU_NORM_MODEL, workload

__all__ = [
    "default_config",
    "default_norm_model",
    "plan_ablation",
    "run_ablation",
    "skippable",
    "summarize",
    "terminal_table",
    "write_ablation",
]


def skippable() -> tuple[str, ...]:
    """What ``--skip`` takes: every ladder knob of the registry, ``norm`` and the data-parallel
    pair."""
    return (*(k.field for k in ladder_knobs()), "norm", dp.SKIP)


def default_config(*, cuda: bool) -> TrainConfig:
    """The baseline workload (:data:`tuner.workloads.ABLATION`): the ladder's first step."""
    return TrainConfig.from_params(workload("ablation", cuda=cuda))


def default_norm_model(*, cuda: bool) -> str | None:
    """The model of the norm comparison (``None``: the ladder's own model, whose hybrid ViT has
    convolutional norm layers; ViT-B/16 on a GPU has none)."""
    return GPU_NORM_MODEL if cuda else None


def plan_ablation(
    base: TrainConfig,
    *,
    cuda: bool,
    amp: str,
    groups: Sequence[int] = (8, 16, 32),
    skip: Iterable[str] = (),
    norm_model: str | None = None,
    gpus: int = 0,
) -> tuple[list[Arm], list[str]]:
    """The ladder, the norm comparison (BatchNorm, then GroupNorm per group count; on
    ``norm_model`` with its default kwargs if given, for a ladder model without convolutional
    norm layers such as ViT-B/16), then DataParallel vs DDP over the ``gpus`` visible CUDA
    devices; and a line per part this machine cannot run.

    Raises:
        TunerError: an unknown name in ``skip``, or an ``amp`` mode this device cannot run.
    """
    skip = set(skip)
    unknown = sorted(skip - set(skippable()))
    if unknown:
        raise TunerError(
            f"--skip {', '.join(unknown)} unknown; choose from {', '.join(skippable())}."
        )
    if amp not in knob("amp").values(cuda=cuda):
        raise TunerError(
            f"--amp {amp!r} cannot run here; use one of {', '.join(knob('amp').values(cuda=cuda))}."
        )
    arms, left_out = plan_ladder(base, cuda=cuda, amp=amp, skip=sorted(skip - {"norm", dp.SKIP}))
    if "norm" not in skip:
        norm_base = base.replace(model=norm_model, model_kwargs={}) if norm_model else base
        arms += _norm_arms(norm_base, groups)
    if dp.SKIP not in skip:
        note = dp.left_out_note(cuda=cuda, gpus=gpus)
        arms += [] if note else dp.arms(base, gpus=gpus)
        left_out += [note] if note else []
    return arms, left_out


def _norm_arms(base: TrainConfig, groups: Sequence[int]) -> list[Arm]:
    arms = [Arm("batchnorm", "norm", base.replace(norm="batch"), {"norm": "batch"})]
    for g in groups:
        changes = {"norm": "group", "gn_groups": int(g)}
        config = base.replace(**changes)
        arms.append(Arm(f"groupnorm/{g}", "norm", config, changes, "batchnorm", "batchnorm"))
    return arms


def run_ablation(
    arms: Sequence[Arm],
    *,
    repeats: int = 3,
    on_run: Callable[[int, Arm, dict[str, Any]], None] | None = None,
) -> pd.DataFrame:
    """Train every arm ``repeats`` times, round-robin, after one unrecorded warm-up run.

    Raises:
        TunerError: ``repeats`` < 1, or an arm's config is impossible (found before training).
    """
    from tuner.engine import train  # torch: imported only when running

    return run_interleaved(arms, repeats=repeats, measure=train, on_run=on_run)


def write_ablation(
    summary: pd.DataFrame, runs: pd.DataFrame, *, out_dir: Path, title: str, about: list[str]
) -> Path:
    """``ablation.csv`` (the summary), ``runs.csv``, ``ablation.md``, ``ablation.html``, plot."""
    from tuner.report.document import Image, Section, Table, render_html, render_markdown

    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / "ablation.csv", index=False)
    runs.to_csv(out_dir / "runs.csv", index=False)
    plot = _plot(summary, out_dir / "ablation.png")
    sections = [
        Section("Setup", ["\n".join(f"- {line}" for line in about)]),
        Section(
            "Results per step",
            [
                "Median over the repeats that finished, with the interval of the median. "
                "Changes are paired (same repeat), against the step before (`reference`) and "
                "the first step of each comparison: throughput as a ratio, memory and accuracy "
                "as differences, each with its 95% interval; `tie` means the interval contains "
                "no change. An accuracy interval also covers the validation set's sampling "
                "error (Newcombe's interval from the set's size): the repeats share one seed, "
                "so they agree with each other, and variation between seeds is not in it. A "
                "step with `fell_back` did not run its technique on this hardware.",
                Table(_shown(summary), "Ladder (each step keeps the ones above), then norms"),
                Image(plot, "throughput and memory per step"),
            ],
        ),
        Section("Every run", [Table(runs.drop(columns=["device", "device_name"]))]),
    ]
    (out_dir / "ablation.md").write_text(render_markdown(title, sections))
    (out_dir / "ablation.html").write_text(render_html(title, sections))
    return out_dir


def terminal_table(summary: pd.DataFrame) -> str:
    """The summary as the console prints it (the same cells as the report's table)."""
    return _shown(summary).to_string(index=False)


def _shown(summary: pd.DataFrame) -> pd.DataFrame:
    from tuner.report.document import change_text, estimate_text

    columns = {
        "images/s": ("images_per_second", estimate_text, ",.0f"),
        "vs step before": ("throughput_ratio_vs_reference", change_text, ""),
        "vs first": ("throughput_ratio_vs_baseline", change_text, ""),
        "peak memory": ("peak_memory_bytes", estimate_text, "bytes"),
        "memory vs first": ("memory_change_bytes_vs_baseline", change_text, ""),
        "val accuracy": ("val_accuracy", estimate_text, ".3f"),
        "accuracy vs first": ("accuracy_change_vs_baseline", change_text, ""),
    }
    shown = pd.DataFrame({"step": summary["arm"], "repeats ok": summary["repeats_ok"]})
    for title, (column, text, spec) in columns.items():
        shown[title] = [text(row, column, spec) for _, row in summary.iterrows()]
    shown["fell back"] = summary["fell_back"]
    return shown


def _plot(summary: pd.DataFrame, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    colors = ["tab:blue" if g == "ladder" else "tab:purple" for g in summary["group"]]
    panels = (
        (left, "images_per_second", 1.0, "images/s (median, interval)", "Throughput per step"),
        (right, "peak_memory_bytes", 2**20, "peak memory, MiB", "Peak memory per step"),
    )
    for ax, column, scale, ylabel, title in panels:
        mid = summary[column] / scale
        err = [
            (mid - summary[f"{column}_low"] / scale).clip(lower=0).fillna(0),
            (summary[f"{column}_high"] / scale - mid).clip(lower=0).fillna(0),
        ]
        ax.bar(summary["arm"], mid, yerr=err, color=colors, capsize=3)
        ax.set(ylabel=ylabel, title=title)
        plt.setp(ax.get_xticklabels(), rotation=40, ha="right", rotation_mode="anchor")
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
