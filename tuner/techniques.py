"""The registry of knobs: every speed technique and training knob, declared once.

Each :class:`Knob` names its :class:`~tuner.config.TrainConfig` field, the values that turn it on
(on a CPU and on a GPU), the companion settings an "on" value needs, a label for tables, and
whether it is **accuracy-neutral**: it changes speed and memory but not the maths of training
(zero_grad's set_to_none, pinned memory and non_blocking copies, the CUDA prefetcher,
channels_last, torch.compile, fused AdamW, DataLoader workers). A knob that is not neutral (AMP,
the norm layers and their group count, batch size, lr) changes what is learned, so only a
training run can judge it. A field missing from the registry counts as not neutral.

Its "off" value is the ``TrainConfig`` default and its help text the field's metadata, so
neither is restated here. Everything else derives from this table: the technique ladder of
``tuner bench`` and ``tuner ablate`` (:func:`ladder`), the ablation's skippable rungs, the
report's technique table, the spaces' switch helper and the speed/training split of a search.
Adding a technique is one entry here plus its use in the engine.
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
    "settings_text",
    "speed_knobs",
]

_DEFAULTS = TrainConfig()


@dataclass(frozen=True, kw_only=True)
class Knob:
    """One searchable setting of the engine.

    Attributes:
        field: the ``TrainConfig`` field it sets.
        label: a short name for tables and plots.
        accuracy_neutral: changes speed and memory only, never the maths of training.
        cpu: the values that turn it on and run on a CPU (the first is the ladder's).
        cuda: the values that turn it on and run on a GPU.
        implies: settings an "on" value needs with it (non_blocking needs pinned memory).
        in_ladder: a rung of the technique ladder (``tuner bench``, ``tuner ablate``).
        companion: only ever set by another knob's ``implies`` (never searched alone).
        slow_build: turning it on costs far more than a short run on a CPU (torch.compile:
            tens of seconds per build), so CPU probes and searches leave it out by default.
        needs_workers: only matters in a data-parallel run (the DDP knobs): a single worker
            runs it off, records that in ``effective`` and says so in a note.
    """

    field: str
    label: str
    accuracy_neutral: bool
    cpu: tuple[Any, ...] = ()
    cuda: tuple[Any, ...] = ()
    implies: Mapping[str, Any] = field(default_factory=dict)
    in_ladder: bool = False
    companion: bool = False
    slow_build: bool = False
    needs_workers: bool = False

    @property
    def off(self) -> Any:
        """The value that leaves it off: the ``TrainConfig`` default."""
        return getattr(_DEFAULTS, self.field)

    def values(self, *, cuda: bool) -> tuple[Any, ...]:
        """The "on" values that can run on this kind of device."""
        return self.cuda if cuda else self.cpu

    def choices(self, *, cuda: bool) -> list[Any]:
        """Off, then every "on" value this kind of device can run (what a space searches)."""
        return [self.off, *(v for v in self.values(cuda=cuda) if v != self.off)]

    def settings(self, value: Any) -> dict[str, Any]:
        """The config changes that set this knob to ``value``: with what an "on" value implies,
        and, for "off", with its companions off too (no persistent workers without workers)."""
        if value != self.off:
            return {self.field: value, **self.implies}
        companions = {k: _BY_FIELD[k].off for k in self.implies if _BY_FIELD[k].companion}
        return {self.field: value, **companions}


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
    Knob(
        field="set_to_none",
        label="zero_grad(set_to_none)",
        accuracy_neutral=True,
        cpu=(True,),
        cuda=(True,),
        in_ladder=True,
    ),
    Knob(field="pin_memory", label="pinned memory", accuracy_neutral=True, cuda=(True,)),
    Knob(
        field="non_blocking",
        label="non_blocking copies (pinned)",
        accuracy_neutral=True,
        cuda=(True,),
        implies={"pin_memory": True},
        in_ladder=True,
    ),
    Knob(
        field="prefetch",
        label="CUDA-stream prefetcher",
        accuracy_neutral=True,
        cuda=("cuda_stream",),
        implies={"pin_memory": True},
        in_ladder=True,
    ),
    Knob(
        field="channels_last",
        label="channels_last",
        accuracy_neutral=True,
        cpu=(True,),
        cuda=(True,),
        in_ladder=True,
    ),
    Knob(
        field="fused_adamw",
        label="fused AdamW",
        accuracy_neutral=True,
        cpu=(True,),
        cuda=(True,),
        in_ladder=True,
    ),
    Knob(
        field="compile",
        label="torch.compile",
        accuracy_neutral=True,
        cpu=("default",),
        cuda=("default", "max-autotune"),
        in_ladder=True,
        slow_build=True,
    ),
    Knob(
        field="num_workers",
        label="DataLoader workers",
        accuracy_neutral=True,
        cpu=(1,),
        cuda=(2, 4, 8),
        implies={"persistent_workers": True},
    ),
    Knob(
        field="persistent_workers",
        label="persistent workers",
        accuracy_neutral=True,
        cpu=(True,),
        cuda=(True,),
        companion=True,
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
    Knob(
        field="ddp_gradient_as_bucket_view",
        label="DDP gradients as bucket views",
        accuracy_neutral=True,
        cpu=(True,),
        cuda=(True,),
        needs_workers=True,
    ),
    Knob(
        field="ddp_static_graph",
        label="DDP static graph",
        accuracy_neutral=True,
        cpu=(True,),
        cuda=(True,),
        needs_workers=True,
    ),
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
    """The registry entry of a field (``KeyError`` if it is not a knob)."""
    return _BY_FIELD[name]


def accuracy_neutral_fields() -> tuple[str, ...]:
    return tuple(k.field for k in KNOBS if k.accuracy_neutral)


def settings_text(settings: Mapping[str, Any]) -> str:
    """Speed settings in a few words: ``channels_last, num_workers=1`` (knobs left off and
    companions unsaid), ``plain`` when nothing is on."""
    parts = []
    for field_name, value in settings.items():
        entry = _BY_FIELD.get(field_name)
        if entry is None or entry.companion or value == entry.off:
            continue
        parts.append(field_name if value is True else f"{field_name}={value}")
    return ", ".join(parts) or "plain"


def speed_knobs(*, cuda: bool, workers: int = 1) -> tuple[Knob, ...]:
    """The accuracy-neutral knobs worth trying on this kind of device and number of workers:
    runnable there, not a companion, (on a CPU) not slow to build, and (one worker) not DDP's."""
    return tuple(
        k
        for k in KNOBS
        if k.accuracy_neutral
        and k.values(cuda=cuda)
        and not k.companion
        and (cuda or not k.slow_build)
        and (workers > 1 or not k.needs_workers)
    )


def ladder_knobs() -> tuple[Knob, ...]:
    return tuple(k for k in KNOBS if k.in_ladder)


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: its name, the knob it adds and the cumulative changes."""

    name: str
    knob: str | None  # None for the plain loop
    changes: Mapping[str, Any]  # everything switched on so far


def ladder(
    *, cuda: bool, amp: str | None = None, skip: Sequence[str] = (), autotune: bool = False
) -> tuple[list[Rung], list[str]]:
    """The technique ladder: the plain loop, then each ladder knob added to the ones before.

    Args:
        cuda: build it for a GPU (else CUDA-only knobs are left out and listed).
        amp: the AMP mode of the ``+amp`` rung (default: the knob's first value here).
        skip: knob fields to leave out.
        autotune: on a GPU, end with a ``+max-autotune`` rung (compile's second mode).

    Returns:
        The rungs, and a line per knob left out because this device cannot run it.
    """
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
