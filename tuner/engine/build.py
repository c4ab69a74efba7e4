"""Everything a run is built from, resolved once: device, precision, optimizer, schedule, compile.

A technique that cannot run here falls back and says so: ``Run.effective`` holds what actually
ran and ``Run.notes`` one line per fallback.
"""

from __future__ import annotations

import contextlib
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from tuner.config import TrainConfig
from tuner.engine.data import DataBundle, build_data
from tuner.engine.model import build_model
from tuner.engine.prefetch import CudaPrefetcher
from tuner.errors import TunerError

__all__ = ["COMPILE_WARMUP_STEPS", "Run", "build_run", "lr_at", "resolve_device"]


@dataclass
class Run:
    """The live pieces of one training run and its counters."""

    config: TrainConfig
    device: torch.device
    data: DataBundle
    model: nn.Module  # the uncompiled module: checkpoints and evaluation use it
    forward: Callable[[torch.Tensor], torch.Tensor]  # compiled or not: training uses it
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    autocast: Callable[[], contextlib.AbstractContextManager]
    criterion: nn.Module
    mean: torch.Tensor
    std: torch.Tensor
    train_batches: Any  # the loader, or the prefetcher wrapping it
    steps_per_epoch: int
    planned_steps: int | None  # None: only a time budget
    warmup_steps: int
    effective: dict[str, Any]
    notes: list[str]
    step: int = 0
    train_time_s: float = 0.0
    first_step_unix_s: float | None = None  # wall clock at this run's first step
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    time_to_target_s: float | None = None
    val_accuracy: float | None = None
    val_loss: float | None = None
    val_images: int = 0
    throughput: Any = None  # ThroughputMeter, set by the loop
    memory: Any = None  # MemoryMeter, set by the loop

    @property
    def epoch(self) -> float:
        return self.step / self.steps_per_epoch

    def progress(self, ahead: int = 0) -> float:
        """Fraction of the budget used (after ``ahead`` more steps): the furthest of steps, time."""
        done = 0.0
        if self.planned_steps:
            done = (self.step + ahead) / self.planned_steps
        if self.config.time_budget_s:
            done = max(done, self.train_time_s / self.config.time_budget_s)
        return min(done, 1.0)

    def finished(self) -> bool:
        return self.progress() >= 1.0


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda if available else cpu; an unavailable CUDA request is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise TunerError(
            f"device={name!r} is not a device; use auto, cpu, cuda or cuda:N."
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TunerError(f"device={name!r} but CUDA is not available here; use device=auto or cpu.")
    if device.type not in ("cpu", "cuda"):
        raise TunerError(f"device={name!r} is not supported; use auto, cpu, cuda or cuda:N.")
    return device


def lr_at(config: TrainConfig, progress: float) -> float:
    """Linear warm-up over ``warmup_fraction`` of the budget, then cosine to zero."""
    if progress < config.warmup_fraction:
        return config.lr * min(1.0, max(progress, 1e-3) / config.warmup_fraction)
    rest = (progress - config.warmup_fraction) / (1.0 - config.warmup_fraction)
    return config.lr * 0.5 * (1.0 + math.cos(math.pi * min(rest, 1.0)))


def build_run(config: TrainConfig, device: torch.device) -> Run:
    """Build data, model, precision, optimizer and compile for ``config`` on ``device``.

    Raises:
        TunerError: bad input (data, model, batch size, groups).
    """
    torch.manual_seed(config.seed)
    effective: dict[str, Any] = {"device": str(device)}
    notes: list[str] = []
    data = build_data(config, device)
    notes.extend(data.notes)
    num_classes = _num_classes(config, data)
    model = build_model(config, num_classes)
    memory_format = torch.channels_last if config.channels_last else torch.preserve_format
    model = model.to(device, memory_format=memory_format)
    effective.update(channels_last=config.channels_last, norm=config.norm)
    autocast, scaler = _precision(config, device, effective, notes)
    steps_per_epoch = len(data.train_loader)
    if steps_per_epoch == 0:
        raise TunerError(
            f"batch_size={config.batch_size} leaves zero training steps on {config.data!r}; "
            "use a smaller batch_size or drop_last=False."
        )
    planned = _planned_steps(config, steps_per_epoch)
    return Run(
        config=config,
        device=device,
        data=data,
        model=model,
        forward=_compile(model, config, device, effective, notes),
        optimizer=_optimizer(model, config, device, effective, notes),
        scaler=scaler,
        autocast=autocast,
        criterion=nn.CrossEntropyLoss(label_smoothing=config.label_smoothing),
        mean=torch.tensor(data.mean, device=device).view(1, -1, 1, 1),
        std=torch.tensor(data.std, device=device).view(1, -1, 1, 1),
        train_batches=_train_batches(config, data, device, effective, notes),
        steps_per_epoch=steps_per_epoch,
        planned_steps=planned,
        warmup_steps=_warmup_steps(config, notes),
        effective=effective,
        notes=notes,
    )


def _num_classes(config: TrainConfig, data: DataBundle) -> int:
    if config.num_classes is None or data.on_device:
        return data.num_classes
    if config.num_classes < data.num_classes:
        raise TunerError(
            f"num_classes={config.num_classes} is fewer than the {data.num_classes} classes of "
            f"{config.data!r}; leave num_classes unset to take it from the data."
        )
    return config.num_classes


def _planned_steps(config: TrainConfig, steps_per_epoch: int) -> int | None:
    limits = [config.steps] if config.steps else []
    if config.epochs:
        limits.append(config.epochs * steps_per_epoch)
    return min(limits) if limits else None


COMPILE_WARMUP_STEPS = 3  # compile on step 1; max-autotune's CUDA graphs record on 2-3


def _warmup_steps(config: TrainConfig, notes: list[str]) -> int:
    if config.compile != "off" and config.warmup_steps < COMPILE_WARMUP_STEPS:
        notes.append(
            f"warmup_steps raised to {COMPILE_WARMUP_STEPS} so torch.compile time is not measured."
        )
        return COMPILE_WARMUP_STEPS
    return config.warmup_steps


def _precision(
    config: TrainConfig, device: torch.device, effective: dict, notes: list[str]
) -> tuple[Callable[[], contextlib.AbstractContextManager], torch.amp.GradScaler]:
    amp = config.amp
    if amp == "fp16" and device.type == "cpu":
        notes.append("amp=fp16 needs CUDA; fell back to bf16 autocast on cpu.")
        amp = "bf16"
    if amp == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        notes.append("amp=bf16 is not supported by this GPU; fell back to fp16 with GradScaler.")
        amp = "fp16"
    effective["amp"] = amp
    scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    if amp == "off":
        return contextlib.nullcontext, scaler
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return lambda: torch.autocast(device.type, dtype=dtype), scaler


def _optimizer(
    model: nn.Module, config: TrainConfig, device: torch.device, effective: dict, notes: list[str]
) -> torch.optim.Optimizer:
    # Weight decay on matrices and kernels only; biases, norms and embeddings' 1-d params skip it.
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    if config.fused_adamw:
        try:
            optimizer = torch.optim.AdamW(groups, lr=config.lr, fused=True)
            effective["fused_adamw"] = True
            return optimizer
        except (RuntimeError, ValueError) as exc:
            notes.append(f"fused AdamW is not available on {device.type} ({exc}); used foreach.")
    effective["fused_adamw"] = False
    return torch.optim.AdamW(groups, lr=config.lr)


def _compile(
    model: nn.Module, config: TrainConfig, device: torch.device, effective: dict, notes: list[str]
) -> Callable[[torch.Tensor], torch.Tensor]:
    mode = config.compile
    if mode != "off" and device.type == "cpu" and not _has_c_compiler():
        notes.append("torch.compile on cpu needs a C++ compiler (none found); ran eager.")
        mode = "off"
    effective["compile"] = mode
    if mode == "off":
        return model
    return torch.compile(model, mode=None if mode == "default" else mode)


def _has_c_compiler() -> bool:
    return any(shutil.which(cc) for cc in ("g++", "c++", "clang++"))


def _train_batches(
    config: TrainConfig, data: DataBundle, device: torch.device, effective: dict, notes: list[str]
) -> Any:
    cuda = device.type == "cuda"
    effective["pin_memory"] = config.pin_memory and cuda and not data.on_device
    effective["non_blocking"] = config.non_blocking and cuda and not data.on_device
    if cuda and data.on_device and (config.pin_memory or config.non_blocking):
        notes.append("pin_memory/non_blocking have nothing to copy: synthetic data is on the GPU.")
    effective["set_to_none"] = config.set_to_none
    effective["num_workers"] = 0 if data.on_device else config.num_workers
    effective["persistent_workers"] = config.persistent_workers and not data.on_device
    if config.pin_memory and not cuda:
        notes.append("pin_memory has no effect without CUDA; loader not pinned.")
    if config.non_blocking and not cuda:
        notes.append("non_blocking copies have no effect without CUDA (copies are no-ops).")
    prefetch = config.prefetch
    if prefetch == "cuda_stream" and not cuda:
        notes.append("prefetch=cuda_stream needs CUDA; fell back to the plain loader on cpu.")
        prefetch = "off"
    if prefetch == "cuda_stream" and data.on_device:
        notes.append("prefetch=cuda_stream has nothing to copy: synthetic data lives on the GPU.")
        prefetch = "off"
    effective["prefetch"] = prefetch
    if prefetch == "off":
        return data.train_loader
    if not config.pin_memory:
        notes.append("prefetch without pin_memory: host-to-device copies are not fully async.")
    return CudaPrefetcher(
        data.train_loader, device, data.mean, data.std, channels_last=config.channels_last
    )
