"""The registry of knobs: every speed technique and training knob, declared once; the ladders,
the report's technique table, the spaces' switches and a search's speed/training split derive
from it. A knob is **accuracy-neutral** when it changes speed and memory but not the maths of
training (a missing field is not); the others (AMP, norm, batch size, lr) only a training run
can judge. Its "off" value is the ``TrainConfig`` default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.config import TrainConfig, config_fields

__all__ = [
    "KNOBS",
    "Knob",
    "Rung",
    "accuracy_neutral_fields",
    "knob",
    "ladder",
    "ladder_knobs",
    "loader_knobs",
    "settings_text",
    "speed_knobs",
]

_DEFAULTS = TrainConfig()


@dataclass(frozen=True, kw_only=True)
class Knob:
    """One searchable setting of the engine."""

    field: str
    label: str
    accuracy_neutral: bool
    cpu: tuple[Any, ...] = ()  # the "on" values a CPU runs (the first is the ladder's)
    cuda: tuple[Any, ...] = ()  # the "on" values a GPU runs
    implies: Mapping[str, Any] = field(default_factory=dict)  # what an "on" value needs with it
    in_ladder: bool = False  # a rung of the technique ladder
    companion: bool = False  # only ever set by another knob's implies, never searched alone
    # far slower to build than a short CPU run (torch.compile): CPU probes leave it out
    slow_build: bool = False
    # only matters with more than one worker (DDP): one worker runs it off and says so
    needs_workers: bool = False
    # only acts on top of another knob switched on (prefetch_factor: DataLoader workers):
    # probed after that knob was kept, on top of it
    after: str | None = None
    files_only: bool = False  # acts on image files only (the decoder)
    per_core: bool = False  # its values count cores: a run tries only those it has cores for
    loader: bool = False  # a knob of the input pipeline (the report's "Input pipeline")
    # Its speed verdict depends on the training config, not only on the model, data, device and
    # precision: probed per norm layer (what it was measured to flip with), while every other
    # knob's verdict is settled once and shared (tuner.speed; reports/benchmarks/probe_verdicts.md).
    per_config: bool = False

    @property
    def off(self) -> Any:
        return getattr(_DEFAULTS, self.field)

    def values(self, *, cuda: bool) -> tuple[Any, ...]:
        return self.cuda if cuda else self.cpu

    def choices(self, *, cuda: bool) -> list[Any]:
        """Off, then every "on" value this kind of device can run (what a space searches)."""
        return [self.off, *(v for v in self.values(cuda=cuda) if v != self.off)]

    def settings(self, value: Any) -> dict[str, Any]:
        """The config changes that set this knob to ``value`` (with what "on" implies; "off"
        with its companions and riders off too)."""
        if value != self.off:
            return {self.field: value, **self.implies}
        companions = {k: _BY_FIELD[k].off for k in self.implies if _BY_FIELD[k].companion}
        riders = {k.field: k.off for k in KNOBS if k.after == self.field}
        return {self.field: value, **companions, **riders}

    def runnable_values(self, *, cuda: bool, cores: int) -> tuple[Any, ...]:
        """The "on" values a run with ``cores`` cores tries (a per-core knob's up to them)."""
        values = self.values(cuda=cuda)
        if not self.per_core:
            return values
        return tuple(v for v in values if v <= cores)


def _switch(field: str, label: str, **flags: bool) -> Knob:
    """An accuracy-neutral on/off knob that runs on a CPU and a GPU."""
    return Knob(field=field, label=label, accuracy_neutral=True, cpu=(True,), cuda=(True,), **flags)


KNOBS: tuple[Knob, ...] = (
    # Speed techniques, in ladder order. AMP changes the arithmetic, so it is not neutral.
    Knob(
        field="amp",
        label="mixed precision",
        accuracy_neutral=False,
        cpu=("bf16",),
        cuda=("bf16", "fp16"),
        in_ladder=True,
    ),
    _switch("set_to_none", "zero_grad(set_to_none)", in_ladder=True),
    Knob(
        field="pin_memory", label="pinned memory", accuracy_neutral=True, cuda=(True,), loader=True
    ),
    Knob(
        field="non_blocking",
        label="non_blocking copies (pinned)",
        accuracy_neutral=True,
        cuda=(True,),
        implies={"pin_memory": True},
        in_ladder=True,
        loader=True,
    ),
    Knob(
        field="prefetch",
        label="CUDA-stream prefetcher",
        accuracy_neutral=True,
        cuda=("cuda_stream",),
        implies={"pin_memory": True},
        in_ladder=True,
        loader=True,
    ),
    # A clear win with BatchNorm and a clear loss with GroupNorm on the shipped CPU workload
    # (1.18x [1.15-1.21] and 0.90x [0.83-0.96], bf16, batch 128): probed per norm layer.
    _switch("channels_last", "channels_last", in_ladder=True, per_config=True),
    _switch("fused_adamw", "fused AdamW", in_ladder=True),
    Knob(
        field="compile",
        label="torch.compile",
        accuracy_neutral=True,
        cpu=("default",),
        cuda=("default", "max-autotune"),
        in_ladder=True,
        slow_build=True,
    ),
    # The input pipeline. Workers keep their processes across epochs (persistent): a short probe
    # cannot see an epoch boundary, so persistence is set with them, not probed on its own.
    Knob(
        field="num_workers",
        label="DataLoader workers",
        accuracy_neutral=True,
        cpu=(1, 2, 4),
        cuda=(2, 4, 8),
        implies={"persistent_workers": True},
        per_core=True,
        loader=True,
    ),
    _switch("persistent_workers", "persistent workers", companion=True),
    Knob(
        field="prefetch_factor",
        label="DataLoader prefetch factor",
        accuracy_neutral=True,
        cpu=(4,),
        cuda=(4,),
        after="num_workers",
        loader=True,
    ),
    _switch("host_prefetch", "host prefetch thread", loader=True),
    # The decoders round differently (a level here and there): neutral within that rounding.
    Knob(
        field="decoder",
        label="JPEG decoder",
        accuracy_neutral=True,
        cpu=("decode_jpeg",),
        cuda=("decode_jpeg",),
        files_only=True,
        loader=True,
    ),
    # Data-parallel knobs: DistributedDataParallel's settings (more than one worker only).
    Knob(
        field="ddp_bucket_cap_mb",
        label="DDP bucket size",
        accuracy_neutral=True,
        cpu=(100,),
        cuda=(10, 100),
        needs_workers=True,
    ),
    _switch("ddp_gradient_as_bucket_view", "DDP gradients as bucket views", needs_workers=True),
    _switch("ddp_static_graph", "DDP static graph", needs_workers=True),
    # Training knobs: what a training run is for.
    Knob(
        field="norm",
        label="conv norm layers",
        accuracy_neutral=False,
        cpu=("batch", "group"),
        cuda=("batch", "group"),
    ),
    Knob(field="gn_groups", label="GroupNorm groups", accuracy_neutral=False),
    Knob(field="batch_size", label="batch size", accuracy_neutral=False),
    Knob(field="lr", label="learning rate", accuracy_neutral=False),
)

_BY_FIELD = {k.field: k for k in KNOBS}
assert set(_BY_FIELD) <= config_fields(), "every knob is a TrainConfig field"


def knob(name: str) -> Knob:
    return _BY_FIELD[name]


def accuracy_neutral_fields() -> tuple[str, ...]:
    return tuple(k.field for k in KNOBS if k.accuracy_neutral)


def settings_text(settings: Mapping[str, Any]) -> str:
    """``channels_last, num_workers=1`` (off knobs and companions unsaid), or ``plain``."""
    parts = [
        name if value is True else f"{name}={value}"
        for name, value in settings.items()
        if name in _BY_FIELD and not _BY_FIELD[name].companion and value != _BY_FIELD[name].off
    ]
    return ", ".join(parts) or "plain"


def speed_knobs(*, cuda: bool, workers: int = 1, files: bool = True) -> tuple[Knob, ...]:
    """The accuracy-neutral knobs worth trying here: runnable, not a companion, not slow to
    build on a CPU, not DDP's on one worker, not the decoder without image files."""
    return tuple(
        k
        for k in KNOBS
        if k.accuracy_neutral
        and k.values(cuda=cuda)
        and not k.companion
        and (cuda or not k.slow_build)
        and (workers > 1 or not k.needs_workers)
        and (files or not k.files_only)
    )


def loader_knobs() -> tuple[Knob, ...]:
    return tuple(k for k in KNOBS if k.loader)


def ladder_knobs() -> tuple[Knob, ...]:
    return tuple(k for k in KNOBS if k.in_ladder)


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: the knob it adds and the cumulative changes."""

    name: str
    knob: str | None  # None for the plain loop
    changes: Mapping[str, Any]  # everything switched on so far


def ladder(
    *, cuda: bool, amp: str | None = None, skip: Sequence[str] = (), autotune: bool = False
) -> tuple[list[Rung], list[str]]:
    """The plain loop, then each ladder knob added to the ones before (``amp``: the ``+amp``
    rung's mode; ``autotune``: ``+max-autotune`` last on a GPU); and a line per knob left out."""
    rungs, changes, left_out = [Rung("plain", None, {})], {}, []
    for entry in ladder_knobs():
        if entry.field in skip:
            continue
        values = entry.values(cuda=cuda)
        if not values:
            left_out.append(f"{entry.field}: needs CUDA")
            continue
        value = amp if entry.field == "amp" and amp else values[0]
        changes = {**changes, **entry.settings(value)}
        rungs.append(Rung(f"+{entry.field}", entry.field, dict(changes)))
    if autotune and cuda and "compile" not in skip:
        changes = {**changes, "compile": "max-autotune"}
        rungs.append(Rung("+max-autotune", "compile", dict(changes)))
    return rungs, left_out
