"""The one frozen, typed run config, built by every stage with ``TrainConfig.from_params``: a
misspelled key, a wrong type or an impossible combination is one :class:`TunerError` line. Each
field's help is its metadata (the CLI's flags); ``TrainConfig()`` is the plain loop.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from tuner.errors import TunerError
from tuner.usercode import absolute_file_ref

__all__ = [
    "TrainConfig",
    "bare_type",
    "check_settings",
    "config_fields",
    "field_help",
    "field_type",
    "load_config_file",
    "trial_threads",
]


def _field(default: Any, help: str) -> Any:
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default), metadata={"help": help})
    return dataclasses.field(default=default, metadata={"help": help})


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything one training run needs. Defaults are the plain fp32 loop on ``digits``."""

    # Workload: what is trained, on what.
    model: str = _field(
        "vit_tiny_r_s16_p8_224",
        "timm model name (timm.list_models()), or your own: module:function or "
        "file.py:function, a build_model(config, num_classes) -> nn.Module",
    )
    model_kwargs: Mapping[str, Any] = _field(
        {},
        "JSON object of extra kwargs of timm.create_model or of your build_model, "
        "e.g. '{\"depth\": 4}'",
    )
    data: str = _field(
        "digits",
        "digits | jpeg_digits | synthetic | synthetic_host | imagefolder:PATH | cifar10:PATH, or "
        "your own: "
        "module:function or file.py:function, a build_data(config) -> (train, val, classes)",
    )
    img_size: int = _field(32, "input image side in pixels (data is resized to it)")
    synthetic_size: int = _field(2048, "images per epoch for --data synthetic")
    num_classes: int | None = _field(None, "classifier outputs ('none': taken from the data)")

    # Loader.
    batch_size: int = _field(64, "training batch size (per worker in a data-parallel run)")
    num_workers: int = _field(0, "DataLoader worker processes")
    pin_memory: bool = _field(False, "page-locked host batches (CUDA only)")
    persistent_workers: bool = _field(False, "keep DataLoader workers alive across epochs")
    prefetch_factor: int | None = _field(
        None, "batches each DataLoader worker loads ahead ('none': torch's 2; needs num_workers)"
    )
    host_prefetch: bool = _field(
        False,
        "a background thread keeps the next batches ready while the step runs (the CPU form "
        "of prefetching; what overlaps loading with training when num_workers=0)",
    )
    decoder: Literal["pil", "decode_jpeg"] = _field(
        "pil",
        "image files' decoder: pil | decode_jpeg (torchvision.io, libjpeg-turbo on tensors; "
        "files that are not JPEG are read by PIL either way)",
    )
    drop_last: bool = _field(True, "drop the last incomplete training batch")
    skip_unreadable_images: bool = _field(
        False,
        "imagefolder: serve the next readable image in place of one that cannot be read, and "
        "count it in the result's skipped_images (default: such an image stops the run)",
    )

    # Optimization.
    lr: float = _field(1e-3, "peak learning rate (AdamW) at batch_size; N workers train at N x lr")
    weight_decay: float = _field(0.05, "AdamW weight decay on weight matrices/kernels")
    warmup_fraction: float = _field(
        0.05, "fraction of the budget spent in linear lr warm-up before cosine decay"
    )
    label_smoothing: float = _field(0.0, "cross-entropy label smoothing")
    grad_clip_norm: float | None = _field(
        None, "clip the gradient norm to this ('none': no clipping)"
    )
    fused_adamw: bool = _field(False, "fused AdamW kernel where available")

    # Speed techniques: each off by default.
    amp: Literal["off", "bf16", "fp16"] = _field(
        "off", "mixed precision: off | bf16 | fp16 (fp16 uses a GradScaler; CPU runs bf16)"
    )
    set_to_none: bool = _field(False, "zero_grad(set_to_none=True)")
    non_blocking: bool = _field(False, "non_blocking host-to-device copies (with --pin-memory)")
    prefetch: Literal["off", "cuda_stream"] = _field(
        "off", "off | cuda_stream: copy + normalize the next batch on a side CUDA stream"
    )
    channels_last: bool = _field(False, "channels-last memory format for model and input")
    compile: Literal["off", "default", "max-autotune"] = _field(
        "off", "torch.compile: off | default | max-autotune"
    )

    # Normalization of the convolutional layers: "native" keeps the model's own norm layers; the
    # others replace its convolutional norms.
    norm: Literal["native", "batch", "group", "layer"] = _field(
        "native", "convolutional norm layers: native | batch | group | layer"
    )
    gn_groups: int = _field(32, "groups for --norm group (must divide every layer's channels)")

    # Budget: the run stops at whichever given limit comes first (at least one is required).
    # The default model reaches ~98% val accuracy on digits in 6 epochs. Runs of different batch
    # sizes are compared at equal images (epochs or images), or at equal seconds, never steps.
    epochs: int | None = _field(6, "stop after this many epochs ('none': no epoch limit)")
    images: int | None = _field(
        None,
        "stop after this many training images, every worker's together, rounded up to whole "
        "steps ('none': no image limit)",
    )
    steps: int | None = _field(None, "stop after this many steps ('none': no step limit)")
    time_budget_s: float | None = _field(
        None, "stop after this many training seconds ('none': no time limit)"
    )

    # Measurement.
    warmup_steps: int = _field(5, "steps excluded from throughput (warm-up and compile)")
    target_accuracy: float | None = _field(
        None, "report the training time to reach this val accuracy"
    )
    eval_every_steps: int | None = _field(
        None, "evaluate every N steps ('none': at each epoch end, or as eval_every_images/_s say)"
    )
    eval_every_images: int | None = _field(
        None,
        "evaluate each time N more training images were seen, every worker's together (at the "
        "first step at or past each multiple: runs of any batch size report at equal images)",
    )
    eval_every_s: float | None = _field(
        None, "evaluate each time N more seconds of training passed (runs report at equal time)"
    )
    max_eval_batches: int | None = _field(
        None, "evaluate on at most N val batches, a fixed random sample ('none': all)"
    )

    # Data-parallel runs (DDP; torchrun or a search's trials start the workers): speed knobs
    # that only matter with more than one worker. batch_size is per worker.
    ddp_bucket_cap_mb: int = _field(25, "DDP gradient bucket size in MiB (torch's default)")
    ddp_gradient_as_bucket_view: bool = _field(
        False, "DDP gradients are views into its all-reduce buckets (one copy less)"
    )
    ddp_static_graph: bool = _field(
        False, "DDP static_graph: every step uses the same parameters (skips per-step checks)"
    )

    seed: int = _field(0, "random seed")
    device: str = _field("auto", "auto | cpu | cuda | cuda:N")
    torch_threads: int | None = _field(
        None,
        "CPU threads torch computes with (torch.set_num_threads; 'none': torch's default, one "
        "per core). A search's recommended config carries the threads its trials measured with",
    )

    def __post_init__(self) -> None:  # the first wrongly typed or impossible setting, named
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _checked_type(f.name, getattr(self, f.name)))
        for name in ("model", "data"):  # a file of the user's: the same file from any folder
            object.__setattr__(self, name, absolute_file_ref(getattr(self, name)))
        positive = ("img_size", "batch_size", "gn_groups", "synthetic_size", "ddp_bucket_cap_mb")
        for name in (*positive, *(("torch_threads",) if self.torch_threads is not None else ())):
            if not getattr(self, name) > 0:
                raise TunerError(f"{name}={getattr(self, name)} must be a positive integer.")
        if self.num_workers < 0:
            raise TunerError(f"num_workers={self.num_workers} is negative; use 0 or more.")
        if self.persistent_workers and self.num_workers == 0:
            raise TunerError(
                "persistent_workers needs num_workers > 0; set num_workers or drop it."
            )
        if self.prefetch_factor is not None and self.prefetch_factor < 1:
            raise TunerError(f"prefetch_factor={self.prefetch_factor} must be at least 1.")
        if self.prefetch_factor is not None and not self.num_workers:
            raise TunerError(
                f"prefetch_factor={self.prefetch_factor} needs num_workers > 0 (it is what each "
                "worker loads ahead); set num_workers or drop prefetch_factor."
            )
        if not self.lr > 0:
            raise TunerError(f"lr={self.lr} must be positive.")
        for name in ("warmup_fraction", "label_smoothing"):
            if not 0 <= getattr(self, name) < 1:
                raise TunerError(f"{name}={getattr(self, name)} must be in [0, 1).")
        if all(getattr(self, name) is None for name in _BUDGETS):
            raise TunerError("The run has no budget: give epochs, images, steps or time_budget_s.")
        given = [name for name in _EVAL_EVERY if getattr(self, name) is not None]
        if len(given) > 1:
            raise TunerError(
                f"{', '.join(given)} are set together; evaluate by one of them (set the others "
                "to none)."
            )
        for name in (*_BUDGETS, *_EVAL_EVERY, "max_eval_batches"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise TunerError(f"{name}={value} must be positive (or none for no limit).")
        if self.warmup_steps < 0:
            raise TunerError(f"warmup_steps={self.warmup_steps} is negative; use 0 or more.")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise TunerError(f"target_accuracy={self.target_accuracy} must be in (0, 1].")

    @classmethod
    def from_params(cls, params: Mapping[str, Any], *, ignore: Collection[str] = ()) -> TrainConfig:
        """Build a config from a mapping; the keys in ``ignore`` are dropped on purpose
        (search-only parameters such as ``base_lr``), any other unknown key is an error."""
        kept = {k: v for k, v in params.items() if k not in ignore or k in config_fields()}
        _check_known(kept)
        return cls(**kept)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that ``TrainConfig.from_params(d)`` turns back into this config."""
        return dataclasses.asdict(self)  # model_kwargs is a plain dict (_checked_type)

    def step_limit(self, *, world_size: int = 1) -> int | None:
        """The steps the ``steps`` and ``images`` limits allow (``None``: neither): the images
        at the global batch, rounded up, so every batch size trains the same images."""
        limits = [self.steps] if self.steps is not None else []
        if self.images is not None:
            limits.append(math.ceil(self.images / (self.batch_size * world_size)))
        return min(limits, default=None)

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied (and validated)."""
        return TrainConfig.from_params({**self.to_dict(), **changes})


_HINTS: dict[str, Any] = typing.get_type_hints(TrainConfig)
_BUDGETS = ("epochs", "images", "steps", "time_budget_s")  # the run's limits: the first ends it
_EVAL_EVERY = ("eval_every_steps", "eval_every_images", "eval_every_s")


def config_fields() -> frozenset[str]:
    """The names of every :class:`TrainConfig` field."""
    return frozenset(_HINTS)


def check_settings(params: Mapping[str, Any]) -> None:
    """Check each setting's name and type on its own, before the rest of its config is known
    (a search checks its ``--set`` overrides so, before it starts Ray)."""
    _check_known(params)
    for name, value in params.items():
        _checked_type(name, value)


def field_type(name: str) -> tuple[Any, bool]:
    """A :class:`TrainConfig` field's type without ``None``, and whether it may be ``None``."""
    return bare_type(_HINTS[name])


def bare_type(hint: Any) -> tuple[Any, bool]:
    """A type hint without ``None`` (``int | None`` -> ``int``), and whether it allowed it."""
    optional = get_origin(hint) in (typing.Union, types.UnionType) and type(None) in get_args(hint)
    args = [a for a in get_args(hint) if a is not type(None)]
    return (args[0] if optional and len(args) == 1 else hint), optional


def field_help(name: str) -> str:
    """The help text of one :class:`TrainConfig` field (its metadata)."""
    return TrainConfig.__dataclass_fields__[name].metadata["help"]


def trial_threads(cpus_per_trial: float, gpus_per_trial: float) -> int:
    """The torch threads a search's trial computes with, given its CPU and GPU share. A CPU
    trial leaves one core to its data loader and Ray: on a small machine, OpenMP threads on
    oversubscribed cores run several times slower than one fewer thread."""
    cores = max(1, int(cpus_per_trial))
    return cores if gpus_per_trial > 0 else max(1, cores - 1)


def load_config_file(path: str | Path) -> TrainConfig:
    """Read a JSON config (as written by ``tuner report``, or a ``tuner train --json`` result:
    its ``"config"`` key) into a :class:`TrainConfig`."""

    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TunerError(f"Config file {path} does not exist; check the path.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TunerError(f"Config file {path} cannot be read ({exc}).") from None
    except json.JSONDecodeError as exc:
        raise TunerError(
            f"Config file {path} is not valid JSON ({exc.msg}, line {exc.lineno})."
        ) from None
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        data = data["config"]
    if not isinstance(data, dict):
        raise TunerError(f"Config file {path} must hold a JSON object of run settings.")
    return TrainConfig.from_params(data)


def _check_known(params: Mapping[str, Any]) -> None:
    unknown = sorted(set(params) - config_fields())
    if unknown:
        raise TunerError(
            f"Unknown run setting(s) {', '.join(unknown)}; "
            f"known settings are: {', '.join(sorted(config_fields()))}."
        )


_EXPECTED = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}


def _checked_type(name: str, value: Any) -> Any:
    """``value`` if it fits the field's type (an int is taken where a float is expected)."""
    base, optional = field_type(name)
    if value is None and optional:
        return None
    if get_origin(base) is Literal:
        if isinstance(value, str) and value in get_args(base):
            return value
        raise TunerError(f"{name}={value!r} is not one of {', '.join(get_args(base))}.")
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if (base is bool and isinstance(value, bool)) or (base is str and isinstance(value, str)):
        return value
    if base is int and number and (isinstance(value, int) or value.is_integer()):
        return int(value)
    if base is float and number and math.isfinite(value):
        return float(value)
    if base not in _EXPECTED and isinstance(value, Mapping):  # model_kwargs
        return dict(value)
    expected = _EXPECTED.get(base, "a JSON object") + (" or none" if optional else "")
    raise TunerError(f"{name}={value!r} is a {type(value).__name__}; {name} must be {expected}.")
