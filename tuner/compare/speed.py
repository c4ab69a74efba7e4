"""Speed settings settled by probes: the accuracy-neutral knobs are chosen per training config.

A speed knob (set_to_none, pinned memory, the prefetcher, channels_last, fused AdamW, compile,
loader workers) changes speed and memory but not what is learned, so a short probe measures what
differs instead of a training (README, "Speed settings"). The plain setting and each unpinned
knob alone are probed interleaved (:mod:`tuner.compare`). A knob is kept when it was faster than
plain in every pair, its paired ratio is above 1x and it fits the memory budget: a speed knob
cannot change what is learned, so a wrong pick costs at most the noise (whether a gain is
beyond the noise is recorded as ``clear``). Two or more kept knobs are used together only if
their combination, probed too, is at least as fast as the best one alone (knobs interact). The
choice is cached per :func:`speed_key`; the trial's own run then measures it for real.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from tuner.compare import Arm, paired, run_interleaved, summarize
from tuner.config import TrainConfig
from tuner.objectives import judge
from tuner.techniques import Knob, knob, speed_knobs
from tuner.units import finite_or_none, ratio_text

__all__ = [
    "RULE",
    "SpeedChoice",
    "choose_speed",
    "combination",
    "decide",
    "settle",
    "speed_key",
    "variants",
]

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

# The decision rule's version: bumped when choose_speed decides differently, so a remembered
# choice (tuner.search.machine_cache outlives the code that made it) is not reused across it.
# 2: over budget, the other knobs are probed on top of the one that makes it fit.
# 3: the input pipeline's knobs (workers per core, prefetch_factor on top, host thread, decoder).
RULE = 3


@dataclass(frozen=True)
class SpeedChoice:
    """What the probes chose for one key, and what they measured."""

    settings: dict[str, Any]  # the speed knobs switched on (empty: the plain setting)
    variants: list[dict[str, Any]] = field(default_factory=list)  # one row per probed change
    plain_images_per_second: float = math.nan
    probe_seconds: float = 0.0  # wall time of the probes (their steps count as training)
    probe_step_seconds: float = 0.0  # training seconds of that (the probes' train_time_s)
    repeats: int = 0
    first_step_unix_s: float | None = None  # wall clock when the first probe's first step began
    combined_ratio: float | None = None  # the kept knobs together vs plain (when 2 or more)
    over_budget: bool = False  # no probed setting fits the memory budget (or all OOM)
    plain_over_budget: bool = False  # the plain setting did not fit: the choice is for memory

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpeedChoice:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def summary(self) -> str:
        """``channels_last (1.12x [1.03–1.22])``, or why the plain setting or nothing runs."""
        if self.over_budget:
            return "nothing fits the memory budget"
        kept = [v for v in self.variants if v["kept"]]
        if self.plain_over_budget:
            fit = f"plain over the memory budget; {kept[0]['name']} makes it fit"
            return "; then ".join([fit, *self._kept_text(kept[1:])])
        if not kept:
            return "plain (no knob was faster in every probe)"
        return self._kept_text(kept)[0]

    def _kept_text(self, kept: list[dict[str, Any]]) -> list[str]:
        """``a (1.12x [..]), b (..), together 1.20x`` for the kept knobs (none: no text)."""
        parts = [f"{v['name']} ({_ratio_text(v)})" for v in kept]
        if len(kept) > 1 and self.combined_ratio is not None:
            parts.append(f"together {self.combined_ratio:.2f}x")
        return [", ".join(parts)] if parts else []


def _ratio_text(row: dict[str, Any]) -> str:
    """``1.12x [1.03–1.22]``; a knob with one measurement (probed once to fit the budget, or
    its other pair failed) has no interval, and a failed probe no ratio."""
    ratio, low, high = row.get("ratio"), row.get("low"), row.get("high")
    if ratio is None:
        return "not measured"
    if low is None or high is None:
        return f"{ratio_text(ratio)}, one measurement"
    return ratio_text(ratio, low, high) + ("" if row["clear"] else ", within noise")


def speed_key(
    config: TrainConfig, device_name: str, pinned: Collection[str], *, cores: int | None = None
) -> str:
    """The cache key: the fields that decide the fastest setting, the device's name, the knobs
    the space pinned (with their values: they are not probed, and a choice made without them
    must not override them) and the run's ``cores`` (they bound the worker levels tried)."""
    values = config.to_dict()
    key = {name: values[name] for name in KEY_FIELDS}
    if key["norm"] != "group":
        key["gn_groups"] = None  # unused unless GroupNorm
    key["device_name"] = device_name
    key["pinned"] = {name: values[name] for name in sorted(pinned)}
    key["rule"] = RULE  # a choice the machine cache kept from another rule is probed again
    if cores is not None:
        key["cores"] = cores
    return json.dumps(key, sort_keys=True, default=str)


def _knobs(*, cuda: bool, files: bool = True) -> tuple[Knob, ...]:
    """The speed knobs of this run: DDP's too inside a data-parallel worker group, whose probes
    are short data-parallel runs of the same workers (tuner.search.data_parallel)."""
    from tuner.engine.distributed import World

    return speed_knobs(cuda=cuda, workers=World.current().size, files=files)


def variants(
    *,
    cuda: bool,
    pinned: Collection[str],
    files: bool = True,
    after: str | None = None,
    cores: int | None = None,
) -> list[tuple[Knob, Any]]:
    """(knob, value) pairs to probe: every unpinned speed knob's "on" values that this device
    and the run's ``cores`` (default: this process's) can run (one value for a slow-to-build
    knob); ``after``: only the knobs that act on top of that one (else those that act alone)."""
    found, cores = [], cores or _own_cores()
    for entry in _knobs(cuda=cuda, files=files):
        values = entry.runnable_values(cuda=cuda, cores=cores)
        if entry.field not in pinned and entry.after == after:
            found += [(entry, v) for v in (values[:1] if entry.slow_build else values)]
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
) -> SpeedChoice:
    """Probe the plain setting and each speed knob alone, interleaved; keep the clear wins.

    ``cores``: the CPUs the run has (default: this process's), which bound the loader worker
    levels tried.

    ``config`` is the trial's config with its pinned knobs; unpinned speed knobs start off.
    The plain setting is probed once first: over the budget (or OOM), each knob is probed once
    for memory instead (:func:`_fit_first`), and the other knobs are then probed on top of the
    fastest one that makes it fit. After each round, a knob that was slower than the plain
    setting in any pair so far is dropped (it can no longer be kept).
    """
    started = time.perf_counter()
    # Two warm-up steps: the first builds the allocator's pools, the second runs at speed
    # (torch.compile keeps its own three, see tuner.engine.build).
    config = config.replace(warmup_steps=min(config.warmup_steps, 2))
    plain = config.replace(**_all_off(config, pinned, cuda=cuda))
    meter = _Meter(steps)
    cores = cores or _own_cores()
    probing = _Probing(plain, cuda, pinned, _files(config), cores, repeats, meter, max_memory_bytes)
    arms = probing.arms(plain, pinned)
    first = meter(plain)
    if judge(first.to_dict(), max_memory_bytes=max_memory_bytes)[0]:
        choice = _probe_rounds(arms, repeats, meter, max_memory_bytes)
    else:
        choice = _fit_first(arms, first, meter, max_memory_bytes)
    if choice.plain_over_budget and not choice.over_budget and len(arms) > 2:
        # The knob that makes it fit becomes the base, and the others are probed on top of
        # it as they would be on plain: stopping at the one knob left the fastest feasible
        # setting of such a config unreachable (bench/search_replay.py, the resnet grid).
        choice = probing.on_top(choice, None)
    for parent in _parents_on(choice.settings, plain, pinned, cuda=cuda):
        # Knobs that act on top of one that is on (prefetch_factor on workers) are probed on it.
        choice = probing.on_top(choice, parent)
    return dataclasses.replace(
        choice,
        probe_seconds=time.perf_counter() - started,
        probe_step_seconds=meter.step_seconds,
        first_step_unix_s=meter.first_step_unix_s,
    )


def _parents_on(
    settings: dict[str, Any], plain: TrainConfig, pinned: Collection[str], *, cuda: bool
) -> list[str]:
    """The knobs that others ride on (``Knob.after``) and that are on: kept by the probes, or
    pinned on by the space."""
    parents = {k.after for k in _knobs(cuda=cuda) if k.after}
    pinned_on = {p for p in parents if p in pinned and getattr(plain, p) != knob(p).off}
    return sorted(p for p in parents if p in settings or p in pinned_on)


def _own_cores() -> int:
    """The cores this process may run on (its affinity where the OS has one: macOS has not)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def _files(config: TrainConfig) -> bool:
    """Whether the config's data is image files (the decoder acts on nothing else)."""
    from tuner.engine.data import data_source

    return data_source(config.data)[0].files


@dataclass(frozen=True)
class _Probing:
    """What every round of one choice shares: the plain setting, the device, the pinned knobs,
    the data's kind, the repeats, the meter and the memory budget."""

    plain: TrainConfig
    cuda: bool
    pinned: Collection[str]
    files: bool
    cores: int
    repeats: int
    meter: _Meter
    budget: float | None

    def arms(
        self, base: TrainConfig, pinned: Collection[str], after: str | None = None, label: str = ""
    ) -> list[Arm]:
        return _arms(
            base,
            cuda=self.cuda,
            pinned=pinned,
            suffix=label,
            files=self.files,
            after=after,
            cores=self.cores,
        )

    def on_top(self, choice: SpeedChoice, after: str | None) -> SpeedChoice:
        """``choice``'s settings become the base, and the knobs that act alone (``after`` None)
        or on top of ``after`` are probed on it; what they keep is added to the choice."""
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
        )


def _probe_rounds(
    arms: list[Arm], repeats: int, meter: _Meter, budget: float | None
) -> SpeedChoice:
    """Interleaved rounds of ``arms`` (``arms[0]`` the plain setting), then the kept knobs
    together when two or more are kept."""
    rows, plain_ips = decide(_rounds(arms, repeats, meter), arms, max_memory_bytes=budget)
    combined = None
    if sum(row["kept"] for row in rows) >= 2:
        combined = _combined_ratio(arms[0].config, rows, meter, budget)
    return SpeedChoice(
        settle(rows, combined), rows, plain_ips, repeats=repeats, combined_ratio=combined
    )


def settle(rows: list[dict[str, Any]], combined: float | None) -> dict[str, Any]:
    """The settings to run with: every kept knob when their combination is at least as fast
    as the best one alone (``combined``: its ratio vs plain), else the best one alone. Rows
    no longer used are marked not kept."""
    kept = sorted((r for r in rows if r["kept"]), key=lambda r: -r["ratio"])
    if len(kept) >= 2 and (combined is None or combined < kept[0]["ratio"]):
        for row in kept[1:]:
            row["kept"] = False
        kept = kept[:1]
    return combination(kept)


def combination(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The changes of every kept knob together."""
    return {k: v for row in rows if row["kept"] for k, v in row["changes"].items()}


def _combined_ratio(
    plain: TrainConfig, rows: list[dict[str, Any]], meter: _Meter, budget: float | None
) -> float | None:
    """The kept knobs together vs plain: two interleaved pairs (``None`` if it does not fit)."""
    changes = combination(rows)
    combined = Arm("combined", "speed", plain.replace(**changes), changes, "plain")
    arms = [Arm("plain", "speed", plain), combined]
    runs = run_interleaved(arms, repeats=2, measure=meter, warmup=False, drop_invalid=True)
    row = summarize(runs, arms).iloc[1]
    fits = _fits(row["peak_memory_bytes"], budget)
    return finite_or_none(row["throughput_ratio_vs_reference"]) if fits else None


def _fits(peak: float, budget: float | None) -> bool:
    """Whether a probe that ran ok with this peak is within the memory budget (the one rule,
    tuner.objectives.judge's; an unmeasured peak fits)."""
    return judge({"status": "ok", "peak_memory_bytes": peak}, max_memory_bytes=budget)[0]


class _Meter:
    """The probe, adding up the probes' training seconds and keeping the first step's time."""

    def __init__(self, steps: int) -> None:
        self.steps, self.step_seconds = steps, 0.0
        self.first_step_unix_s: float | None = None

    def __call__(self, config: TrainConfig) -> Any:
        from tuner.engine import probe

        result = probe(config, steps=self.steps)
        self.step_seconds += result.train_time_s
        first = result.first_step_unix_s
        if first is not None:
            self.first_step_unix_s = min(self.first_step_unix_s or math.inf, first)
        return result


def _fit_first(arms: list[Arm], first: Any, meter: _Meter, budget: float | None) -> SpeedChoice:
    """The plain setting is over the budget: a memory-saving knob (set_to_none frees the
    gradients between steps) may make it fit. Each knob is probed once; the fastest one that
    fits is used, or, when none fits, the trial's first steps will confirm it is infeasible."""
    rows, fitting = [], []
    for arm in arms[1:]:
        result = meter(arm.config)
        fits = judge(result.to_dict(), max_memory_bytes=budget)[0]
        ratio = (result.images_per_second or math.nan) / (first.images_per_second or math.nan)
        verdict = {"fell_back": "", "clear": False, "kept": False, "fits": fits}
        rows.append(
            _variant(arm, finite_or_none(ratio), None, None, result.peak_memory_bytes, **verdict)
        )
        if fits:
            fitting.append((result.images_per_second or 0.0, len(rows) - 1))
    settings: dict[str, Any] = {}
    if fitting:
        best = rows[max(fitting)[1]]
        best["kept"], settings = True, dict(best["changes"])
    plain_ips = first.images_per_second or math.nan
    return SpeedChoice(
        settings, rows, plain_ips, repeats=1, over_budget=not fitting, plain_over_budget=True
    )


def decide(
    runs: Any, arms: list[Any], *, max_memory_bytes: float | None
) -> tuple[list[dict[str, Any]], float]:
    """From interleaved probe runs (``arms[0]`` the plain setting): one row per probed change
    (``kept``: a candidate; ``clear``: its gain is beyond the noise) and the plain setting's
    median images/s. Used live by :func:`choose_speed` and offline by the replay benchmark."""
    table = summarize(runs, arms)
    rows = [
        _variant_row(row, arms, runs, budget=max_memory_bytes)
        for _, row in table.iloc[1:].iterrows()
    ]
    kept = _best_per_knob([r for r in rows if r["kept"]])
    for row in rows:
        row["kept"] = row in kept
    return rows, float(table.iloc[0]["images_per_second"])


def _arms(
    plain: TrainConfig,
    *,
    cuda: bool,
    pinned: Collection[str],
    suffix: str = "",
    files: bool = True,
    after: str | None = None,
    cores: int | None = None,
) -> list[Arm]:
    """The plain setting, then each knob alone on it (named with ``suffix``)."""
    arms = [Arm("plain", "speed", plain)]
    found = variants(cuda=cuda, pinned=pinned, files=files, after=after, cores=cores)
    for entry, value in found:
        changes = entry.settings(value)
        name = entry.field if isinstance(value, bool) else f"{entry.field}={value}"
        arms.append(Arm(name + suffix, "speed", plain.replace(**changes), changes, "plain"))
    return arms


def _rounds(arms: list[Arm], repeats: int, measure: Any) -> pd.DataFrame:
    """Interleaved rounds; after each, only knobs faster than plain in every pair so far stay:
    a knob is kept only if it was faster in every pair (:func:`_variant_row`), so a knob
    behind once can no longer be kept and probing it again would buy nothing."""
    frames, live = [], list(arms)
    for repeat in range(repeats):
        runs = run_interleaved(live, repeats=1, measure=measure, warmup=False, drop_invalid=True)
        frames.append(runs.assign(repeat=repeat))
        if repeat < repeats - 1:
            live = [live[0], *(a for a in live[1:] if _ahead(pd.concat(frames), a.name))]
    return pd.concat(frames, ignore_index=True)


def _ahead(runs: pd.DataFrame, name: str) -> bool:
    """Whether arm ``name`` beat the plain setting in every repeat so far (a repeat in which
    either failed counts against it)."""
    mine, plain = paired(runs, name, "plain")
    if len(mine) < runs["repeat"].nunique():
        return False
    return bool((mine["images_per_second"] > plain["images_per_second"]).all())


def _all_off(config: TrainConfig, pinned: Collection[str], *, cuda: bool) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for entry in _knobs(cuda=cuda):
        if entry.field not in pinned and getattr(config, entry.field) != entry.off:
            changes.update(entry.settings(entry.off))
    return changes


def _variant_row(row: Any, arms: list[Any], runs: Any, *, budget: float | None) -> dict[str, Any]:
    arm = next(a for a in arms if a.name == row["arm"])
    ratio, low = row["throughput_ratio_vs_reference"], row["throughput_ratio_vs_reference_low"]
    high, peak = row["throughput_ratio_vs_reference_high"], row["peak_memory_bytes"]
    fits = _fits(peak, budget)
    candidate = ratio > 1 and _ahead(runs, arm.name)  # faster in every pair, and on average
    return _variant(
        arm,
        *(finite_or_none(v) for v in (ratio, low, high, peak)),
        fell_back=row["fell_back"],
        clear=bool(not row["throughput_ratio_vs_reference_tie"] and ratio > 1 and low > 1),
        kept=bool(candidate and fits and not row["fell_back"]),
        pairs=int(row["throughput_ratio_vs_reference_n"]),
    )


def _variant(arm: Arm, ratio: Any, low: Any, high: Any, peak: Any, **verdict: Any) -> dict:
    """One probed change's row: what it changed, its ratio to plain, its peak, the verdict."""
    return {
        "name": arm.name,
        "field": next(iter(arm.changes)),
        "changes": dict(arm.changes),
        "ratio": ratio,
        "low": low,
        "high": high,
        "peak_memory_bytes": peak,
        **verdict,
    }


def _best_per_knob(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One value per knob (num_workers=2 vs 4): the one with the higher ratio."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["field"] not in best or row["ratio"] > best[row["field"]]["ratio"]:
            best[row["field"]] = row
    return list(best.values())
