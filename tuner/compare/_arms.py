"""Arms: configurations that differ in one change, each with the arm it is compared with."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.config import TrainConfig
from tuner.techniques import KNOBS, knob, ladder, loader_knobs

REFERENCE = "recommended"
PLAIN = "plain loop"
PLAIN_LOADER = "plain input pipeline"  # every loader knob off together, the rest as recommended


@dataclass(frozen=True)
class Arm:
    """One configuration of a comparison."""

    name: str  # unique within the comparison (``+channels_last``, ``groupnorm/8``, ...)
    group: str  # the comparison it belongs to (``ladder``, ``norm``, ``effects``, ...)
    config: TrainConfig  # what runs
    changes: Mapping[str, Any] = field(default_factory=dict)  # vs its reference (fallbacks)
    reference: str | None = None  # the arm it is compared with (None: it is a reference)
    baseline: str | None = None  # the arm every arm of its group is also compared with
    # Its own measurement, not the comparison's (the ablation's DataParallel and DDP arms each
    # run in fresh processes).
    measure: Callable[[TrainConfig], Any] | None = None


def plan_ladder(
    base: TrainConfig,
    *,
    cuda: bool,
    amp: str | None = None,
    skip: Sequence[str] = (),
    autotune: bool = False,
) -> tuple[list[Arm], list[str]]:
    """The technique ladder as arms, each vs the rung before, and the knobs left out here."""
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
    """Arms around ``config`` (:data:`REFERENCE`), each vs it: every applicable knob toggled
    alone, the other norm, the plain loop; and a line per knob left out (``skip``: field ->
    reason)."""
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
        inert = _inert(entry, current)
        if inert:
            left_out.append(f"{entry.field}: {inert}")
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
    loader = _plain_loop(config, loader_knobs())
    if len([k for k in loader_knobs() if k.field in loader]) >= 2:  # one: its own toggle says it
        arms.append(Arm(PLAIN_LOADER, "effects", config.replace(**loader), loader, REFERENCE))
    return arms, left_out


def _inert(entry: Any, current: Mapping[str, Any]) -> str:
    """Why toggling ``entry`` cannot change this config ("" when it can)."""
    if entry.after and current[entry.after] == knob(entry.after).off:
        return f"acts only with {entry.after}, which is off"
    if entry.files_only:
        from tuner.engine.data import data_source

        if not data_source(str(current["data"]))[0].files:
            return "the data is not image files"
    return ""


def plain_loop(config: TrainConfig) -> TrainConfig:
    """``config`` with every speed technique off (fp32, no workers): what effects and seeds
    compare with."""
    changes = _plain_loop(config)
    return config.replace(**changes) if changes else config


def _plain_loop(config: TrainConfig, knobs: Sequence[Any] = KNOBS) -> dict[str, Any]:
    """The changes that turn every technique of ``knobs`` off in ``config``."""
    current = config.to_dict()
    changes: dict[str, Any] = {}
    for entry in knobs:
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
