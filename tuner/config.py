"""The one frozen, typed run config. Every stage builds it with ``TrainConfig(**params)``.

A misspelled key fails at construction (``TypeError`` -> :class:`TunerError` through
:func:`make_config`), and every combination rule lives in :meth:`TrainConfig.validate`.
Each speed technique is a switch whose default is off, so ``TrainConfig()`` is the plain loop.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from tuner.errors import TunerError

__all__ = [
    "AMP_MODES",
    "COMPILE_MODES",
    "NORMS",
    "PREFETCH_MODES",
    "Amp",
    "Compile",
    "Norm",
    "Prefetch",
    "TrainConfig",
    "load_config_file",
    "make_config",
]

Amp = Literal["off", "bf16", "fp16"]
Prefetch = Literal["off", "cuda_stream"]
Compile = Literal["off", "default", "max-autotune"]
# "native" keeps the model's own norm layers; the others replace its convolutional norms.
Norm = Literal["native", "batch", "group", "layer"]

AMP_MODES: tuple[str, ...] = get_args(Amp)
PREFETCH_MODES: tuple[str, ...] = get_args(Prefetch)
COMPILE_MODES: tuple[str, ...] = get_args(Compile)
NORMS: tuple[str, ...] = get_args(Norm)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything one training run needs. Defaults are the plain fp32 loop on ``digits``."""

    # Workload: what is trained, on what.
    model: str = "vit_tiny_r_s16_p8_224"
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)
    data: str = "digits"  # digits | synthetic | imagefolder:PATH | cifar10:PATH
    img_size: int = 32
    synthetic_size: int = 2048  # images per epoch for data=synthetic
    num_classes: int | None = None  # None: taken from the data

    # Loader.
    batch_size: int = 64
    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    drop_last: bool = True

    # Optimization.
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_fraction: float = 0.05  # of the run's planned steps; linear warmup, then cosine
    label_smoothing: float = 0.0
    grad_clip_norm: float | None = None
    fused_adamw: bool = False

    # Speed techniques: each off by default.
    amp: Amp = "off"
    set_to_none: bool = False
    non_blocking: bool = False
    prefetch: Prefetch = "off"
    channels_last: bool = False
    compile: Compile = "off"

    # Normalization of the convolutional layers.
    norm: Norm = "native"
    gn_groups: int = 32

    # Budget: the run stops at whichever given limit comes first (at least one is required).
    epochs: int | None = 6  # the default model reaches ~98% val accuracy on digits in 6 epochs
    steps: int | None = None
    time_budget_s: float | None = None

    # Measurement.
    warmup_steps: int = 5  # steps excluded from throughput (warm-up and compile)
    target_accuracy: float | None = None  # report time to reach this val top-1 accuracy
    eval_every_steps: int | None = None  # None: evaluate at the end of each epoch
    max_eval_batches: int | None = None  # None: the whole validation split

    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda | cuda:N

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`TunerError` naming the first impossible setting or combination."""
        _check_choice("amp", self.amp, AMP_MODES)
        _check_choice("prefetch", self.prefetch, PREFETCH_MODES)
        _check_choice("compile", self.compile, COMPILE_MODES)
        _check_choice("norm", self.norm, NORMS)
        _check_positive("img_size", self.img_size)
        _check_positive("batch_size", self.batch_size)
        _check_positive("gn_groups", self.gn_groups)
        _check_positive("synthetic_size", self.synthetic_size)
        if self.num_workers < 0:
            raise TunerError(f"num_workers={self.num_workers} is negative; use 0 or more.")
        if self.persistent_workers and self.num_workers == 0:
            raise TunerError(
                "persistent_workers needs num_workers > 0; set num_workers or drop it."
            )
        if not self.lr > 0:
            raise TunerError(f"lr={self.lr} must be positive.")
        if not 0 <= self.warmup_fraction < 1:
            raise TunerError(f"warmup_fraction={self.warmup_fraction} must be in [0, 1).")
        if not 0 <= self.label_smoothing < 1:
            raise TunerError(f"label_smoothing={self.label_smoothing} must be in [0, 1).")
        if self.epochs is None and self.steps is None and self.time_budget_s is None:
            raise TunerError("The run has no budget: give epochs, steps or time_budget_s.")
        for name in ("epochs", "steps", "time_budget_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise TunerError(f"{name}={value} must be positive (or None for no limit).")
        if self.warmup_steps < 0:
            raise TunerError(f"warmup_steps={self.warmup_steps} is negative; use 0 or more.")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise TunerError(f"target_accuracy={self.target_accuracy} must be in (0, 1].")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that ``TrainConfig(**d)`` turns back into this config."""
        d = dataclasses.asdict(self)
        d["model_kwargs"] = dict(self.model_kwargs)
        return d

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied (and validated)."""
        return make_config({**self.to_dict(), **changes})


def make_config(params: Mapping[str, Any]) -> TrainConfig:
    """Build a config from a mapping, turning unknown keys into one clear error line.

    Raises:
        TunerError: a key is not a ``TrainConfig`` field, or a value is impossible.
    """
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise TunerError(
            f"Unknown run setting(s) {', '.join(unknown)}; "
            f"known settings are: {', '.join(sorted(known))}."
        )
    return TrainConfig(**params)


def load_config_file(path: str | Path) -> TrainConfig:
    """Read a JSON config (as written by ``tuner report``) into a :class:`TrainConfig`.

    A top-level ``"config"`` key is unwrapped, so a ``tuner train --json`` result also loads.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TunerError(f"Config file {path} does not exist; check the path.") from None
    except json.JSONDecodeError as exc:
        raise TunerError(
            f"Config file {path} is not valid JSON ({exc.msg}, line {exc.lineno})."
        ) from None
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        data = data["config"]
    if not isinstance(data, dict):
        raise TunerError(f"Config file {path} must hold a JSON object of run settings.")
    return make_config(data)


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise TunerError(f"{name}={value!r} is not one of {', '.join(choices)}.")


def _check_positive(name: str, value: int) -> None:
    if not value > 0:
        raise TunerError(f"{name}={value} must be a positive integer.")
