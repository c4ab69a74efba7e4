"""The controlled technique ablation: one workload, one change per step, repeated runs.

Two comparisons on the same model, data and batch size, run in-process with the engine (no Ray):

- the ladder ``baseline -> +amp -> +set_to_none -> +non_blocking/pinned -> +prefetch ->
  +channels_last -> +compile``; each step keeps every change before it;
- the norm comparison: the baseline with BatchNorm, then GroupNorm at each group count.

Every step runs ``repeats`` times with the same seed, interleaved round-robin (step 1, 2, ...,
then again) so a drift in machine load spreads over all steps instead of biasing one. A technique
that cannot run on this hardware (prefetch or pinned copies without CUDA) falls back in the engine;
its step is marked with the engine's note rather than reported as an effect.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.config import TrainConfig
from tuner.errors import TunerError

__all__ = [
    "LADDER",
    "AblationStep",
    "default_config",
    "plan_ablation",
    "run_ablation",
    "summarize",
    "write_ablation",
]

# (step name, the setting(s) it turns on). ``amp`` is filled in per device.
LADDER: tuple[tuple[str, dict[str, Any]], ...] = (
    ("baseline", {}),
    ("+amp", {"amp": None}),
    ("+set_to_none", {"set_to_none": True}),
    ("+non_blocking/pinned", {"non_blocking": True, "pin_memory": True}),
    ("+prefetch", {"prefetch": "cuda_stream"}),
    ("+channels_last", {"channels_last": True}),
    ("+compile", {"compile": "default"}),
)
SKIPPABLE = ("amp", "set_to_none", "non_blocking", "prefetch", "channels_last", "compile", "norm")

# Defaults: a tiny hybrid ViT (its ResNet stem has the conv norms) on CPU; ViT-B/16 at 224 on GPU.
_CPU_DEFAULT: dict[str, Any] = {
    "model": "vit_tiny_r_s16_p8_224",
    "model_kwargs": {"patch_size": 2, "embed_dim": 64, "depth": 2, "num_heads": 2},
    "data": "digits",
    "img_size": 32,
    "batch_size": 64,
    "lr": 5e-4,  # with 100 steps: about 70% val accuracy, so accuracy changes are visible
    "epochs": None,
    "steps": 100,
    "warmup_steps": 5,
}
_GPU_DEFAULT: dict[str, Any] = {
    "model": "vit_base_patch16_224",
    "data": "synthetic",
    "synthetic_size": 12800,
    "img_size": 224,
    "batch_size": 128,
    "num_workers": 8,
    "epochs": None,
    "steps": 120,
    "warmup_steps": 20,
}


@dataclass(frozen=True)
class AblationStep:
    """One configuration of the ablation and what it is compared with."""

    name: str
    kind: str  # "ladder" | "norm"
    config: TrainConfig
    changes: Mapping[str, Any] = field(default_factory=dict)
    previous: str | None = None  # the step this one adds to
    baseline: str | None = None  # the step all of its kind are compared with


# ViT-B/16 has no convolutional norm layer, so on GPU the norm comparison runs on a hybrid ViT
# whose ResNet-26 backbone has them; on CPU the ladder's tiny hybrid ViT already does.
_GPU_NORM_MODEL = "vit_small_r26_s32_224"


def default_config(*, cuda: bool) -> TrainConfig:
    """The baseline workload: the ladder's first step (every technique off)."""
    return TrainConfig(**(_GPU_DEFAULT if cuda else _CPU_DEFAULT))


def default_norm_model(*, cuda: bool) -> str | None:
    """The model of the norm comparison (``None``: the ladder's own model)."""
    return _GPU_NORM_MODEL if cuda else None


def plan_ablation(
    base: TrainConfig,
    *,
    amp: str,
    groups: Sequence[int] = (8, 16, 32),
    skip: Iterable[str] = (),
    norm_model: str | None = None,
) -> list[AblationStep]:
    """The ladder, then the norm comparison (BatchNorm, then GroupNorm per group count).

    ``norm_model`` runs the norm comparison on another model (with its default kwargs), for a
    ladder model without convolutional norm layers such as ViT-B/16.

    Raises:
        TunerError: an unknown name in ``skip``, or a bad ``amp``.
    """
    skip = set(skip)
    unknown = sorted(skip - set(SKIPPABLE))
    if unknown:
        raise TunerError(
            f"--skip {', '.join(unknown)} unknown; choose from {', '.join(SKIPPABLE)}."
        )
    if amp not in ("bf16", "fp16"):
        raise TunerError(f"--amp {amp!r} must be bf16 or fp16.")
    steps = _ladder(base, amp, skip)
    if "norm" not in skip:
        norm_base = base.replace(model=norm_model, model_kwargs={}) if norm_model else base
        steps += _norm_steps(norm_base, groups)
    return steps


def _ladder(base: TrainConfig, amp: str, skip: set[str]) -> list[AblationStep]:
    steps: list[AblationStep] = []
    config = base
    for name, changes in LADDER:
        if name.lstrip("+").split("/")[0] in skip:
            continue
        changes = {k: (amp if k == "amp" else v) for k, v in changes.items()}
        config = config.replace(**changes)
        previous = steps[-1].name if steps else None
        steps.append(AblationStep(name, "ladder", config, changes, previous, "baseline"))
    return steps


def _norm_steps(base: TrainConfig, groups: Sequence[int]) -> list[AblationStep]:
    changes: dict[str, Any] = {"norm": "batch"}
    steps = [AblationStep("batchnorm", "norm", base.replace(**changes), changes, None, "batchnorm")]
    for g in groups:
        changes = {"norm": "group", "gn_groups": int(g)}
        config = base.replace(**changes)
        name = f"groupnorm/{g}"
        steps.append(AblationStep(name, "norm", config, changes, "batchnorm", "batchnorm"))
    return steps


def run_ablation(
    steps: Sequence[AblationStep],
    *,
    repeats: int = 3,
    on_run: Callable[[int, AblationStep, dict[str, Any]], None] | None = None,
) -> pd.DataFrame:
    """Run every step ``repeats`` times, round-robin; one row per run.

    One unrecorded warm-up run of the first step goes first, so one-time costs (lazy imports,
    data loading, allocator growth) are not charged to the baseline. Runs are in-process; on
    CUDA the engine resets the peak-memory counters per run, on CPU see :func:`_run`.
    A failing run (OOM, NaN, crash, killed child) is a row with its status, never an exception.

    Raises:
        TunerError: ``repeats`` < 1, or a step's config is impossible (found before training).
    """
    from tuner.engine import train  # torch: imported only when running

    if repeats < 1:
        raise TunerError(f"--repeats {repeats} must be at least 1 (3 or more to see the spread).")
    if steps:
        train(steps[0].config)  # warm-up run, not recorded
    rows: list[dict[str, Any]] = []
    for repeat in range(repeats):
        for step in steps:
            result = _run(step.config)
            rows.append(_run_row(step, repeat, result))
            if on_run is not None:
                on_run(repeat, step, rows[-1])
    return pd.DataFrame(rows)


def _run(config: TrainConfig) -> dict[str, Any]:
    """``train(config).to_dict()`` after handing freed memory back to the system.

    On CPU the engine measures the growth of the process's peak RSS; memory an earlier run
    freed but the C allocator kept would hide this run's, so it is returned first
    (``malloc_trim``, glibc only; elsewhere the numbers carry that caveat).
    """
    from tuner.engine import train

    gc.collect()
    _malloc_trim()
    return train(config).to_dict()


def _malloc_trim() -> None:
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _run_row(step: AblationStep, repeat: int, result: Mapping[str, Any]) -> dict[str, Any]:
    epochs, ips = result.get("epochs"), result.get("images_per_second")
    epoch_images = result.get("images_seen", 0) / epochs if epochs else math.nan
    return {
        "step": step.name,
        "kind": step.kind,
        "repeat": repeat,
        "status": result["status"],
        "images_per_second": _nan(ips),
        "epoch_time_s": epoch_images / ips if ips else math.nan,
        "peak_memory_bytes": _nan(result.get("peak_memory_bytes")),
        "memory_kind": result.get("memory_kind") or "",
        "val_accuracy": _nan(result.get("val_accuracy")),
        "train_loss": _nan(result.get("train_loss")),
        "wall_time_s": _nan(result.get("wall_time_s")),
        "fell_back": "; ".join(
            _fallbacks(step.changes, result.get("effective", {}), result.get("notes", []))
        ),
        "error": result.get("error") or "",
        "device": result.get("device", ""),
        "device_name": result.get("device_name", ""),
    }


def _fallbacks(
    changes: Mapping[str, Any], effective: Mapping[str, Any], notes: list[str]
) -> list[str]:
    """The engine's notes about this step's own changes that did not take effect."""
    missed = [k for k, v in changes.items() if k in effective and effective[k] != v]
    return [n for n in notes if any(k in n for k in missed)] or [f"{k} not applied" for k in missed]


def summarize(runs: pd.DataFrame, steps: Sequence[AblationStep]) -> pd.DataFrame:
    """Per step: mean/std over ok repeats, and the change vs its baseline and previous step."""
    ok = runs[runs["status"] == "ok"]
    rows = []
    for step in steps:
        mine = ok[ok["step"] == step.name]
        every = runs[runs["step"] == step.name]
        rows.append(
            {
                "step": step.name,
                "kind": step.kind,
                "repeats_ok": f"{len(mine)}/{len(every)}",
                "images_per_second": mine["images_per_second"].mean(),
                "images_per_second_std": mine["images_per_second"].std(ddof=1),
                "epoch_time_s": mine["epoch_time_s"].mean(),
                "peak_memory_mib": mine["peak_memory_bytes"].mean() / 2**20,
                "peak_memory_mib_std": mine["peak_memory_bytes"].std(ddof=1) / 2**20,
                "val_accuracy": mine["val_accuracy"].mean(),
                "val_accuracy_std": mine["val_accuracy"].std(ddof=1),
                "fell_back": "; ".join(sorted(set(every["fell_back"]) - {""})),
                "failed": "; ".join(sorted(set(every.loc[every["status"] != "ok", "status"]))),
            }
        )
    table = pd.DataFrame(rows).set_index("step", drop=False)
    for other, label in (("baseline", "vs_baseline"), ("previous", "vs_previous")):
        ref = [getattr(s, other) for s in steps]
        _add_deltas(table, ref, label)
    return table.reset_index(drop=True)


def _add_deltas(table: pd.DataFrame, refs: list[str | None], label: str) -> None:
    def pct(column: str) -> list[float]:
        return [
            _change_pct(table.at[s, column], table.at[r, column]) if r else math.nan
            for s, r in zip(table.index, refs, strict=True)
        ]

    table[f"throughput_{label}_pct"] = pct("images_per_second")
    table[f"memory_{label}_pct"] = pct("peak_memory_mib")
    table[f"accuracy_{label}_points"] = [
        100 * (table.at[s, "val_accuracy"] - table.at[r, "val_accuracy"]) if r else math.nan
        for s, r in zip(table.index, refs, strict=True)
    ]


def write_ablation(
    summary: pd.DataFrame, runs: pd.DataFrame, *, out_dir: Path, title: str, about: list[str]
) -> Path:
    """``ablation.csv`` (the summary), ``runs.csv``, ``ablation.md``, ``ablation.html``, plot."""
    from tuner.report._render import Image, Section, Table, render_html, render_markdown

    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / "ablation.csv", index=False)
    runs.to_csv(out_dir / "runs.csv", index=False)
    plot = _plot(summary, out_dir / "ablation.png")
    sections = [
        Section("Setup", ["\n".join(f"- {line}" for line in about)]),
        Section(
            "Results per step",
            [
                "Mean over the repeats that finished, std across repeats (same seed, interleaved). "
                "Changes are against the baseline of each comparison and against the step before. "
                "A step with `fell_back` did not run its technique on this hardware: its change is "
                "noise, not an effect.",
                Table(
                    summary.drop(columns=["kind"]),
                    "Ladder (each step keeps the ones above), then BatchNorm vs GroupNorm",
                ),
                Image(plot, "throughput and memory per step"),
            ],
        ),
        Section("Every run", [Table(runs.drop(columns=["device", "device_name"]))]),
    ]
    (out_dir / "ablation.md").write_text(render_markdown(title, sections))
    (out_dir / "ablation.html").write_text(render_html(title, sections))
    return out_dir


def _plot(summary: pd.DataFrame, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    colors = ["tab:blue" if k == "ladder" else "tab:purple" for k in summary["kind"]]
    panels = (
        (left, "images_per_second", "images/s (mean ± std)", "Throughput per step"),
        (right, "peak_memory_mib", "peak memory, MiB", "Peak memory per step"),
    )
    for ax, column, ylabel, title in panels:
        ax.bar(summary["step"], summary[column], yerr=summary[f"{column}_std"], color=colors,
               capsize=3)  # fmt: skip
        ax.set(ylabel=ylabel, title=title)
    for ax in (left, right):
        plt.setp(ax.get_xticklabels(), rotation=40, ha="right", rotation_mode="anchor")
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _change_pct(value: float, reference: float) -> float:
    if not (math.isfinite(value) and math.isfinite(reference)) or reference <= 0:
        return math.nan
    return 100.0 * (value / reference - 1.0)


def _nan(value: float | int | None) -> float:
    return math.nan if value is None else float(value)
