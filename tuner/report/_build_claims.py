"""The report's claims built from the data (:mod:`tuner.report.claims` owns the records and
their words): the answer's (decided on the trials and re-measurements), each effect's
(effects.csv, summarized), each probe cell's (the probe cache); and where the answer's are said
(the report's section 1 and the console)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.answer import Answer, Margin, PairVerdict
from tuner.compare import PLAIN_LOADER, REFERENCE
from tuner.decision import accuracy_test
from tuner.engine.result import bound_of
from tuner.experiment import Experiment, memory_limit, study_distributions
from tuner.experiment.limits import down_time_s
from tuner.record import (
    ENDED_AT,
    IMAGES_TO_TARGET,
    KIND,
    KINDS,
    MACHINE_LOAD_CORES,
    PHASE,
    RAY_STATUS,
    SPEED_NOT_PROBED,
    SPEED_PROBE_TIME_S,
    SPEED_PROBE_WAIT_S,
    STARTED_AT,
    STARVED_BY,
    TIME_TO_TARGET_EST_HIGH,
    TIME_TO_TARGET_EST_LOW,
    TIME_TO_TARGET_EST_S,
    TRIAL_ID,
    TRIAL_TIME_S,
)
from tuner.report import _effects
from tuner.report._batch import batch_claims
from tuner.report._input import loader_clear_arms, loader_rows
from tuner.report._speed_claims import speed_choice_claims
from tuner.report._status import status_claims
from tuner.report._trial_words import PHASE_KEYS
from tuner.report.claims import EFFECT_KEYS, TIME_TO_TARGET, Claim, Claims, Measure
from tuner.speed.rule import probe_change
from tuner.stats import Change
from tuner.units import as_number, is_finite

__all__ = [
    "build_claims",
    "claims_for",
    "counts_claim",
    "counts_said",
    "effect_claim",
    "input_claims",
    "lead_lines",
    "pick_groups",
    "pick_rows",
    "probe_claim",
    "sentence_text",
    "short_trials",
    "starved_said",
    "wall_time_words",
]


# ---- where the answer's claims are said (the report's section 1 and the console) ---------


def starved_said(trials: pd.DataFrame, claims: Claims) -> str:
    """The starved trials' line: its claim's words ("" without any)."""
    ids = short_trials(trials)[TRIAL_ID].astype(str)
    return claims.text("starved", *ids) if len(ids) else ""


def counts_said(trials: pd.DataFrame, claims: Claims) -> str:
    """The trials counted by kind: its claim's words."""
    return claims.text("counts", *_counts_of(trials))


def _counts_of(trials: pd.DataFrame | None) -> dict[str, int]:
    """kind -> how many trials ran as it, for the kinds of :data:`KINDS` present."""
    if trials is None or KIND not in trials or trials.empty:
        return {}
    counts = trials[KIND].astype(str).value_counts()
    return {kind: int(counts[kind]) for kind in KINDS if kind in counts}


def counts_claim(trials: pd.DataFrame) -> Claim:
    """The search's trials counted by kind (the console summary's first line, the report's
    trials section): each trial once, as what it was; the total counts every row."""
    counts = _counts_of(trials)
    return Claim("counts", tuple(counts), (), {"counts": counts, "total": len(trials)})


def short_trials(trials: pd.DataFrame | None) -> pd.DataFrame:
    """The trials the starved claim names: every starved one, and every other whose run also
    trained fewer steps than its budget holds (a ``starved_by``: machine load can cut an
    over-budget trial short too), in the table's order. A run the feasibility check stopped
    (over the memory budget after its first steps) was not cut short: experiments written
    before that rule gave one a ``starved_by``, not said here."""
    if trials is None or KIND not in trials:
        return pd.DataFrame(columns=[TRIAL_ID, KIND, STARVED_BY])
    cause = trials[STARVED_BY].fillna("").astype(str) if STARVED_BY in trials else ""
    phase = trials[PHASE] if PHASE in trials else pd.Series("", index=trials.index)
    stopped = phase.astype(str) == "feasibility"
    return trials[(trials[KIND] == "starved") | ((cause != "") & ~stopped)]


def sentence_text(answer: Answer, claims: Claims) -> str:
    """The answer's sentence on the picks: its claim's words (the front empty: why)."""
    if answer.front.empty or not answer.best:
        return answer.sentence()  # no pick, no interval: what the trials were
    p = answer.picks
    if p is not None:
        return claims.text("picks", p.faster, p.slower)
    row = answer.front_pick
    return claims.text("one_pick", str((answer.front.iloc[0] if row is None else row)[TRIAL_ID]))


def lead_lines(answer: Answer, claims: Claims) -> list[str]:
    """What the answer says first (:meth:`Answer.lead`) in its claims' words: the rule's pick
    and why (the answer leads), the rule and its target, the most accurate candidate beside it
    (then what the lead adds: whether the pick is on the front). With no rule pick: the rule
    and why it picked nothing. In :meth:`Answer.lead`'s order."""
    lead = answer.lead()
    rule = answer.rule
    if not lead or rule is None:
        return [claims.text("target"), *lead[1:]] if lead else lead
    said = claims.text("accuracy_against_pick", rule.pick)
    pick, target = claims.text("rule_pick", rule.pick), claims.text("target")
    return [pick, target, said + lead[2].removeprefix(said)]


# ---- building the records from the data --------------------------------------------------


def claims_for(experiment: Experiment, answer: Answer) -> Claims:
    """Every claim of an experiment's report (:func:`build_claims` on its folder's data): the
    report, the console summary and the auditor each call this, so they build the same), and
    the batch-size section's (the trials' times to target and the re-measurements)."""
    claims = build_claims(
        answer,
        _effects.controlled_effects(experiment.effects),
        experiment.probe_cache,
        experiment.metadata.get("effects"),
        experiment.trials,
    )
    made = [*batch_claims(answer, experiment.remeasure), *_clock_claims(experiment)]
    made += speed_choice_claims(experiment)  # trials.csv's speed_choice (_speed_claims)
    made += status_claims(experiment)  # how far it got: its state, what did not run
    for claim in [*made, *_trial_claims(experiment, answer)]:
        claims.add(claim)
    return claims


def _trial_claims(experiment: Experiment, answer: Answer) -> list[Claim]:
    """The front's size, why nothing can be recommended, which may be, and the searched values
    no trial ran ok with (each with the kinds its trials were)."""
    trials, meta = experiment.trials, experiment.metadata
    counts = {"counts": _counts_of(trials), "total": len(trials)}
    memory_said = bool(counts["counts"].get("over budget"))  # memory ended some of them
    claims = [
        Claim(
            "no_pick",
            (),
            (),
            {**counts, "limit_bytes": memory_limit(meta), "memory_said": memory_said},
        ),
        Claim("rule", ("candidates",), (), {"name": "candidates"}),
    ]
    if not answer.front.empty:
        front = tuple(answer.front[TRIAL_ID].astype(str))
        claims.append(Claim("front", front, (), {"remeasured": bool(answer.remeasured)}))
    searched = study_distributions(experiment.study)
    found = _effects.not_tried(trials, experiment.searched_names, searched)
    return claims + [Claim("not_tried", (what,), (), {"values": v}) for what, v in found.items()]


# The measuring phases whose time the report states (sections 2 and 3).
CLOCKED_PHASES = ("remeasure", "effects")


def _clock_claims(experiment: Experiment) -> list[Claim]:
    """The report's durations and load, each with the clock it rests on: each measuring
    phase's record (its clock's two ends), the trials' times, the probes' cost, the load."""
    meta, trials = experiment.metadata, experiment.trials
    claims = [
        Claim("phase_time", (phase,), (), {k: info[k] for k in PHASE_KEYS if k in info})
        for phase in CLOCKED_PHASES
        if isinstance(info := meta.get(phase), dict)
    ]
    claims.append(Claim("wall_time", (), (), wall_time_words(trials, meta)))
    claims.append(Claim("machine_load", (), (), _load_words(trials, meta)))
    if experiment.probe_cache:
        claims.append(Claim("probe_budget", (), (), _probe_budget_words(trials, meta)))
    return claims


def wall_time_words(trials: pd.DataFrame, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The trials' summed ``trial_time_s``, and each trial that ran (id -> its time, its
    clock's; None: not recorded): its end minus its start, less the time no driver was on in
    between (a resume's down time)."""
    seconds = _numbers(trials, TRIAL_TIME_S)
    words: dict[str, Any] = {"seconds": float(seconds.sum()), "trials": {}}
    if STARTED_AT not in trials or ENDED_AT not in trials:
        return words
    started = pd.to_datetime(trials[STARTED_AT], utc=True, errors="coerce")
    ended = pd.to_datetime(trials[ENDED_AT], utc=True, errors="coerce")
    status = trials.get(RAY_STATUS, pd.Series("", index=trials.index)).astype(str)
    for i in trials.index[status != "PENDING"]:  # a pending trial never started
        a, b, clock = started[i], ended[i], None
        if not (pd.isna(a) or pd.isna(b)):
            clock = (b - a).total_seconds() - down_time_s(metadata, a.timestamp(), b.timestamp())
        time = None if pd.isna(seconds[i]) else float(seconds[i])
        words["trials"][str(trials.at[i, TRIAL_ID])] = [time, clock]
    return words


def _numbers(trials: pd.DataFrame, key: str) -> pd.Series:
    """A column as numbers (NaN: none; a sum skips it), empty where the table has none."""
    return pd.to_numeric(trials.get(key, pd.Series(dtype=float)), errors="coerce")


def _load_words(trials: pd.DataFrame, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The load measured during the trials (each one's ``machine_load_cores``) and during the
    re-measurement (its phase's ``load_cores``), and the cores Ray counted."""
    cores = _numbers(trials, MACHINE_LOAD_CORES).dropna()
    said = [float(cores.median()), float(cores.min()), float(cores.max()), len(cores)]
    total = (metadata.get("cluster") or {}).get("total_cpus")
    again = (metadata.get("remeasure") or {}).get("load_cores")
    return {
        "cores": said if len(cores) else None,
        "total_cpus": total if isinstance(total, int | float) else None,
        "remeasure": again if isinstance(again, int | float) else None,
    }


def _probe_budget_words(trials: pd.DataFrame, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The probe runs' seconds (each trial's ``speed_probe_time_s``, summed) and the trials'
    waits for another trial's probes, apart; the trials' wall time, the share allowed, how many
    trials ran with knobs unprobed."""
    share = (metadata.get("options") or {}).get("probe_share")
    unprobed = trials.get(SPEED_NOT_PROBED, pd.Series(dtype=str)).fillna("").astype(str)
    return {
        "share": share if isinstance(share, int | float) else None,
        "runs_s": float(_numbers(trials, SPEED_PROBE_TIME_S).sum()),
        "wait_s": float(_numbers(trials, SPEED_PROBE_WAIT_S).sum()),
        "trials_s": float(_numbers(trials, TRIAL_TIME_S).sum()),
        "unprobed": int((unprobed != "").sum()),
    }


def build_claims(
    answer: Answer,
    effects: pd.DataFrame,
    probe_cache: Mapping[str, Any] | None = None,
    effects_info: Mapping[str, Any] | None = None,
    trials: pd.DataFrame | None = None,
) -> Claims:
    """Every claim the report makes, each from the data it rests on: the answer decided on the
    trials and re-measurements, the effects (``controlled_effects``), the probe cache (the
    auditor calls this again on the experiment folder and compares)."""
    probes = [
        probe_claim(key, variant)
        for key, choice in (probe_cache or {}).items()
        for variant in choice.get("variants", [])
    ]
    probes += _probe_rules(probe_cache or {})
    effect_rows = [] if effects.empty else [r for _, r in effects.iterrows()]
    found = [effect_claim(row) for row in effect_rows if row["arm"] != REFERENCE]
    speeds = tuple(m for c in found for m in c.measures if m.quantity == "effect_ratio")
    if found and not any(m.change.informative for m in speeds):  # _effects.says_nothing
        measures = speeds
        info = effects_info or {}
        words = {"trial": str(info.get(TRIAL_ID, "?"))}  # its time: the phase_time record's
        found.append(Claim("effects_say_nothing", (), measures, words))
    pick = answer.recommended
    said = [
        *_answer_claims(answer, effects),
        *(input_claims(pick, effects) if pick is not None else []),
    ]
    counted = [counts_claim(trials)] if trials is not None else []
    return Claims([*said, *probes, *found, *_starved(trials), *counted])


def input_claims(pick: Mapping[str, Any], effects: pd.DataFrame) -> list[Claim]:
    """The input section's, for the recommended trial's row: the data-bound rule, the loader
    settings' gain together, what the wait says may help, the loader settings measured beyond
    noise."""
    trial, wait = str(pick.get(TRIAL_ID)), as_number(pick.get("data_wait_fraction"))
    bound = pick.get("bound") if "bound" in pick else bound_of(wait)
    claims = [Claim("rule", ("data_bound",), (), {"name": "data_bound"})]
    if not math.isnan(wait) and isinstance(bound, str) and bound:
        claims.append(Claim("input_limit", (trial,), (), {"wait": wait, "bound": bound}))
    gain = _effects.plain_loop_gain(effects, PLAIN_LOADER) if not effects.empty else None
    if gain is not None:
        change = Change(gain["ratio"], gain["low"], gain["high"], gain["n"], 1.0)
        plain = effects[effects["arm"] == PLAIN_LOADER].iloc[0]
        wait_plain = as_number(plain.get("data_wait_fraction"))
        words = {"plain_wait": None if math.isnan(wait_plain) else wait_plain}
        measure = Measure.of("loader_gain", (trial,), change)
        claims.append(Claim("loader_gain", (trial,), (measure,), words))
    rows = loader_rows(effects)
    arms = loader_clear_arms(rows)
    if arms:
        measures = tuple(m for arm in arms for m in effect_claim(_arm_row(rows, arm)).measures)
        claims.append(Claim("loader_clear", tuple(arms), measures))
    return claims


def _arm_row(rows: pd.DataFrame, arm: str) -> pd.Series:
    return rows[rows["arm"].astype(str) == arm].iloc[0]


def _starved(trials: pd.DataFrame | None) -> list[Claim]:
    """The trials cut short of their steps (:func:`short_trials`) and what cut each (its
    ``starved_by``, None: unknown); each one's kind where one is not starved."""
    short = short_trials(trials)
    if short.empty:
        return []
    causes = short.get(STARVED_BY, pd.Series(None, index=short.index, dtype=object))
    words: dict[str, Any] = {"causes": [None if pd.isna(c) else str(c) for c in causes]}
    kinds = [str(k) for k in short[KIND]]
    if any(k != "starved" for k in kinds):  # else absent: records written before it hold
        words["kinds"] = kinds
    return [Claim("starved", tuple(short[TRIAL_ID].astype(str)), (), words)]


def effect_claim(row: pd.Series) -> Claim:
    """An effect's verdict: one change against the recommended config, measured interleaved."""
    arm = str(row["arm"])
    measures = tuple(
        Measure.of(quantity, (arm,), Change.from_row(row, key))
        for quantity, key in EFFECT_KEYS.items()
        if is_finite(row.get(key))
    )
    words = {
        "failed": _text_or_none(row.get("failed")),
        "fell_back": _text_or_none(row.get("fell_back")),
        "measured": is_finite(row.get("images_per_second")),
    }
    return Claim("effect", (arm,), measures, words)


def _text_or_none(value: Any) -> str | None:
    return None if value is None or pd.isna(value) or value == "" else str(value)


def _answer_claims(answer: Answer, effects: pd.DataFrame) -> list[Claim]:
    if not answer.best or answer.front.empty:
        return []
    claims = [_sentence_claim(answer), _why_claim(answer), *_rule_claims(answer)]
    gain = _effects.plain_loop_gain(effects)
    if gain is not None and answer.best and answer.recommended is not None:
        change = Change(gain["ratio"], gain["low"], gain["high"], int(gain.get("n") or 0), 1.0)
        rec = str(answer.recommended[TRIAL_ID])
        claims.append(Claim("gain", (rec,), (Measure.of("plain_loop_gain", (rec,), change),)))
    claims += _title_claims(answer)
    if answer.lead() and answer.rule is not None:
        claims.append(_against_pick_claim(answer))
    return claims


def pick_rows(answer: Answer) -> dict[str, pd.Series]:
    """Each pick by what it is picked for: the rule's (where it picks), then each objective's."""
    picks = dict(answer.best)
    if answer.by_time and answer.recommended is not None:
        picks = {TIME_TO_TARGET: answer.recommended, **picks}
    return picks


def pick_groups(answer: Answer) -> dict[str, list[str]]:
    """trial id -> what it is picked for (a trial best on two objectives is one pick)."""
    groups: dict[str, list[str]] = {}
    for metric, row in pick_rows(answer).items():
        groups.setdefault(str(row[TRIAL_ID]), []).append(metric)
    return groups


def _title_claims(answer: Answer) -> list[Claim]:
    """Each pick's heading, with the intervals its words rest on: the margins of a pick best
    on every objective, else the most accurate's lead on the next."""
    claims = []
    for trial, metrics in pick_groups(answer).items():
        all_best = set(metrics) >= set(answer.best)
        measures: tuple[Measure, ...] = ()
        if all_best and len(metrics) > 1 and answer.margins:
            measures = _margin_measures(trial, answer.margins)
        elif "val_accuracy" in metrics:
            lead = answer.accuracy_lead()
            measures = () if lead is None else (_accuracy(trial, lead.runner_up, lead.change),)
        words = {"metrics": metrics, "all_best": all_best}
        claims.append(Claim("pick_title", (trial,), measures, words))
    return claims


def _rule_claims(answer: Answer) -> list[Claim]:
    """The rule's two sentences: the rule and its target, then its pick and why."""
    target, rule = answer.target, answer.rule
    if target is None:
        return []
    words = {"accuracy": target.accuracy, "given": target.given, "how": target.how}
    claims = [Claim("target", (), (), words)]
    if rule is None:
        return claims
    measures = []
    if rule.change is not None:
        measures.append(Measure.of("time_ratio", (rule.pick, rule.versus or ""), rule.change))
    if rule.accuracy is not None:
        measures.append(_accuracy(rule.pick, rule.soonest, rule.accuracy))
    trials = {rule.pick, rule.soonest, *([rule.versus] if rule.versus else []), *rule.within_noise}
    rows = {t: {k: as_number(answer.row(t).get(k)) for k in _RULE_COLUMNS} for t in trials}
    words = {
        **{k: getattr(rule, k) for k in ("pick", "soonest", "versus", "reached", "candidates")},
        "reason": rule.reason, "within_noise": list(rule.within_noise), "rows": rows,
    }  # fmt: skip
    return [*claims, Claim("rule_pick", (rule.pick,), tuple(measures), words)]


# What the rule's sentence shows of each trial it names.
_RULE_COLUMNS = (
    TIME_TO_TARGET_EST_S, TIME_TO_TARGET_EST_LOW, TIME_TO_TARGET_EST_HIGH, IMAGES_TO_TARGET,
    "peak_memory_bytes",
)  # fmt: skip


def _accuracy(a: str, b: str, change: Change) -> Measure:
    return Measure.of("accuracy_difference", (a, b), change)


def _pair_measures(p: PairVerdict) -> tuple[Measure, ...]:
    return (
        Measure.of("throughput_ratio", (p.faster, p.slower), p.throughput),
        _accuracy(p.faster, p.slower, p.accuracy),
    )


def _margin_measures(pick: str, margins: Mapping[str, Margin]) -> tuple[Measure, ...]:
    quantity = {"images_per_second": "throughput_ratio", "val_accuracy": "accuracy_difference"}
    return tuple(
        Measure.of(quantity[metric], (pick, m.runner_up), m.change) for metric, m in margins.items()
    )


def _sentence_claim(answer: Answer) -> Claim:
    p = answer.picks
    if p is not None:
        words = {"by_time": answer.by_time, "data_parallel": answer.data_parallel}
        return Claim("picks", (p.faster, p.slower), _pair_measures(p), words)
    row = answer.front_pick
    pick = str((answer.front.iloc[0] if row is None else row)[TRIAL_ID])
    measures = _margin_measures(pick, answer.margins)
    return Claim("one_pick", (pick,), measures, {"candidates": answer.candidates})


def _why_claim(answer: Answer) -> Claim:
    rec = answer.recommended
    pick = str(rec[TRIAL_ID]) if rec is not None else ""
    p = answer.picks
    if p is None:
        measures = _margin_measures(pick, answer.margins)
        words = {"role": "one", "candidates": answer.candidates}
        return Claim("pick_why", (pick,), measures, words)
    role = "slower" if pick == p.slower else "fastest"
    return Claim("pick_why", (pick,), _pair_measures(p), {"role": role})


def _against_pick_claim(answer: Answer) -> Claim:
    from tuner.time_to_target import why_picked

    rule = answer.rule
    assert rule is not None
    sharp = answer.best.get("val_accuracy")
    if sharp is None or str(sharp[TRIAL_ID]) == rule.pick:
        return Claim("accuracy_against_pick", (rule.pick,))
    change = accuracy_test(sharp, answer.row(rule.pick))
    measure = _accuracy(str(sharp[TRIAL_ID]), rule.pick, change)
    return Claim("accuracy_against_pick", (rule.pick,), (measure,), {"why": why_picked(rule)})


def _probe_rules(cache: Mapping[str, Any]) -> list[Claim]:
    """The speed section's rule, and, where no probe's interval says anything, that."""
    if not cache:
        return []
    claims = [Claim("rule", ("probe_rule",), (), {"name": "probe_rule"})]
    measures = tuple(
        Measure.of("probe_ratio", (str(v["name"]), key), probe_change(dict(v)))
        for key, choice in cache.items()
        for v in choice.get("variants", [])
        if v.get("probed") is not False and v.get("ratio") is not None
    )
    if measures and not any(m.change.informative for m in measures):
        claims.append(Claim("probes_say_nothing", (), measures))
    return claims


def probe_claim(key: str, variant: Mapping[str, Any]) -> Claim:
    """A cell of the speed table: a knob against plain under one probe key."""
    subjects = (str(variant["name"]), key)  # the knob first: a finding names it
    words: dict[str, Any] = {"kept": bool(variant["kept"])}
    if variant.get("probed") is False or variant.get("ratio") is None:
        words["probed"] = variant.get("probed")
        return Claim("probe", subjects, (), words)
    measure = Measure.of("probe_ratio", subjects, probe_change(dict(variant)))
    return Claim("probe", subjects, (measure,), words)
