"""Speed settings settled by probes: the accuracy-neutral knobs chosen for a training config
(README, "Speed settings").

The plain setting and each unpinned knob alone are probed interleaved and judged by the one
rule (:mod:`tuner.speed.rule`); kept knobs are used together only if their combination, probed
too, is at least as fast as the best one alone (knobs interact). Two scopes (measured:
reports/benchmarks/probe_verdicts.md): knobs whose verdict does not change with the training
config are settled once per model, data, device, precision and cores (``shared``); a
``per_config`` knob (channels_last) per norm layer, on the shared settings (``config``). A knob
with nothing to act on is not probed; a run that does not fit the session's
:class:`~tuner.speed.budget.ProbeBudget` is not started, its knob *not probed* (a later trial
probes it).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from tuner.compare import Arm
from tuner.compare._interleave import measurement_row
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.measure import summarize
from tuner.objectives import judge
from tuner.speed.budget import ProbeBudget
from tuner.speed.rule import (
    RULE,
    SpeedChoice,
    ahead,
    combination,
    decide,
    fits,
    not_probed_row,
    settle,
    variant,
)
from tuner.techniques import Knob, knob, speed_knobs
from tuner.units import finite_or_none

__all__ = ["KEY_FIELDS", "Measure", "OnRun", "Scope", "choose_speed", "speed_key", "variants"]

# What decides which speed setting is fastest (lr, seed, budget do not).
KEY_FIELDS = (
    "model",
    "model_kwargs",
    "data",
    "img_size",
    "batch_size",
    "amp",
    "norm",
    "gn_groups",
    "num_classes",
    "device",
)
# The training config's fields, and those each scope's verdict is keyed by: measured
# (reports/benchmarks/probe_verdicts.md), the shared knobs' verdicts never flip from a clear
# win to a clear loss with any of them, and channels_last's flips with the norm layer.
TRAINING_FIELDS = ("batch_size", "norm", "gn_groups")
_SCOPE_FIELDS: dict[str, tuple[str, ...]] = {
    "shared": (),
    "config": ("norm",),
    "all": TRAINING_FIELDS,
}

Scope = Literal["shared", "config", "all"]  # which knobs a session probes (module doc)
OnRun = Callable[[dict[str, Any]], None]  # each probe run's start and end (the phase log)
# One probe run: (config, measured steps, time limit) -> RunResult. The engine's short run; the
# GPU cost model (bench/gpu_cost_model.py) gives one that predicts instead of training.
Measure = Callable[[TrainConfig, int, "float | None"], Any]


def speed_key(
    config: TrainConfig,
    device_name: str,
    pinned: Collection[str],
    *,
    cores: int | None = None,
    scope: Scope = "all",
) -> str:
    """The cache key: the fields that decide the fastest setting (of the training config's,
    those the scope's verdict depends on), the device, the pinned knobs with their values (a
    choice made without them must not override them) and the ``cores`` (they bound workers)."""
    values = config.to_dict()
    keep = _SCOPE_FIELDS[scope]
    names = [f for f in KEY_FIELDS if f not in TRAINING_FIELDS or f in keep]
    key: dict[str, Any] = {name: values[name] for name in names}
    if key.get("norm", "group") != "group":
        key["gn_groups"] = None  # unused unless GroupNorm
    key["device_name"] = device_name
    key["pinned"] = {name: values[name] for name in sorted(pinned)}
    key["rule"] = RULE  # a choice the machine cache kept from another rule is probed again
    key["scope"] = scope
    if cores is not None:
        key["cores"] = cores
    return json.dumps(key, sort_keys=True, default=str)


def _knobs(*, cuda: bool, files: bool = True) -> tuple[Knob, ...]:
    """The speed knobs of this run (DDP's too inside a data-parallel worker group)."""
    from tuner.engine.distributed import World

    return speed_knobs(cuda=cuda, workers=World.current().size, files=files)


@dataclass(frozen=True)
class _Where:
    """What decides which knobs a session may probe (``only``: those an earlier one left)."""

    cuda: bool
    files: bool = True
    on_device: bool = False
    cores: int = 1
    scope: Scope = "all"
    only: frozenset[str] | None = None

    def acts(self, entry: Knob) -> bool:
        """Whether ``entry`` has something to act on here, in this session's scope."""
        if self.scope != "all" and entry.per_config != (self.scope == "config"):
            return False
        if self.on_device and entry.loader:
            return False  # nothing to load or copy: the data already lives on the device
        return not (entry.per_core and self.cores <= 1)  # no core for a loader worker


def variants(
    *,
    cuda: bool,
    pinned: Collection[str],
    files: bool = True,
    after: str | None = None,
    cores: int | None = None,
    where: _Where | None = None,
) -> list[tuple[Knob, Any]]:
    """(knob, value) pairs to probe: every unpinned knob's "on" values runnable here (one for a
    slow-to-build knob); ``after``: the knobs that ride on that one (else those acting alone);
    ``where`` (a session's) stands for ``cuda``, ``files`` and ``cores``."""
    found, where = [], where or _Where(cuda, files, cores=cores or _own_cores())
    for entry in _knobs(cuda=where.cuda, files=where.files):
        if entry.field in pinned or entry.after != after or not where.acts(entry):
            continue
        values = entry.runnable_values(cuda=where.cuda, cores=where.cores)
        for value in values[:1] if entry.slow_build else values:
            if where.only is None or _arm_name(entry, value) in where.only:
                found.append((entry, value))
    return found


def choose_speed(
    config: TrainConfig,
    *,
    cuda: bool,
    pinned: Collection[str],
    steps: int,
    repeats: int,
    max_memory_bytes: float | None,
    cores: int | None = None,
    scope: Scope = "all",
    budget: ProbeBudget | None = None,
    base: dict[str, Any] | None = None,
    only: Collection[str] | None = None,
    on_run: OnRun | None = None,
    measure: Measure | None = None,
) -> SpeedChoice:
    """Probe the plain setting and each speed knob alone, interleaved; keep the clear wins.

    ``base``: settings already chosen (the shared ones), on which these knobs are probed;
    ``only``: just these arms (an earlier session's ``not_probed``); ``measure``: one probe
    run (default: :func:`tuner.engine.short_run`). Over the memory budget the plain setting
    makes each knob probed once for memory (:func:`_fit_first`), the others then on top of the
    fastest that fits.
    """
    # Two warm-up steps: the first builds the allocator's pools, the second runs at speed
    # (torch.compile keeps its own three, see tuner.engine.build).
    config = config.replace(warmup_steps=min(config.warmup_steps, 2))
    base = dict(base or {})
    pinned = {*pinned, *base}
    plain = config.replace(**_all_off(config, pinned, cuda=cuda)).replace(**base)
    where = _where(config, cuda, cores, scope, only)
    meter = _Meter(steps, budget or ProbeBudget(None), measure or _short_run, on_run)
    probing = _Probing(plain, where, pinned, repeats, meter, max_memory_bytes)
    arms = probing.arms(plain, pinned)
    if len(arms) < 2:  # nothing to probe here: no run at all
        return SpeedChoice(settings={}, budget_s=meter.budget.granted_s)
    meter.planned = len(arms) * repeats + 1
    choice = probing.first_rounds(arms)
    if choice.plain_over_budget and not choice.over_budget and len(arms) > 2:
        # The knob that makes it fit becomes the base, and the others are probed on top of
        # it as they would be on plain: stopping at the one knob left the fastest feasible
        # setting of such a config unreachable (bench/search_replay.py, the resnet grid).
        choice = probing.on_top(choice, None)
    for parent in _parents_on(choice.settings, plain, pinned, cuda=cuda):
        # Knobs that act on top of one that is on (prefetch_factor on workers) are probed on it.
        choice = probing.on_top(choice, parent)
    settings = {**base, **choice.settings} if scope == "all" else choice.settings
    return _finished(choice, settings, meter, config)


def _finished(
    choice: SpeedChoice, settings: dict[str, Any], meter: _Meter, config: Any
) -> SpeedChoice:
    return dataclasses.replace(
        choice,
        settings=settings,
        probe_seconds=meter.budget.spent_s,  # its runs' own: the budget's (rule.SpeedChoice)
        probe_step_seconds=meter.step_seconds,
        first_step_unix_s=meter.first_step_unix_s,
        budget_s=meter.budget.allowed_s if meter.budget.granted_s is not None else None,
        slowest_run_s=meter.budget.slowest_run_s,
        measured_on=_measured_on(config),
    )


def _measured_on(config: TrainConfig) -> dict[str, Any]:
    fields = [f for f in (*TRAINING_FIELDS, "amp") if f != "gn_groups" or config.norm == "group"]
    return {f: getattr(config, f) for f in fields}


def _parents_on(
    settings: dict[str, Any], plain: TrainConfig, pinned: Collection[str], *, cuda: bool
) -> list[str]:
    """The knobs others ride on (``Knob.after``) that are on: kept, or pinned on."""
    parents = {k.after for k in _knobs(cuda=cuda) if k.after}
    pinned_on = {p for p in parents if p in pinned and getattr(plain, p) != knob(p).off}
    return sorted(p for p in parents if p in settings or p in pinned_on)


def _own_cores() -> int:
    """This process's cores (its affinity where the OS has one: macOS has not)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def _where(
    config: TrainConfig, cuda: bool, cores: int | None, scope: Scope, only: Collection[str] | None
) -> _Where:
    """Where a session probes: image files or not, data made on the device or not."""
    from tuner.engine.data import data_source

    source = data_source(config.data)[0]
    kept_to = None if only is None else frozenset(only)
    return _Where(cuda, source.files, source.load is None, cores or _own_cores(), scope, kept_to)


class _OverBudget(Exception):
    """The next probe run does not fit in what is left of the probe budget."""


@dataclass(frozen=True)
class _Probing:
    plain: TrainConfig
    where: _Where
    pinned: Collection[str]
    repeats: int
    meter: _Meter
    budget: float | None

    def arms(
        self, base: TrainConfig, pinned: Collection[str], after: str | None = None, label: str = ""
    ) -> list[Arm]:
        """Plain, then each knob alone on it."""
        arms = [Arm("plain", "speed", base)]
        where = self.where
        for entry, value in variants(cuda=where.cuda, pinned=pinned, after=after, where=where):
            changes = entry.settings(value)
            name = _arm_name(entry, value) + label
            arms.append(Arm(name, "speed", base.replace(**changes), changes, "plain"))
        return arms

    def first_rounds(self, arms: list[Arm]) -> SpeedChoice:
        """Plain once (one-time costs land there), then the rounds (or :func:`_fit_first`)."""
        try:
            first = self.meter(arms[0])
        except (_OverBudget, TunerError):
            return _unprobed(arms, self.meter.budget)
        if judge(first.to_dict(), max_memory_bytes=self.budget)[0]:
            return _probe_rounds(arms, self.repeats, self.meter, self.budget)
        return _fit_first(arms, first, self.meter, self.budget)

    def on_top(self, choice: SpeedChoice, after: str | None) -> SpeedChoice:
        """The knobs acting alone (or riding on ``after``) probed on ``choice``'s settings."""
        pinned_too = {*self.pinned, *choice.settings}
        base = self.plain.replace(**choice.settings)
        # Named by what it is probed on: the knob it rides on, or (over budget) every setting
        # kept so far.
        on = [after] if after else list(choice.settings)
        label = " on " + " + ".join(on) if on else ""
        arms = self.arms(base, pinned_too, after, label)
        if len(arms) < 2:
            return choice
        top = _probe_rounds(arms, self.repeats, self.meter, self.budget)
        return dataclasses.replace(
            choice,
            settings={**choice.settings, **top.settings},
            variants=[*choice.variants, *top.variants],
            repeats=self.repeats,
            combined_ratio=top.combined_ratio if after is None else choice.combined_ratio,
            not_probed=[*choice.not_probed, *top.not_probed],
        )


def _arm_name(entry: Knob, value: Any) -> str:
    return entry.field if isinstance(value, bool) else f"{entry.field}={value}"


def _unprobed(arms: list[Arm], budget: ProbeBudget) -> SpeedChoice:
    rows = [not_probed_row(arm) for arm in arms[1:]]
    return SpeedChoice({}, rows, not_probed=[r["name"] for r in rows], budget_s=budget.allowed_s)


def _probe_rounds(
    arms: list[Arm], repeats: int, meter: _Meter, budget: float | None
) -> SpeedChoice:
    """Interleaved rounds of ``arms`` (``arms[0]`` plain), then the kept knobs together. Arms
    the probe budget left out or cut before their last pair are not probed (a pair not run is
    not one a knob won): a later trial probes them again."""
    runs, cut = _rounds(arms, repeats, meter)
    if len(runs):
        runs = runs[~runs["arm"].isin(cut)]
    measured = set(runs["arm"]) if len(runs) else set()
    if "plain" not in measured:
        return _unprobed(arms, meter.budget)
    probed = [a for a in arms if a.name in measured]
    rows, plain_ips = decide(runs, probed, max_memory_bytes=budget)
    rows += [not_probed_row(a) for a in arms[1:] if a.name not in measured]
    combined = None
    if sum(row["kept"] for row in rows) >= 2:
        combined = _combined_ratio(arms[0].config, rows, meter, budget)
    missing = [a.name for a in arms[1:] if a.name not in measured]
    return SpeedChoice(
        settle(rows, combined),
        rows,
        plain_ips,
        repeats=repeats,
        combined_ratio=combined,
        not_probed=missing,
    )


def _rounds(arms: list[Arm], repeats: int, meter: _Meter) -> tuple[pd.DataFrame, set[str]]:
    """Interleaved rounds; after each only knobs faster than plain in every pair so far stay (a
    knob behind once can no longer be kept). An arm that cannot be built is left out; the
    rounds end with the probe budget, the knobs short of their pairs returned as cut."""
    rows: list[dict[str, Any]] = []
    live = list(arms)
    try:
        for repeat in range(repeats):
            for arm in list(live):
                if repeat == 0 and arm is not live[0] and not _finishes(live, arm, repeats, meter):
                    live = live[: live.index(arm)]  # it and the knobs after it: not probed
                    break
                try:
                    result = meter(arm)
                except TunerError:
                    live.remove(arm)
                    continue
                rows.append(measurement_row(arm, repeat, result))
            if repeat < repeats - 1 and rows:
                runs = pd.DataFrame(rows)
                live = [live[0], *(a for a in live[1:] if ahead(runs, a.name))]
            if len(live) == 1:
                break  # the plain setting alone: nothing left to pair it with
    except _OverBudget:
        done = [r["arm"] for r in rows]
        return pd.DataFrame(rows), {a.name for a in live[1:] if done.count(a.name) < repeats}
    return pd.DataFrame(rows), set()


def _finishes(live: list[Arm], arm: Arm, repeats: int, meter: _Meter) -> bool:
    """Whether the budget holds ``arm``'s first run and every later round with it: no budget
    spent on first pairs that a cut would throw away."""
    included = live.index(arm) + 1  # the plain setting, the knobs before it, and it
    return meter.budget.affords(1 + (repeats - 1) * included)


def _combined_ratio(
    plain: TrainConfig, rows: list[dict[str, Any]], meter: _Meter, budget: float | None
) -> float | None:
    """The kept knobs together vs plain: two pairs (``None``: over memory or probe budget)."""
    changes = combination(rows)
    combined = Arm("combined", "speed", plain.replace(**changes), changes, "plain")
    arms = [Arm("plain", "speed", plain), combined]
    runs, _ = _rounds(arms, 2, meter)
    if len(runs) < 4:
        return None
    row = summarize(runs, arms).iloc[1]
    fitting = fits(row["peak_memory_bytes"], budget)
    return finite_or_none(row["throughput_ratio_vs_reference"]) if fitting else None


@dataclass
class _Meter:
    """Runs one probe inside the probe budget, adding up what the probes cost."""

    steps: int
    budget: ProbeBudget
    measure: Measure
    on_run: OnRun | None = None
    step_seconds: float = 0.0
    first_step_unix_s: float | None = None
    planned: int = 0
    count: int = 0

    def __call__(self, arm: Arm) -> Any:
        from tuner.engine.build import warmup_steps_of

        slow = any(knob(f).slow_build for f in arm.changes if f in _SLOW_FIELDS)
        if not self.budget.allows(arm.name, slow_build=slow):
            raise _OverBudget(arm.name)
        self.count += 1
        self._tell({"event": "start", "arm": arm.name, "run": self.count, "of": self.planned})
        started = time.perf_counter()
        # No run outlasts what is left of the budget by more than a step: a run cut short
        # measured too little, and the session ends there (its knobs not probed). While the
        # trial's length, and so its share, waits for this first run, what its time budget
        # would earn at most bounds it (a hogged first trial ran 10.2 s of 2.4 s without).
        left = self.budget.most_left_s
        limit = None if math.isinf(left) else max(left, 0.01)
        result = self.measure(arm.config, self.steps, limit)
        # The engine's own wall time where a model predicts it (the clock's otherwise).
        wall = max(time.perf_counter() - started, result.wall_time_s or 0.0)
        # A run cut in its warm-up has no steady step time: its steps' mean stands in (slower
        # than steady, so the trial's length it tells is at most its time budget anyway).
        steps_s = result.train_time_s / result.steps if result.steps else None
        self.budget.charge(arm.name, wall, result.step_time_s or steps_s)
        self.step_seconds += result.train_time_s
        first = result.first_step_unix_s
        if first is not None:
            self.first_step_unix_s = min(self.first_step_unix_s or math.inf, first)
        self._tell(_run_record(arm.name, self.count, self.planned, wall, result))
        planned = warmup_steps_of(arm.config) + self.steps
        if result.status == "ok" and result.steps < planned:
            raise _OverBudget(arm.name)  # cut by the budget: not a measurement
        return result

    def _tell(self, event: dict[str, Any]) -> None:
        if self.on_run is not None:
            self.on_run(event)


def _short_run(config: TrainConfig, steps: int, time_limit_s: float | None) -> Any:
    from tuner.engine import short_run

    return short_run(config, steps=steps, time_limit_s=time_limit_s)


_SLOW_FIELDS = frozenset(k.field for k in speed_knobs(cuda=True) if k.slow_build)


def _run_record(arm: str, count: int, planned: int, wall: float, result: Any) -> dict[str, Any]:
    return {
        "event": "end",
        "arm": arm,
        "run": count,
        "of": planned,
        "wall_s": round(wall, 3),
        "build_s": round(result.setup_time_s, 3),
        "warmup_s": None if result.warmup_time_s is None else round(result.warmup_time_s, 3),
        "steps_s": round(result.train_time_s, 3),
        "status": result.status,
    }


def _fit_first(arms: list[Arm], first: Any, meter: _Meter, budget: float | None) -> SpeedChoice:
    """Plain is over the memory budget: each knob probed once, the fastest that fits used (none:
    the trial's first steps confirm it is infeasible)."""
    rows, fitting, missing = [], [], []
    for arm in arms[1:]:
        try:
            result = meter(arm)
        except (_OverBudget, TunerError):
            rows.append(not_probed_row(arm))
            missing.append(arm.name)
            continue
        fit = judge(result.to_dict(), max_memory_bytes=budget)[0]
        ratio = (result.images_per_second or math.nan) / (first.images_per_second or math.nan)
        verdict = {"fell_back": "", "clear": False, "kept": False, "fits": fit}
        rows.append(
            variant(arm, finite_or_none(ratio), None, None, result.peak_memory_bytes, **verdict)
        )
        if fit:
            fitting.append((result.images_per_second or 0.0, len(rows) - 1))
    settings: dict[str, Any] = {}
    if fitting:
        best = rows[max(fitting)[1]]
        best["kept"], settings = True, dict(best["changes"])
    plain_ips = first.images_per_second or math.nan
    return SpeedChoice(
        settings,
        rows,
        plain_ips,
        repeats=1,
        over_budget=not fitting and not missing,  # unprobed knobs may still fit
        plain_over_budget=True,
        not_probed=missing,
    )


def _all_off(config: TrainConfig, pinned: Collection[str], *, cuda: bool) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for entry in _knobs(cuda=cuda):
        if entry.field not in pinned and getattr(config, entry.field) != entry.off:
            changes.update(entry.settings(entry.off))
    return changes
