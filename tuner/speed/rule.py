"""The decision rule of the speed probes: a knob is kept when it was faster than the plain
setting in every pair, its paired ratio is above 1x and it fits the memory budget (a speed knob
cannot change what is learned, so a wrong pick costs at most the noise); ``clear`` records
whether the gain is beyond the noise. Used live and by the replay and verdict benchmarks.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from tuner.compare import Arm
from tuner.measure import paired, summarize
from tuner.objectives import judge
from tuner.stats import MIN_PAIRS, Change
from tuner.units import as_number, finite_or_none, plural, ratio_text, sum_or_none

__all__ = [
    "RULE",
    "SAID_FIELDS",
    "SpeedChoice",
    "ahead",
    "combination",
    "decide",
    "fits",
    "merged",
    "not_probed_row",
    "probe_change",
    "probe_text",
    "settle",
    "variant",
]

# The decision rule's version: bumped when the probes decide differently, so a remembered
# choice (tuner.speed.machine_cache outlives the code that made it) is not reused across it.
# 2: over budget, the other knobs are probed on top of the one that makes it fit.
# 3: the input pipeline's knobs (workers per core, prefetch_factor on top, host thread, decoder).
# 4: two scopes (shared and per training config), and a probe budget (knobs not probed).
# 5: a knob the probe budget cut before its last pair is not probed (was: kept on one pair).
RULE = 5
# The fields of a choice its words rest on (SpeedChoice.said): the probed rows and the verdict.
SAID_FIELDS = (
    "settings", "variants", "not_probed", "combined_ratio", "over_budget", "plain_over_budget",
    "measured_on",
)  # fmt: skip


@dataclass(frozen=True)
class SpeedChoice:
    """What the probes chose for one key, and what they measured."""

    settings: dict[str, Any]  # the speed knobs switched on (empty: the plain setting)
    variants: list[dict[str, Any]] = field(default_factory=list)  # one row per probed change
    plain_images_per_second: float = math.nan
    # The probe runs' wall time, the clock's (each run from its start to its end: what the probe
    # budget charges); their steps count as training. The lookups around them are no probe.
    probe_seconds: float = 0.0
    probe_step_seconds: float = 0.0  # training seconds of that (the probes' train_time_s)
    repeats: int = 0
    first_step_unix_s: float | None = None  # wall clock when the first probe's first step began
    combined_ratio: float | None = None  # the kept knobs together vs plain (when 2 or more)
    over_budget: bool = False  # no probed setting fits the memory budget (or all OOM)
    plain_over_budget: bool = False  # the plain setting did not fit: the choice is for memory
    not_probed: list[str] = field(default_factory=list)  # knobs the probe budget left at default
    budget_s: float | None = None  # the probe seconds the session was allowed (None: no bound)
    slowest_run_s: float | None = None  # its slowest probe run: what completing it costs a run
    measured_on: dict[str, Any] = field(default_factory=dict)  # the training config probed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def said(self) -> dict[str, Any]:
        """What :meth:`summary` and :meth:`shared_note` read, and no more (no timings): the
        trial's phase log keeps it, and the report's ``speed_choice`` record renders it."""
        return {name: getattr(self, name) for name in SAID_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpeedChoice:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def shared_note(self, config: Any) -> str:
        """``; shared: measured at batch_size=256, norm=group`` when probed on another config."""
        other = {k: v for k, v in self.measured_on.items() if getattr(config, k, v) != v}
        if not other:
            return ""
        return "; shared: measured at " + ", ".join(f"{k}={v}" for k, v in self.measured_on.items())

    def summary(self) -> str:
        """``channels_last (1.12x [1.03–1.22])``, or why the plain setting or nothing runs."""
        if self.over_budget:
            return "nothing fits the memory budget"
        kept = [v for v in self.variants if v["kept"]]
        if self.plain_over_budget and not kept:  # the knobs that might fit were not probed
            why = self._not_probed_text().lstrip("; ") or "no knob probed makes it fit"
            return "plain over the memory budget; " + why
        if self.plain_over_budget:
            fit = f"plain over the memory budget; {kept[0]['name']} makes it fit"
            return "; then ".join([fit, *self._kept_text(kept[1:])])
        if kept:
            return self._kept_text(kept)[0] + self._not_probed_text()
        if not any(v.get("probed", True) for v in self.variants):  # the budget allowed no run
            return "plain; " + self._not_probed_text().lstrip("; ") if self.not_probed else "plain"
        return "plain (no knob was faster in every pair)" + self._not_probed_text()

    def _not_probed_text(self) -> str:
        if not self.not_probed:
            return ""
        return f"; not probed (probe budget): {', '.join(self.not_probed)}"

    def _kept_text(self, kept: list[dict[str, Any]]) -> list[str]:
        parts = [f"{v['name']} ({probe_text(v)})" for v in kept]
        if len(kept) > 1 and self.combined_ratio is not None:
            # Two pairs, whose interval is not kept: an estimate, so no verdict is claimed.
            parts.append(f"together {self.combined_ratio:.2f}x (no interval: no verdict)")
        return [", ".join(parts)] if parts else []


def probe_text(row: dict[str, Any]) -> str:
    """A probed knob's ratio to plain in the one rule's words (the trial's ``speed_choice`` and
    the report's speed table): ``1.12x [1.03–1.22]``, ``1.01x [0.98–1.04], within noise``,
    ``1.31x, interval says nothing (2 pairs)``, ``1.33x, one measurement``, ``not measured``."""
    if row.get("probed") is False:
        return "not probed (probe budget)"
    ratio, low, high = row.get("ratio"), row.get("low"), row.get("high")
    if ratio is None:
        return "not measured"
    change = probe_change(row)
    verdict = change.verdict
    if verdict == "none":
        return f"{ratio_text(ratio)}, one measurement"
    if verdict == "uninformative":
        return f"{ratio_text(ratio)}, interval says nothing ({plural(change.n, 'pair')})"
    return ratio_text(ratio, low, high) + (", within noise" if verdict == "tie" else "")


def probe_change(row: dict[str, Any]) -> Change:
    """A probed knob's ratio to plain as a paired change (no ``pairs``: judged by width)."""
    values = (as_number(row.get(k)) for k in ("ratio", "low", "high"))
    return Change(*values, int(row.get("pairs", MIN_PAIRS)), 1.0)


def settle(rows: list[dict[str, Any]], combined: float | None) -> dict[str, Any]:
    """Every kept knob when their ``combined`` ratio is at least the best one's alone, else the
    best alone (the others' rows marked not kept)."""
    kept = sorted((r for r in rows if r["kept"]), key=lambda r: -r["ratio"])
    if len(kept) >= 2 and (combined is None or combined < kept[0]["ratio"]):
        for row in kept[1:]:
            row["kept"] = False
        kept = kept[:1]
    return combination(kept)


def combination(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The changes of every kept knob together."""
    return {k: v for row in rows if row["kept"] for k, v in row["changes"].items()}


def fits(peak: float, budget: float | None) -> bool:
    """Whether an ok probe's peak fits the memory budget (tuner.objectives.judge's rule)."""
    return judge({"status": "ok", "peak_memory_bytes": peak}, max_memory_bytes=budget)[0]


def decide(
    runs: Any, arms: list[Any], *, max_memory_bytes: float | None
) -> tuple[list[dict[str, Any]], float]:
    """From interleaved probe runs (``arms[0]`` plain): one row per probed change (``kept``,
    ``clear``) and plain's median images/s."""
    table = summarize(runs, arms)
    rows = [
        _variant_row(row, arms, runs, budget=max_memory_bytes)
        for _, row in table.iloc[1:].iterrows()
    ]
    kept = _best_per_knob([r for r in rows if r["kept"]])
    for row in rows:
        row["kept"] = row in kept
    return rows, float(table.iloc[0]["images_per_second"])


def ahead(runs: pd.DataFrame, name: str) -> bool:
    """Whether arm ``name`` beat plain in every repeat so far (a failed repeat counts against)."""
    mine, plain = paired(runs, name, "plain")
    if len(mine) < runs["repeat"].nunique():
        return False
    return bool((mine["images_per_second"] > plain["images_per_second"]).all())


def _variant_row(row: Any, arms: list[Any], runs: Any, *, budget: float | None) -> dict[str, Any]:
    arm = next(a for a in arms if a.name == row["arm"])
    ratio, low = row["throughput_ratio_vs_reference"], row["throughput_ratio_vs_reference_low"]
    high, peak = row["throughput_ratio_vs_reference_high"], row["peak_memory_bytes"]
    fitting = fits(peak, budget)
    candidate = ratio > 1 and ahead(runs, arm.name)  # faster in every pair, and on average
    return variant(
        arm,
        *(finite_or_none(v) for v in (ratio, low, high, peak)),
        fell_back=row["fell_back"],
        clear=bool(not row["throughput_ratio_vs_reference_tie"] and ratio > 1 and low > 1),
        kept=bool(candidate and fitting and not row["fell_back"]),
        pairs=int(row["throughput_ratio_vs_reference_n"]),
    )


def variant(arm: Arm, ratio: Any, low: Any, high: Any, peak: Any, **verdict: Any) -> dict:
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


def not_probed_row(arm: Arm) -> dict[str, Any]:
    """A knob the probe budget left unmeasured: its default, no verdict (not tried and lost)."""
    verdict = {"fell_back": "", "clear": False, "kept": False, "probed": False}
    return variant(arm, None, None, None, None, **verdict)


def _best_per_knob(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One value per knob (num_workers=2 vs 4): the one with the higher ratio."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["field"] not in best or row["ratio"] > best[row["field"]]["ratio"]:
            best[row["field"]] = row
    return list(best.values())


def merged(first: SpeedChoice, then: SpeedChoice) -> SpeedChoice:
    """One choice from ``then``, probed on top of ``first`` (a config's knobs on the shared
    ones, or the knobs ``first`` left unprobed: their placeholder rows replaced)."""
    probed = {v["name"] for v in then.variants if v.get("probed", True)}
    replaced = {v["name"] for v in then.variants}  # measured now, or still a placeholder
    # A value of a knob another value of which is kept (num_workers=2 beside a kept
    # num_workers=1) cannot be probed on top of it: the knob is decided, not left to probe.
    settings = {**first.settings, **then.settings}
    field_of = {v["name"]: v.get("field") for v in first.variants}
    still = [n for n in first.not_probed if n not in probed and field_of.get(n) not in settings]
    firsts = [first.first_step_unix_s, then.first_step_unix_s]
    return dataclasses.replace(
        first,
        settings=settings,
        # The later session measured the plain setting of this very training config.
        plain_images_per_second=then.plain_images_per_second
        if math.isfinite(then.plain_images_per_second)
        else first.plain_images_per_second,
        variants=[*(v for v in first.variants if v["name"] not in replaced), *then.variants],
        probe_seconds=first.probe_seconds + then.probe_seconds,
        probe_step_seconds=first.probe_step_seconds + then.probe_step_seconds,
        repeats=max(first.repeats, then.repeats),
        first_step_unix_s=min((t for t in firsts if t is not None), default=None),
        combined_ratio=then.combined_ratio or first.combined_ratio,
        not_probed=[*still, *(n for n in then.not_probed if n not in still)],
        budget_s=sum_or_none(first.budget_s, then.budget_s),
        slowest_run_s=max(
            (r for r in (first.slowest_run_s, then.slowest_run_s) if r is not None), default=None
        ),
    )
