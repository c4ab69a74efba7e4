"""The report's claims as records: what kind of claim, the intervals it rests on (each a
:class:`Measure`: which quantity of which trials, value, interval, pairs, the one rule's
verdict), what else its words need, and the words themselves (``text``).

One owner: the records and their words are here (:func:`render`: one renderer per kind turns a
record into its words); :mod:`tuner.report._build_claims` makes every record the report states
from the data; the sections place ``claim.text``; ``claims.json``
(:data:`tuner.experiment.CLAIMS_FILE`, plain JSON, never a pickle) keeps them beside report.md,
and the auditor (:mod:`tuner.report._audit_claims`) builds them again from the data and
compares.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.answer import (
    Margin,
    PairVerdict,
    against_pick_text,
    one_pick_sentence,
    pairs_text,
    picks_sentence,
    points_text,
    short_of_steps_text,
    starved_text,
)
from tuner.engine.result import DATA_BOUND_WAIT, bound_of
from tuner.measure import measured_text
from tuner.record import KIND, STARVED_BY, TRIAL_ID
from tuner.report import _batch_words, _effects, _speed_words, _status_words, _trial_words
from tuner.report.document import change_text
from tuner.speed.rule import probe_text
from tuner.stats import INTERVAL_RULE, Change
from tuner.time_to_target import RulePick, Target, pick_sentence, rule_sentence
from tuner.units import plural, ratio_text

__all__ = [
    "CELL_KINDS",
    "CSV_KINDS",
    "EFFECT_KEYS",
    "FORMAT",
    "FORMAT_KEY",
    "RENDERERS",
    "SINCE_FORMAT_1",
    "Claim",
    "Claims",
    "Measure",
    "as_json",
    "read_claims",
    "render",
    "write_claims",
]

# What each measure is, and where the auditor finds it again: a over b in images/s from the
# paired re-measurements (remeasure.csv), a minus b in accuracy (trials.csv), the recommended
# config over the plain loop (effects.csv), a speed knob over plain (the probe cache).
# The kinds said as a table cell of their own (the check looks for the whole cell).
CELL_KINDS = frozenset({"probe", "effect"})
# The kinds said in the report's trials.csv alone, one cell per trial (the auditor checks them
# there: tuner.report._speed_claims), not in report.md.
CSV_KINDS = frozenset({_speed_words.KIND})
# An effect's two measures, by the effects table's column (tuner.compare.summarize).
EFFECT_KEYS = {
    "effect_ratio": "throughput_ratio_vs_reference",
    "effect_memory": "memory_change_bytes_vs_reference",
}
TIME_TO_TARGET = "time_to_target"  # recommended_time_to_target.json: the rule's pick
QUANTITIES = (
    "throughput_ratio",
    "accuracy_difference",
    "plain_loop_gain",
    "probe_ratio",
    "time_ratio",  # the rule's pick's time to target against the next's (RulePick.change)
    "effect_ratio",  # one change's images/s over the recommended config's (effects.csv)
    "effect_memory",  # its peak memory minus the recommended config's
    "loader_gain",  # the recommended config over the plain input pipeline (effects.csv)
    # a smaller batch's time to target over the next larger one's, each size's soonest trial
    # (its subjects' order fixes the direction; "time_ratio"'s follows the rule's pick)
    _batch_words.TIME_RATIO,
)


@dataclass(frozen=True)
class Measure:
    """One interval a claim rests on, with the verdict the one rule gives it."""

    quantity: str  # one of QUANTITIES
    subjects: tuple[str, ...]  # the trials (a, b), or the probe key and knob
    value: float
    low: float
    high: float
    n: int  # pairs (1: one measurement)
    neutral: float  # 1.0 for a ratio, 0.0 for a difference
    verdict: str  # Change.verdict: separated, tie, uninformative, none

    @property
    def change(self) -> Change:
        return Change(self.value, self.low, self.high, self.n, self.neutral)

    @classmethod
    def of(cls, quantity: str, subjects: Iterable[str], change: Change) -> Measure:
        value, low, high = (float(v) for v in (change.value, change.low, change.high))
        names = tuple(map(str, subjects))
        return cls(quantity, names, value, low, high, int(change.n), change.neutral, change.verdict)


@dataclass(frozen=True)
class Claim:
    """One claim of the report: its kind, the trials (or keys) it names, the intervals it rests
    on, what else its words need (``words``: plain JSON values), and its words."""

    kind: str
    subjects: tuple[str, ...]
    measures: tuple[Measure, ...] = ()
    words: Mapping[str, Any] = field(default_factory=dict)
    text: str = ""

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.kind, self.subjects

    def name(self) -> str:
        """How a finding names the claim: ``picks 0fea1843,3d6702ce``."""
        return f"{self.kind} {','.join(self.subjects)}".strip()

    def with_text(self) -> Claim:
        return Claim(self.kind, self.subjects, self.measures, dict(self.words), render(self))


class Claims:
    """The report's claims, each found by its kind and subjects where a section says it."""

    def __init__(self, claims: Iterable[Claim] = ()) -> None:
        self.all: dict[tuple[str, tuple[str, ...]], Claim] = {}
        self.placed: dict[tuple[str, tuple[str, ...]], Claim] = {}  # what the report says
        for claim in claims:
            self.add(claim)

    def add(self, claim: Claim) -> Claim:
        claim = claim.with_text()
        self.all[claim.key] = claim
        return claim

    def text(self, kind: str, *subjects: str) -> str:
        """The words of the claim the report makes here ("" where the data gives none)."""
        claim = self.all.get((kind, tuple(map(str, subjects))))
        if claim is None:
            return ""
        self.placed[claim.key] = claim
        return claim.text


# ---- renderers: one per kind -------------------------------------------------------------


def _pair(claim: Claim) -> PairVerdict:
    speed, accuracy = claim.measures
    return PairVerdict(*speed.subjects, speed.change, accuracy.change)


def _margins(claim: Claim) -> dict[str, Margin]:
    metric = {"throughput_ratio": "images_per_second", "accuracy_difference": "val_accuracy"}
    return {metric[m.quantity]: Margin(m.subjects[1], m.change) for m in claim.measures}


def _picks(claim: Claim) -> str:
    words = claim.words
    return picks_sentence(
        _pair(claim), by_time=words["by_time"], data_parallel=words["data_parallel"]
    )


def _one_pick(claim: Claim) -> str:
    return one_pick_sentence(claim.subjects[0], _margins(claim), claim.words["candidates"])


def _pick_why(claim: Claim) -> str:
    """The answer's first line: why the pick is the pick (what its intervals allow)."""
    role = claim.words["role"]
    if role == "one":
        return _one_pick_why(_margins(claim), claim.words["candidates"])
    p = _pair(claim)
    if role == "slower":
        speed = ratio_text(p.throughput.value, p.throughput.low, p.throughput.high)
        return (
            f"the most accurate, and as fast as the fastest (`{p.faster}`) within noise ({speed})"
        )
    return _fastest_why(p)


def _one_pick_why(margins: Mapping[str, Margin], candidates: int) -> str:
    """One trial leads on both: beyond noise on both, or which lead is within the noise."""
    if not margins:
        if candidates > 1:  # one objective: no runner-up measured beside it
            return (
                f"the best of {candidates} on the search's objective as measured (no "
                "interval against the next)"
            )
        return "the only configuration that can be picked (nothing was compared with it)"
    if len(margins) == 2 and all(m.change.separated for m in margins.values()):
        return "the best on both throughput and accuracy, beyond noise"
    words = {"images_per_second": "speed", "val_accuracy": "accuracy"}
    weak = [words[m] for m, margin in margins.items() if not margin.change.separated]
    return (
        "the fastest and the most accurate as measured, but not beyond noise on "
        f"{' nor on '.join(weak)} (the margins are below)"
    )


def _fastest_why(p: PairVerdict) -> str:
    """The fastest pick recommended: beyond noise, a tie, or no verdict on speed."""
    speed = ratio_text(p.throughput.value, p.throughput.low, p.throughput.high)
    verdict = p.throughput.verdict
    if verdict == "none":
        return (
            f"the fastest as measured in the search; `{p.slower}` is more accurate, and the two "
            "were not re-measured side by side, so there is no verdict on speed"
        )
    if verdict == "uninformative":
        return (
            f"the fastest as measured; its re-measurement beside `{p.slower}` (more accurate) "
            f"gave {speed} over {pairs_text(p.throughput.n)}, an interval that says nothing, "
            "so there is no verdict on speed"
        )
    if verdict == "tie":
        accuracy = (
            "as accurate within noise: a tie on both, either will do"
            if p.accuracy.tie
            else f"`{p.slower}` is {100 * abs(p.accuracy.value):.1f} accuracy points more "
            "accurate, with no interval: no verdict"
        )
        return f"as fast as `{p.slower}` within noise ({speed}), a tie on speed; {accuracy}"
    if p.accuracy.tie:
        return (
            f"the fastest beyond noise ({speed}), and as accurate as the most accurate "
            f"(`{p.slower}`) within noise"
        )
    return (
        f"the fastest beyond noise ({speed}); `{p.slower}` is {points_text(p.accuracy)} more "
        "accurate (the trade-off is below)"
    )


def _gain(claim: Claim) -> str:
    """The recommendation over the plain loop, measured side by side in section 3."""
    change = claim.measures[0].change
    interval = ratio_text(change.value, change.low, change.high)
    # No absolute figure: both arms' images/s come from the effects' own short runs (section 3),
    # not from the measurement behind the pick's figure above.
    over = (
        "Over the plain loop (every technique off, fp32, same model and batch; the two measured "
        "side by side in section 3) the recommendation is"
    )
    if change.verdict == "uninformative":
        return (
            f"{over} {interval} as fast: an interval that says nothing ("
            f"{pairs_text(change.n)}), so **no verdict** on the gain."
        )
    if change.tie:
        return f"{over} **not measurably faster**: {interval}."
    word = "faster" if change.value > 1 else "slower"
    return f"{over} **{interval} {word}** (paired, interleaved)."


def _pick_title(claim: Claim) -> str:
    """A pick's heading: what it is best at ("most accurate" only beyond noise of the next;
    "best on both" only beyond noise on both), and the trial."""
    metrics, trial = claim.words["metrics"], claim.subjects[0]
    both = claim.words["all_best"] and len(metrics) > 1
    if both and len(claim.measures) == 2 and all(m.change.separated for m in claim.measures):
        return f"Best on both: trial `{trial}`"
    names = {TIME_TO_TARGET: "the rule's pick", "images_per_second": "fastest"}
    accuracy = next((m for m in claim.measures if m.quantity == "accuracy_difference"), None)
    names["val_accuracy"] = _accuracy_title(accuracy)
    title = " and ".join(names.get(m, m) for m in metrics)
    return f"{title[0].upper()}{title[1:]}: trial `{trial}`"


def _accuracy_title(lead: Measure | None) -> str:
    """ "most accurate" only beyond noise of the next; else what the interval allows."""
    if lead is None or lead.change.separated:
        return "most accurate"
    return (
        f"highest accuracy as measured (not beyond noise: {points_text(lead.change)} ahead of "
        f"`{lead.subjects[1]}`)"
    )


def _against_pick(claim: Claim) -> str:
    """The most accurate candidate against the rule's pick, by the one rule."""
    if not claim.measures:
        return against_pick_text(None)
    measure = claim.measures[0]
    return against_pick_text(measure.subjects, measure.change, claim.words["why"])


def _probe(claim: Claim) -> str:
    """A speed knob against plain, in the words ``speed_choice`` uses (speed/rule.py)."""
    if claim.measures:
        m = claim.measures[0]
        row = {"ratio": m.value, "low": m.low, "high": m.high, "pairs": m.n}
    else:
        row = {"probed": claim.words.get("probed"), "ratio": None}
    return probe_text(row) + (" (kept)" if claim.words.get("kept") else "")


def _target(claim: Claim) -> str:
    """The rule in one sentence, and how the target was set."""
    words = claim.words
    return rule_sentence(Target(_number(words["accuracy"]), words["given"], words["how"]))


def _rule_pick(claim: Claim) -> str:
    """Why the rule picked what it did: its time, and the comparison it rests on."""
    w = claim.words
    by = {m.quantity: m.change for m in claim.measures}
    rule = RulePick(
        w["pick"], w["soonest"], w["versus"], by.get("time_ratio"), tuple(w["within_noise"]),
        w["reached"], w["candidates"], w["reason"], by.get("accuracy_difference"),
    )  # fmt: skip
    rows = {t: {k: _number(v) for k, v in row.items()} for t, row in w["rows"].items()}
    return pick_sentence(rule, rows)


def _effect(claim: Claim) -> str:
    """An effect's verdict cell (section 3): one change against the recommended config."""
    return _effects.verdict_text(_effect_row(claim, claim.measures))


def _effect_row(claim: Claim, measures: Iterable[Measure]) -> dict[str, Any]:
    """The effects table's row its measures and words give (tuner.compare.summarize's keys)."""
    row: dict[str, Any] = {k: claim.words.get(k) for k in ("failed", "fell_back")}
    row["images_per_second"] = 1.0 if claim.words.get("measured", True) else math.nan
    for m in measures:
        for suffix, value in (("", m.value), ("_low", m.low), ("_high", m.high), ("_n", m.n)):
            row[f"{EFFECT_KEYS[m.quantity]}{suffix}"] = value
    return row


# The rules the report states in prose (their verdict words are the rule's, not a
# measurement's): a "rule" claim names one, its words are the text.
RULES = {
    "data_bound": (
        f"(data-bound from {DATA_BOUND_WAIT:.0%}: a wait that large, removed, would make it at "
        f"least {1 / (1 - DATA_BOUND_WAIT):.2f}x faster)"
    ),
    "candidates": "Only a trial that ran ok (to its end, within the budget) can be recommended.",
    "probe_rule": (
        "Before a training config first trains, short probes measure the plain setting and each "
        "accuracy-neutral speed knob switched on alone, interleaved and repeated: once per "
        "model, data, device and precision for the knobs whose verdict does not depend on the "
        "training config (scope shared), and per norm layer for channels_last, whose verdict "
        "flips with it (scope config), on top of those. A knob is kept "
        "when it was faster than the plain setting in every pair (and fits the memory budget): "
        "a speed knob cannot change what is learned, so the choice goes by the estimate; two or "
        "more kept knobs are used together only if their combination, probed too, is at least "
        "as fast as the best one alone. Later trials with the same training config reuse the "
        "choice. Each cell: the knob's images/s relative to the plain setting with its 95% "
        "interval; (kept) marks what the trials ran with; a ratio from one measurement has no "
        f"interval and says so. By the one interval rule, {INTERVAL_RULE}: an interval that "
        "says nothing is not shown, the cell names it instead (the same words as each trial's "
        "speed_choice in trials.csv)."
    ),
}


def _effects_say_nothing(claim: Claim) -> str:
    """A starved or too noisy effects step: said, instead of a table of intervals that say
    nothing (0.84x [0.02–29.27] is no measurement); every measure it rests on says nothing.
    How long the step measured is its clock's record (``phase_time`` of the effects), said
    after these words; a record written before that carries it (``measured``)."""
    if any(m.change.informative for m in claim.measures):
        raise ValueError("an effect's interval says something")  # the record claims otherwise
    measured = claim.words.get("measured")
    said = f" {measured}" if measured is not None else ""  # an older record's own words
    return (
        "**No information**: each change was measured against the recommended config "
        f"(trial `{claim.words['trial']}`){said}, and no interval it gave says anything (by the "
        f"one rule, {INTERVAL_RULE}): so no table. To measure the effects, give the step time "
        "(--trust-budget, --effects-repeats) on a machine with nothing else running."
    )


def _starved(claim: Claim) -> str:
    """The starved trials counted by what cut them short (each its ``starved_by``), then the
    trials of another kind whose run also ran short of its steps (``kinds``: each subject's;
    absent, every one is starved)."""
    causes = list(claim.words["causes"])
    kinds = list(claim.words.get("kinds") or ["starved"] * len(causes))
    trials = pd.DataFrame(
        {TRIAL_ID: list(claim.subjects), KIND: kinds, STARVED_BY: causes}, dtype=object
    )
    return " ".join(filter(None, [starved_text(trials), short_of_steps_text(trials)]))


def _counts(claim: Claim) -> str:
    """The trials counted by kind (subjects: the kinds present, in :data:`tuner.record.KINDS`'
    order): ``8 trials (5 ok, 1 stopped early, 2 starved)``, the console summary's words."""
    counts, total = claim.words["counts"], int(claim.words["total"])
    said = ", ".join(f"{int(counts[kind])} {kind}" for kind in claim.subjects)
    return f"{plural(total, 'trial')} ({said or 'none'})"


def _loader_gain(claim: Claim) -> str:
    """What the loader settings buy together over the plain input pipeline, measured."""
    change = claim.measures[0].change
    measured = ratio_text(change.value, change.low, change.high)
    against = "the plain input pipeline (every loader knob off)"
    wait = claim.words.get("plain_wait")
    waited = (
        f", whose steps waited {wait:.0%} of their time for data ({bound_of(wait)}-bound)"
        if isinstance(wait, int | float) and not math.isnan(wait)
        else ""
    )
    if change.verdict in ("none", "uninformative"):
        return f"Against {against}: {measured}, from an interval that says nothing."
    if change.verdict == "tie":
        return f"Together, the loader settings are a **tie** with {against}{waited}: {measured}."
    word = "faster" if change.value > 1 else "slower"
    return f"Together, the loader settings make it **{measured} {word}** than {against}{waited}."


def _input_limit(claim: Claim) -> str:
    """Whether more workers or a faster decoder could help here: what the wait says (a
    ceiling from its share, not a measurement)."""
    wait = float(claim.words["wait"])
    if claim.words["bound"] == "compute":
        return (
            f"**The model, not the loader, is the limit on this machine:** the steps waited "
            f"for data {wait:.0%} of their time, so more workers or a faster decoder have "
            "little wait left to remove (on a CPU a cheaper loader can still leave the model "
            "more of the cores, which only a measured effect shows)."
        )
    ceiling = 1 / (1 - wait) if wait < 1 else math.inf
    return (
        f"**The input pipeline is the limit on this machine:** the steps waited for data "
        f"{wait:.0%} of their time. A ceiling, not a finding: were no step to wait at all, it "
        f"would run at most {ceiling:.2f}x faster (from the wait's share alone, not measured); "
        "what a setting buys is only what its measured effect shows."
    )


def _loader_clear(claim: Claim) -> str:
    """The loader settings switched around the pick whose effect is beyond noise, each with
    its interval and verdict (the effects table's words)."""
    said = []
    for arm in claim.subjects:
        row = _effect_row(claim, [m for m in claim.measures if m.subjects == (arm,)])
        said.append(f"{arm}: {change_text(row, EFFECT_KEYS['effect_ratio'])}, "
                    f"{_effects.verdict_text(row)}")  # fmt: skip
    return "Measured beyond noise around this config: " + "; ".join(said) + "."


def _batch_pair(claim: Claim) -> str:
    """Two adjacent batch sizes' time ratio and the one rule's verdict (its words: the sizes)."""
    return _batch_words.pair_text(claim.words["sizes"], claim.measures[0].change)


def _batch_answer(claim: Claim) -> str:
    """The batch-size conclusion from the pairs it rests on."""
    words, changes = claim.words, [m.change for m in claim.measures]
    return _batch_words.answer_text(words["sizes"], changes, words["unreached"])


def _rule(claim: Claim) -> str:
    return RULES[claim.words["name"]]


def _probes_say_nothing(claim: Claim) -> str:
    """Said when no probe's interval says anything: every measure it rests on is so."""
    if not claim.measures or any(m.change.informative for m in claim.measures):
        raise ValueError("a probe interval says something")  # the record claims otherwise
    return (
        "**No probe interval says anything** here (too few pairs, or too noisy): the knobs "
        "were kept by their estimates (faster than plain in every pair), not by a measured "
        "difference. Give the probes more rounds (--speed-repeats) on a quiet machine to "
        "measure them."
    )


RENDERERS: dict[str, Callable[[Claim], str]] = {
    # the clock's: what each stated duration rests on (their words: _trial_words)
    "phase_time": lambda claim: measured_text(claim.words),  # a phase's record: its clock
    "wall_time": lambda claim: _trial_words.wall_time_text(claim.words),
    "probe_budget": lambda claim: _trial_words.probe_budget_text(claim.words),
    "machine_load": lambda claim: _trial_words.load_text(claim.words),
    # the trials' rows: counted, their kinds (their words: _trial_words too)
    "front": lambda claim: _trial_words.front_text(claim.subjects, claim.words),
    "no_pick": lambda claim: _trial_words.no_pick_text(claim.words),
    "not_tried": lambda claim: _trial_words.not_tried_text(claim.subjects[0], claim.words),
    "rule": _rule,
    "probes_say_nothing": _probes_say_nothing,
    "starved": _starved,
    "counts": _counts,
    "loader_gain": _loader_gain,
    "input_limit": _input_limit,
    "loader_clear": _loader_clear,
    "effects_say_nothing": _effects_say_nothing,
    "effect": _effect,
    "target": _target,
    "rule_pick": _rule_pick,
    "picks": _picks,
    "one_pick": _one_pick,
    "pick_why": _pick_why,
    "gain": _gain,
    "pick_title": _pick_title,
    "accuracy_against_pick": _against_pick,
    "probe": _probe,
    _batch_words.PAIR: _batch_pair,
    # a trial's speed_choice in trials.csv, in the words the trial wrote (speed/rule.py's)
    _speed_words.KIND: lambda claim: _speed_words.choice_text(claim.words),
    _batch_words.ANSWER: _batch_answer,
    # how far the experiment got: its state, what did not run (their words: _status_words)
    **_status_words.RENDERERS,
}


def render(claim: Claim) -> str:
    """A claim's words, from its record alone."""
    return RENDERERS[claim.kind](claim)


# ---- claims.json ---------------------------------------------------------------------------


# What claims.json says it is (its "format"): 1, records that cover every section of their
# report; absent, a report from before it (tuner.report._audit_status reads it).
FORMAT, FORMAT_KEY = 1, "format"
# The kinds a report gets since FORMAT 1: a report without a format lacks them, not a deletion.
SINCE_FORMAT_1 = frozenset({*_status_words.RENDERERS, _speed_words.KIND})


def write_claims(claims: Claims, path: Path) -> None:
    """The records of the claims the report placed, as strict JSON (NaN written as null, an
    unbounded end as the string "inf": JSON has neither, and strict parsers refuse Python's),
    under the format they are written in (:data:`FORMAT`)."""
    rows = [as_json(asdict(claim)) for claim in claims.placed.values()]
    document = {FORMAT_KEY: FORMAT, "claims": rows}
    path.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n")


def read_claims(path: Path) -> list[Claim]:
    """The records a report wrote (plain JSON; a record that does not parse raises ValueError
    naming it)."""
    claims = []
    document = json.loads(path.read_text())
    if not isinstance(document, dict):
        raise ValueError(f"its top level is a {type(document).__name__}, not an object")
    for row in document.get("claims", []):
        try:
            kind, subjects, measures, words, text = (row[f.name] for f in fields(Claim))
            measures = tuple(_measure(m) for m in measures)
            claims.append(Claim(str(kind), tuple(subjects), measures, dict(words), str(text)))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"a record does not parse ({error!r}): {row!r}"[:300]) from error
    return claims


def _measure(m: Mapping[str, Any]) -> Measure:
    value, low, high = (_number(m[k]) for k in ("value", "low", "high"))
    return Measure(
        str(m["quantity"]), tuple(m["subjects"]), value, low, high, int(m["n"]),
        float(m["neutral"]), str(m["verdict"]),
    )  # fmt: skip


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def as_json(value: Any) -> Any:
    """``value`` as claims.json holds it: NaN as None, an infinity as "inf" or "-inf" (which
    ``float`` reads back), tuples as lists (what a record read back and one built from the data
    are compared as)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, Mapping):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    return value
