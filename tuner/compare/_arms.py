"""Arms: configurations that differ in one change, each with the arm it is compared with."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.config import TrainConfig
from tuner.techniques import KNOBS, ladder

REFERENCE = "recommended"
PLAIN = "plain loop"


@dataclass(frozen=True)
class Arm:
    """One configuration of a comparison.

    Attributes:
        name: unique within the comparison (``+channels_last``, ``groupnorm/8``, ...).
        group: which comparison it belongs to (``ladder``, ``norm``, ``effects``, ...).
        config: what runs.
        changes: the settings this arm changes against its reference (for fallback checks).
        reference: the arm it is compared with (``None``: it is a reference itself).
        baseline: the arm every arm of its group is also compared with.
        measure: how this arm is measured when not by the comparison's own ``measure`` (the
            ablation's DataParallel and DDP arms each run in fresh processes).
    """

    name: str
    group: str
    config: TrainConfig
    changes: Mapping[str, Any] = field(default_factory=dict)
    reference: str | None = None
    baseline: str | None = None
    measure: Callable[[TrainConfig], Any] | None = None


def plan_ladder(
    base: TrainConfig,
    *,
    cuda: bool,
    amp: str | None = None,
    skip: Sequence[str] = (),
    autotune: bool = False,
) -> tuple[list[Arm], list[str]]:
    """The technique ladder from the registry as arms: each compared with the rung before.

    Returns:
        The arms (the first is the plain loop, named ``plain``), and the knobs left out
        because this device cannot run them.
    """
    rungs, left_out = ladder(cuda=cuda, amp=amp, skip=skip, autotune=autotune)
    arms: list[Arm] = []
    for rung in rungs:
        before = arms[-1].config.to_dict() if arms else {}
        changes = {k: v for k, v in rung.changes.items() if k not in before or before[k] != v}
        reference = arms[-1].name if arms else None
        config = base.replace(**rung.changes)
        arms.append(Arm(rung.name, "ladder", config, changes, reference, "plain"))
    return arms, left_out


def plan_toggles(
    config: TrainConfig, *, cuda: bool, skip: Mapping[str, str] | None = None
) -> tuple[list[Arm], list[str]]:
    """Arms around ``config``: itself, each applicable knob of the registry switched the other
    way (one at a time), the other norm choice, and the plain loop. All are compared with
    ``config`` (the arm named :data:`REFERENCE`).

    Args:
        skip: knob fields to leave out, each with the reason shown to the user.

    Returns:
        The arms, and a line per knob left out (skipped, or not runnable on this device).
    """
    skip = skip or {}
    arms = [Arm(REFERENCE, "effects", config)]
    left_out: list[str] = []
    current = config.to_dict()
    for entry in KNOBS:
        # Companions move with their knob; batch size and lr are not toggles; DDP's knobs do
        # nothing in the one process measuring effects.
        not_a_toggle = not entry.cpu and not entry.cuda and entry.field != "norm"
        if entry.companion or entry.needs_workers or not_a_toggle:
            continue
        if entry.field in skip:
            left_out.append(f"{entry.field}: {skip[entry.field]}")
            continue
        targets = _toggle_targets(entry, current[entry.field], cuda=cuda)
        if not targets and entry.field != "norm":  # norm: the model's own layers, no choice
            left_out.append(f"{entry.field}: needs CUDA")
        for target in targets:
            changes = entry.settings(target)
            sign = "+" if target else "-"
            name = f"{sign}{entry.field}" if isinstance(target, bool) else f"{entry.field}={target}"
            arms.append(Arm(name, "effects", config.replace(**changes), changes, REFERENCE))
    plain = _plain_loop(config)
    if plain:
        arms.append(Arm(PLAIN, "effects", config.replace(**plain), plain, REFERENCE))
    return arms, left_out


def _plain_loop(config: TrainConfig) -> dict[str, Any]:
    """The changes that turn every speed technique of ``config`` off (fp32, no workers)."""
    current = config.to_dict()
    changes: dict[str, Any] = {}
    for entry in KNOBS:
        if (entry.accuracy_neutral or entry.in_ladder) and current[entry.field] != entry.off:
            changes.update(entry.settings(entry.off))
    return {k: v for k, v in changes.items() if current[k] != v}


def _toggle_targets(entry: Any, value: Any, *, cuda: bool) -> list[Any]:
    if entry.field == "norm":
        return [v for v in entry.values(cuda=cuda) if v != value] if value != "native" else []
    on = entry.values(cuda=cuda)
    if value == entry.off:
        return list(on[:1])
    return [entry.off, *(v for v in on if v != value and entry.field == "amp")]
