"""What a run is built from, once (:class:`RunParts`). A technique that cannot run here falls
back and says so: :func:`_decide` settles every setting before anything is built from it
(``RunParts.effective``: what ran; ``RunParts.notes``: one line per fallback).
"""

from __future__ import annotations

import contextlib
import math
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from tuner.config import TrainConfig
from tuner.engine.data import DataBundle, build_data, load_ahead
from tuner.engine.distributed import World
from tuner.engine.meters import MemoryMeter, ThroughputMeter
from tuner.engine.model import build_model
from tuner.engine.prefetch import CudaPrefetcher, HostPrefetcher
from tuner.engine.usercheck import ITEMS_IN_A_RUN, check_user_code, uses_user_code
from tuner.errors import TunerError
from tuner.techniques import KNOBS

__all__ = [
    "COMPILE_WARMUP_STEPS",
    "Effective",
    "RunParts",
    "Schedule",
    "build_parts",
    "resolve_device",
]


@dataclass(frozen=True)
class Schedule:
    """The budget and the learning rate: linear warm-up, then cosine to zero. ``lr`` is the
    peak at the global batch: ``config.lr`` (given for ``batch_size`` images) x the workers."""

    lr: float
    warmup_fraction: float
    steps_per_epoch: int
    planned_steps: int | None  # None: only a time budget
    time_budget_s: float | None

    def progress(self, step: int, train_time_s: float) -> float:
        """Fraction of the budget used: the furthest of steps and training time."""
        done = step / self.planned_steps if self.planned_steps else 0.0
        if self.time_budget_s:
            done = max(done, train_time_s / self.time_budget_s)
        return min(done, 1.0)

    def lr_at(self, progress: float) -> float:
        if progress < self.warmup_fraction:
            return self.lr * min(1.0, max(progress, 1e-3) / self.warmup_fraction)
        rest = (progress - self.warmup_fraction) / (1.0 - self.warmup_fraction)
        return self.lr * 0.5 * (1.0 + math.cos(math.pi * min(rest, 1.0)))


@dataclass(frozen=True)
class Effective:
    """What actually ran, each setting after its fallbacks (``RunResult.effective`` is its
    ``asdict``: the trials table reads these field names per knob)."""

    device: str
    channels_last: bool
    norm: str
    gn_groups: int | None  # only with GroupNorm: BatchNorm and the others run with none
    amp: str
    lr: float  # the peak lr at the global batch (config.lr x the workers)
    batch_size: int  # the global batch a step trains on
    ddp_bucket_cap_mb: int  # the DDP knobs: their off values on one worker (no DDP)
    ddp_gradient_as_bucket_view: bool
    ddp_static_graph: bool
    compile: str
    fused_adamw: bool
    pin_memory: bool
    non_blocking: bool
    set_to_none: bool
    num_workers: int
    persistent_workers: bool
    prefetch_factor: int | None
    decoder: str
    prefetch: str
    host_prefetch: bool
    warmup_steps: int  # steps left out of throughput: config's, raised for compile's


@dataclass(frozen=True)
class RunParts:
    """The pieces of one run, built once."""

    config: TrainConfig
    device: torch.device
    world: World
    data: DataBundle
    model: nn.Module  # the uncompiled, unwrapped module: checkpoints and evaluation use it
    forward: Callable[[torch.Tensor], torch.Tensor]  # DDP-wrapped, compiled or not: training
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    autocast: Callable[[], contextlib.AbstractContextManager]
    criterion: nn.Module
    mean: torch.Tensor
    std: torch.Tensor
    train_batches: Iterable[tuple[torch.Tensor, torch.Tensor]]  # loader, or its prefetcher
    schedule: Schedule
    throughput: ThroughputMeter
    memory: MemoryMeter
    effective: Effective
    notes: list[str]


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda if available else cpu; an unavailable CUDA request is an error. In a
    data-parallel run, ``auto`` and ``cuda`` are each worker's own GPU (``LOCAL_RANK``)."""
    world = World.current()
    if name in ("auto", "cuda") and torch.cuda.is_available():
        return world.local_cuda() if world.size > 1 else torch.device("cuda")
    if name == "auto":
        return torch.device("cpu")
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


def prepare(config: TrainConfig) -> None:
    """Pay the process's one-time costs (the device's start, data kept per process) before a
    trial's speed probes, so they count as setup, not as its first probe run."""
    device = resolve_device(config.device)
    if device.type == "cuda":
        torch.zeros(1, device=device)  # the CUDA context: a second or more on a cold process
    load_ahead(config)


def build_parts(
    config: TrainConfig, device: torch.device, memory: MemoryMeter, *, dataparallel: bool = False
) -> RunParts:
    """Build data, model, precision, optimizer, DDP (or ``dataparallel``) and compile for
    ``config`` on ``device`` (TunerError: bad input)."""
    torch.manual_seed(config.seed)
    world = World.current()
    data = build_data(config, device, world)
    classes = _num_classes(config, data)
    memory_format = torch.channels_last if config.channels_last else torch.preserve_format
    model = build_model(config, classes).to(device, memory_format=memory_format)
    if uses_user_code(config):  # one line for bad user code, before anything trains
        check_user_code(config, data, model, num_classes=classes, items=ITEMS_IN_A_RUN)
    ran, notes = _decide(config, device, world, data, model, dataparallel=dataparallel)
    autocast, scaler = _precision(ran.amp, device)
    wrapped = _data_parallel(model, ran, world) if world.size > 1 else model
    wrapped = nn.DataParallel(wrapped) if dataparallel else wrapped
    return RunParts(
        config=config,
        device=device,
        world=world,
        data=data,
        model=model,
        forward=_compile(wrapped, ran.compile),
        optimizer=_optimizer(model, config, ran),
        scaler=scaler,
        autocast=autocast,
        criterion=nn.CrossEntropyLoss(label_smoothing=config.label_smoothing),
        mean=torch.tensor(data.mean, device=device).view(1, -1, 1, 1),
        std=torch.tensor(data.std, device=device).view(1, -1, 1, 1),
        train_batches=_train_batches(data, device, ran),
        schedule=_schedule(config, ran.lr, len(data.train_loader), world.size),
        throughput=ThroughputMeter(device, ran.warmup_steps),
        memory=memory,
        effective=ran,
        notes=notes,
    )


def _decide(
    config: TrainConfig,
    device: torch.device,
    world: World,
    data: DataBundle,
    model: nn.Module,
    *,
    dataparallel: bool = False,
) -> tuple[Effective, list[str]]:
    """Every setting after its fallbacks, and one note per fallback (the data's first)."""
    notes = list(data.notes)
    amp = _amp(config, device, notes)
    _check_steps(config, len(data.train_loader))
    lr, batch_size = _global_batch(config, world, notes)
    warmup_steps = _warmup_steps(config, notes)
    ddp = _ddp_knobs(config, world, notes)  # the registry's DDP knobs, by field name
    if dataparallel:
        _check_dataparallel(device, world, notes)
    compile_mode = _compile_mode(config, device, notes)
    fused = _fused_adamw(config, model, device, notes)
    cuda, on_device = device.type == "cuda", data.on_device
    prefetch = _input_pipeline(config, data, device, notes)
    ran = Effective(
        device=str(device),
        channels_last=config.channels_last,
        norm=config.norm,
        gn_groups=config.gn_groups if config.norm == "group" else None,
        amp=amp,
        lr=lr,
        batch_size=batch_size,
        **ddp,
        compile=compile_mode,
        fused_adamw=fused,
        pin_memory=config.pin_memory and cuda and not on_device,
        non_blocking=config.non_blocking and cuda and not on_device,
        set_to_none=config.set_to_none,
        num_workers=0 if on_device else config.num_workers,
        persistent_workers=config.persistent_workers and not on_device,
        prefetch_factor=None if on_device else config.prefetch_factor,
        decoder=config.decoder if data.files else "pil",
        prefetch=prefetch,
        host_prefetch=config.host_prefetch and not on_device,
        warmup_steps=warmup_steps,
    )
    return ran, notes


def _check_steps(config: TrainConfig, steps_per_epoch: int) -> None:
    if steps_per_epoch == 0:
        raise TunerError(
            f"batch_size={config.batch_size} leaves zero training steps on {config.data!r}; "
            "use a smaller batch_size or drop_last=False."
        )


def _global_batch(config: TrainConfig, world: World, notes: list[str]) -> tuple[float, int]:
    """The peak lr and the global batch, as the optimizer sees them."""
    lr, batch_size = config.lr * world.size, config.batch_size * world.size
    if world.size > 1:
        notes.append(
            f"lr {config.lr:g} is for batch_size={config.batch_size}; {world.size} workers "
            f"train a global batch of {batch_size}, so the peak lr is {lr:g}."
        )
    return lr, batch_size


def _schedule(config: TrainConfig, lr: float, steps_per_epoch: int, world_size: int) -> Schedule:
    limit = config.step_limit(world_size=world_size)
    limits = [limit] if limit is not None else []
    if config.epochs:
        limits.append(config.epochs * steps_per_epoch)
    planned = min(limits, default=None)
    return Schedule(lr, config.warmup_fraction, steps_per_epoch, planned, config.time_budget_s)


def _num_classes(config: TrainConfig, data: DataBundle) -> int:
    if config.num_classes is None or data.on_device:
        return data.num_classes
    if config.num_classes < data.num_classes:
        raise TunerError(
            f"num_classes={config.num_classes} is fewer than the {data.num_classes} classes of "
            f"{config.data!r}; leave num_classes unset to take it from the data."
        )
    return config.num_classes


COMPILE_WARMUP_STEPS = 3  # compile on step 1; max-autotune's CUDA graphs record on 2-3


def warmup_steps_of(config: TrainConfig) -> int:
    """The steps left out of throughput: ``config``'s, enough for compile's."""
    return max(config.warmup_steps, COMPILE_WARMUP_STEPS if config.compile != "off" else 0)


def _warmup_steps(config: TrainConfig, notes: list[str]) -> int:
    steps = warmup_steps_of(config)
    if steps > config.warmup_steps:
        notes.append(f"warmup_steps raised to {steps} so torch.compile time is not measured.")
    return steps


def _amp(config: TrainConfig, device: torch.device, notes: list[str]) -> str:
    amp = config.amp
    if amp == "fp16" and device.type == "cpu":
        notes.append("amp=fp16 needs CUDA; fell back to bf16 autocast on cpu.")
        amp = "bf16"
    if amp == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        notes.append("amp=bf16 is not supported by this GPU; fell back to fp16 with GradScaler.")
        amp = "fp16"
    return amp


def _precision(
    amp: str, device: torch.device
) -> tuple[Callable[[], contextlib.AbstractContextManager], torch.amp.GradScaler]:
    scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    if amp == "off":
        return contextlib.nullcontext, scaler
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return lambda: torch.autocast(device.type, dtype=dtype), scaler


def _param_groups(model: nn.Module, config: TrainConfig) -> list[dict[str, Any]]:
    # Weight decay on matrices and kernels only; biases, norms and embeddings' 1-d params skip it.
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]


def _optimizer(model: nn.Module, config: TrainConfig, ran: Effective) -> torch.optim.Optimizer:
    # fused=None, not False, where it does not run: AdamW picks its default (foreach) then.
    fused = ran.fused_adamw or None
    return torch.optim.AdamW(_param_groups(model, config), lr=config.lr, fused=fused)


def _fused_adamw(
    config: TrainConfig, model: nn.Module, device: torch.device, notes: list[str]
) -> bool:
    """Whether fused AdamW runs on these parameters: tried on them (free: state comes later)."""
    if not config.fused_adamw:
        return False
    try:
        torch.optim.AdamW(_param_groups(model, config), lr=config.lr, fused=True)
    except (RuntimeError, ValueError) as exc:
        notes.append(f"fused AdamW is not available on {device.type} ({exc}); used foreach.")
        return False
    return True


def _compile_mode(config: TrainConfig, device: torch.device, notes: list[str]) -> str:
    mode = config.compile
    compilers = ("g++", "c++", "clang++")
    if mode != "off" and device.type == "cpu" and not any(map(shutil.which, compilers)):
        notes.append("torch.compile on cpu needs a C++ compiler (none found); ran eager.")
        mode = "off"
    return mode


def _compile(model: nn.Module, mode: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if mode == "off":
        return model
    return torch.compile(model, mode=None if mode == "default" else mode)


def _ddp_knobs(config: TrainConfig, world: World, notes: list[str]) -> dict[str, Any]:
    """The DDP knobs as they run: off on one worker (no DDP)."""
    knobs = [k for k in KNOBS if k.needs_workers]
    if world.size > 1:
        return {k.field: getattr(config, k.field) for k in knobs}
    asked = [k.field for k in knobs if getattr(config, k.field) != k.off]
    if asked:
        notes.append(f"{', '.join(asked)}: needs more than one worker; ran without DDP.")
    return {k.field: k.off for k in knobs}


def _data_parallel(model: nn.Module, ran: Effective, world: World) -> nn.Module:
    cuda = next(model.parameters()).device
    return DistributedDataParallel(
        model,
        device_ids=[cuda.index] if cuda.type == "cuda" else None,
        bucket_cap_mb=ran.ddp_bucket_cap_mb,
        gradient_as_bucket_view=ran.ddp_gradient_as_bucket_view,
        static_graph=ran.ddp_static_graph,
    )


def _check_dataparallel(device: torch.device, world: World, notes: list[str]) -> None:
    gpus = torch.cuda.device_count()
    if world.size > 1 or device.type != "cuda" or gpus < 2:
        raise TunerError(
            f"DataParallel needs one process on 2 or more CUDA GPUs (here: {gpus} GPUs, "
            f"{world.size} processes); run on such a machine without a process group."
        )
    notes.append(f"DataParallel over {gpus} GPUs: each batch is split across them.")


def _input_pipeline(
    config: TrainConfig, data: DataBundle, device: torch.device, notes: list[str]
) -> str:
    """The input pipeline's fallback notes; the prefetch that runs."""
    cuda, on_device = device.type == "cuda", data.on_device
    if cuda and on_device and (config.pin_memory or config.non_blocking):
        notes.append("pin_memory/non_blocking have nothing to copy: synthetic data is on the GPU.")
    if on_device and config.num_workers:
        notes.append("num_workers has nothing to load: synthetic data lives on the device.")
    if config.decoder != "pil" and not data.files:
        notes.append(f"decoder={config.decoder} has nothing to decode: no image files here.")
    if config.pin_memory and not cuda:
        notes.append("pin_memory has no effect without CUDA; loader not pinned.")
    if config.non_blocking and not cuda:
        notes.append("non_blocking copies have no effect without CUDA (copies are no-ops).")
    prefetch = config.prefetch
    if prefetch == "cuda_stream" and not cuda:
        notes.append("prefetch=cuda_stream needs CUDA; fell back to the plain loader on cpu.")
        prefetch = "off"
    if prefetch == "cuda_stream" and on_device:
        notes.append("prefetch=cuda_stream has nothing to copy: synthetic data lives on the GPU.")
        prefetch = "off"
    if config.host_prefetch and on_device:
        notes.append("host_prefetch has nothing to load: synthetic data lives on the device.")
    if prefetch != "off" and not config.pin_memory:
        notes.append("prefetch without pin_memory: host-to-device copies are not fully async.")
    return prefetch


def _train_batches(
    data: DataBundle, device: torch.device, ran: Effective
) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    loader = HostPrefetcher(data.train_loader) if ran.host_prefetch else data.train_loader
    if ran.prefetch == "off":
        return loader
    return CudaPrefetcher(loader, device, data.mean, data.std, channels_last=ran.channels_last)
