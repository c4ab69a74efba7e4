"""The report's claims as records (issue 48): each kind's record built from the data, written
to claims.json and read back as plain JSON, rendered into its words; and the auditor's check of
them: a record the data does not support, and words that are not the record's, each fail with a
line naming the claim. Built from numbers (no search): the smoke report's records are checked
where it is built (tests/report/test_report.py)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from built_experiment import built_experiment

from tuner.answer import decide
from tuner.compare import PLAIN_LOADER, REFERENCE
from tuner.experiment import Experiment
from tuner.experiment.limits import CLOCK
from tuner.report._audit_claims import (
    check_claims,
    check_console_claims,
    check_counts_record,
    check_starved_by,
    check_verdict_words,
)
from tuner.report._build_claims import build_claims, wall_time_words
from tuner.report._status import progress_of
from tuner.report._trial_words import no_pick_text, wall_time_problem
from tuner.report._write import _techniques
from tuner.report.claims import (
    CELL_KINDS,
    Claim,
    Claims,
    Measure,
    as_json,
    read_claims,
    render,
    write_claims,
)
from tuner.stats import Change

PROBE_KEY = json.dumps({"scope": "shared", "batch_size": 16})
PROBES = {
    PROBE_KEY: {
        "variants": [
            {"name": "fused_adamw", "ratio": 1.12, "low": 1.03, "high": 1.22, "pairs": 6,
             "kept": True},
            {"name": "channels_last", "ratio": 1.31, "low": 0.13, "high": 13.56, "pairs": 2,
             "kept": False},
            {"name": "compile", "probed": False, "kept": False},
        ]
    }
}  # fmt: skip
LOADED = "machine load (other processes kept 1.9 of 2 cores busy)"
LOAD = "machine load (other processes kept 1.2 of 2 cores busy while it ran)"
# (trials, re-measured images/s per trial and round): each a case the answer words differently
CASES = {
    # two picks: f faster beyond noise, s more accurate beyond noise (a real trade-off)
    "trade-off": (
        [("f", "ok", 120.0, 0.40, 2000), ("s", "ok", 100.0, 0.50, 2000)],
        {"f": [121.0, 119.0, 122.0, 118.0, 120.0, 121.0], "s": [100.0] * 6},
    ),
    # two picks re-measured twice: an interval that says nothing
    "says nothing": (
        [("f", "ok", 117.0, 0.50, 100), ("s", "ok", 100.0, 0.52, 100)],
        {"f": [150.0, 90.0], "s": [100.0, 100.0]},
    ),
    # one trial ahead on both, beyond noise on speed, a tie on accuracy; two starved beside
    "one pick": (
        [
            ("a", "ok", 130.0, 0.51, 2000),
            ("b", "ok", 100.0, 0.50, 2000),
            ("c", "starved", 40.0, 0.2, 2000, "budget"),
            ("d", "starved", 30.0, 0.1, 2000, LOADED),
        ],
        {"a": [131.0, 129.0, 130.0, 132.0, 128.0, 130.0], "b": [100.0] * 6},
    ),
    # the same, and an over-budget trial machine load also cut short of its steps (its kind
    # named after the cause: issue 48, an every-kind search's)
    "cut short": (
        [
            ("a", "ok", 130.0, 0.51, 2000),
            ("b", "ok", 100.0, 0.50, 2000),
            ("d", "starved", 30.0, 0.1, 2000, LOADED),
            ("e", "over budget", 50.0, 0.3, 2000, LOAD),
        ],
        {"a": [131.0, 129.0, 130.0, 132.0, 128.0, 130.0], "b": [100.0] * 6},
    ),
}


def _experiment(case: str) -> Experiment:
    return dataclasses.replace(built_experiment(*CASES[case]), probe_cache=PROBES)


def _records(experiment: Experiment, tmp_path: Path) -> tuple[list[Claim], dict[str, str]]:
    """Every claim the data gives, through claims.json, and a report.md saying each."""
    answer, cache = decide(experiment), experiment.probe_cache
    claims = build_claims(answer, pd.DataFrame(), cache, None, experiment.trials)
    for claim in claims.all.values():
        claims.text(claim.kind, *claim.subjects)
    write_claims(claims, tmp_path / "claims.json")
    records = read_claims(tmp_path / "claims.json")
    return records, {"report.md": "\n\n".join(_said(c, c.text) for c in records)}


def _said(claim: Claim, text: str) -> str:
    """The claim's words as report.md places them: a paragraph, or a table cell."""
    return f"| {text} |" if claim.kind in CELL_KINDS else text


@pytest.mark.parametrize("case", CASES)
def test_every_record_holds_against_its_data_and_reads_back_as_plain_json(
    case: str, tmp_path: Path
) -> None:
    experiment = _experiment(case)
    records, documents = _records(experiment, tmp_path)
    kinds = {c.kind for c in records}
    assert {"probe", "pick_why", "pick_title"} <= kinds
    one = case in ("one pick", "cut short")
    assert ("one_pick" in kinds) == one and ("picks" in kinds) != one
    assert ("starved" in kinds) == one
    assert all(render(c) == c.text for c in records)
    assert json.loads((tmp_path / "claims.json").read_text())  # plain JSON, no pickle
    assert check_claims(records, documents, experiment) == []


def _lie(claim: Claim) -> Claim:
    """The record made to claim something else, its words rendered from the lie: a record
    consistent in itself that only the data can refute."""
    for k, m in enumerate(claim.measures):  # a verdict turned: beyond noise made a tie, ...
        reach = 0.01 if m.change.separated else 0.2
        value = m.neutral + (0.001 if m.change.separated else 0.5)  # ... anything else beyond
        change = Change(value, value - reach, value + reach, max(m.n, 6), m.neutral)
        measures = list(claim.measures)
        measures[k] = Measure.of(m.quantity, m.subjects, change)
        lie = dataclasses.replace(claim, measures=tuple(measures)).with_text()
        if lie.text != claim.text:  # the first measure whose verdict its words say
            return lie
    if "kept" in claim.words:  # a probe cell: kept said of a knob that was not, or the reverse
        words = {**claim.words, "kept": not claim.words["kept"]}
    elif "metrics" in claim.words:  # a heading: one more thing it is best at
        words = {**claim.words, "metrics": [*claim.words["metrics"], "val_accuracy"]}
    elif "name" in claim.words:  # a rule: one the report does not have, said reversed
        text = claim.text.replace("faster", "slower")
        return dataclasses.replace(claim, words={"name": "no such rule"}, text=text)
    elif "counts" in claim.words:  # the counts: one more trial of the first kind, and in all
        first = claim.subjects[0]
        counts = {**claim.words["counts"], first: claim.words["counts"][first] + 1}
        words = {"counts": counts, "total": claim.words["total"] + 1}
    elif "causes" in claim.words:  # the starved: each said cut short by the budget
        words = {"causes": ["budget"] * len(claim.words["causes"])}
    elif "how" in claim.words:  # the target: another accuracy, set another way
        words = {**claim.words, "how": "the target is 0.999, given."}
    else:  # the pick said to be the most accurate: another said more accurate beyond noise
        ahead = Measure.of(
            "accuracy_difference", ("x", *claim.subjects), Change(0.1, 0.05, 0.15, 1, 0.0)
        )
        return dataclasses.replace(claim, measures=(ahead,), words={"why": "x"}).with_text()
    return dataclasses.replace(claim, words=words).with_text()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("how", ["record", "sentence", "record and sentence"])
def test_a_tampered_record_or_sentence_fails_naming_its_claim(
    case: str, how: str, tmp_path: Path
) -> None:
    experiment = _experiment(case)
    records, _ = _records(experiment, tmp_path)
    for i, claim in enumerate(records):
        lie = _lie(claim)
        tampered = list(records)
        blocks = [_said(c, c.text) for c in records]  # report.md: each claim a paragraph
        blocks[i] = _said(claim, lie.text if how != "record" else claim.text)
        text = "\n\n".join(blocks)
        if how == "record":  # the numbers changed, the words left
            tampered[i] = dataclasses.replace(lie, text=claim.text)
        elif how == "record and sentence":  # consistent: the record's words, the data refutes
            tampered[i] = lie
        # else "sentence": report.md says other words than the record
        found = check_claims(tampered, {"report.md": text}, experiment)
        assert found, (how, claim.name())
        assert all(f.check == "claim" and f.claim == claim.name() for f in found), [
            f.line() for f in found
        ]
        assert claim.name() in found[0].line()


def test_a_verdict_the_interval_does_not_allow_fails_by_the_one_rule(tmp_path: Path) -> None:
    experiment = _experiment("trade-off")
    records, documents = _records(experiment, tmp_path)
    picks = next(c for c in records if c.kind == "picks")
    wrong = dataclasses.replace(picks.measures[0], verdict="tie")
    bad = dataclasses.replace(picks, measures=(wrong, *picks.measures[1:]))
    [found, *_] = check_claims([bad], documents, experiment)
    assert "is 'separated' by the one rule, the record says 'tie'" in found.why


def test_a_measure_the_rule_gives_every_verdict_renders_its_own_words() -> None:
    """The gain over the plain loop: faster beyond noise, a tie, says nothing."""
    said = {
        Change(1.4, 1.2, 1.6, 6, 1.0): "faster** (paired, interleaved)",
        Change(1.01, 0.98, 1.04, 6, 1.0): "**not measurably faster**",
        Change(1.3, 0.2, 9.0, 2, 1.0): "**no verdict** on the gain",
    }
    for change, words in said.items():
        claim = Claim("gain", ("p",), (Measure.of("plain_loop_gain", ("p",), change),))
        assert words in render(claim)


def test_a_verdict_word_on_the_first_screen_outside_every_claim_fails(tmp_path: Path) -> None:
    """Issue 48: a claim the auditor's regexes missed went unchecked. Now a verdict word of
    the first screen must lie in a claim's words (whose record the data supports)."""
    records, documents = _records(_experiment("trade-off"), tmp_path)
    screen = f"# Report\n\n## 1. The answer\n\n{documents['report.md']}\n"
    assert check_verdict_words(screen + "\n## 4. Input\n\nfaster\n", records) == []
    added = screen.replace("## 1. The answer\n", "## 1. The answer\n\nIt is the fastest.\n")
    [found] = check_verdict_words(added, records)
    assert found.check == "interval" and "'fastest' lies in no claim's words" in found.why
    unclaimed = check_verdict_words(screen, [c for c in records if c.kind != "picks"])
    words = {f.why.split("'")[1] for f in unclaimed}  # the trade-off's words, no claim's now
    # ("more accurate beyond noise" said right after its own interval is the interval check's)
    assert words == {"fastest", "faster", "beyond noise"}, words


def test_trials_csv_starved_by_is_the_cause_its_record_counts(tmp_path: Path) -> None:
    experiment = _experiment("one pick")
    records, _ = _records(experiment, tmp_path)
    trials = experiment.trials.copy()
    assert check_starved_by(records, trials, "trials.csv") == []
    trials.loc[trials["trial_id"] == "d", "starved_by"] = "budget"  # the load left unsaid
    [found] = check_starved_by(records, trials, "trials.csv")
    assert found.claim == "starved d" and "'budget' for trial d" in found.why


def test_every_trial_cut_short_is_named_by_the_starved_record_and_checked(
    tmp_path: Path,
) -> None:
    """Issue 48: an every-kind search's load-starved trial (an over-budget one) had a
    starved_by no starved record named, and the auditor compared only the trials the records
    named. The record names every trial with a starved_by, its kind said where it is not
    starved; the auditor compares every trial's starved_by with the records."""
    experiment = _experiment("cut short")
    records, _ = _records(experiment, tmp_path)
    [starved] = [c for c in records if c.kind == "starved"]
    assert starved.subjects == ("d", "e") and starved.words["kinds"] == ["starved", "over budget"]
    assert starved.text.startswith("1 trial was starved (1 by machine load): ended by")
    assert starved.text.endswith(
        "Trial `e` was cut short of its planned steps by machine load; it counts as over "
        "budget, not as starved."
    )
    trials = experiment.trials.copy()
    assert check_starved_by(records, trials, "trials.csv") == []
    # the record as it was before: the starved trials only, e unnamed
    before = dataclasses.replace(
        starved, subjects=("d",), words={"causes": starved.words["causes"][:1]}
    ).with_text()
    [found] = check_starved_by([before], trials, "trials.csv")
    assert found.claim == "starved e" and "no record names it" in found.why and LOAD in found.why
    trials.loc[trials["trial_id"] == "b", "starved_by"] = "budget"  # an ok trial said cut short
    [found] = check_starved_by(records, trials, "trials.csv")
    assert found.claim == "starved b" and "no record names it" in found.why


def test_a_run_the_feasibility_check_stopped_is_not_said_cut_short(tmp_path: Path) -> None:
    """An experiment written before the feasibility rule gave its over-budget trial (stopped by
    the memory check after its first steps) a machine-load starved_by: the report does not say
    it was cut short, and its trials.csv does not fail the check for it."""
    experiment = _experiment("cut short")
    experiment.trials["phase"] = ["train", "train", "train", "feasibility"]
    records, _ = _records(experiment, tmp_path)
    [starved] = [c for c in records if c.kind == "starved"]
    assert starved.subjects == ("d",) and "cut short" not in starved.text
    assert check_starved_by(records, experiment.trials, "trials.csv") == []


def test_the_console_says_the_answer_s_claims_in_their_words(tmp_path: Path) -> None:
    experiment = _experiment("says nothing")
    records, _ = _records(experiment, tmp_path)
    said = next(c for c in records if c.kind == "picks").text
    console = f"Search finished: 2 trials (2 ok)\n{said}\n"
    assert check_console_claims(records, console) == []
    lie = console.replace("says nothing, so no verdict on speed", "is faster beyond noise")
    [found] = check_console_claims(records, lie)
    assert found.where == "console" and found.claim == "picks f,s"


def test_the_trials_counted_by_kind_are_a_record_checked_against_the_rows(
    tmp_path: Path,
) -> None:
    """Issue 48: the console's "Search finished: 4 trials (2 ok, 1 starved, 1 over budget)"
    and the report's trials section say the counts record's words; a count tampered in the
    record (claims.json) or in the sentence fails naming the claim, against the experiment and
    against a report's trials.csv alone."""
    experiment = _experiment("cut short")
    records, documents = _records(experiment, tmp_path)
    [counts] = [c for c in records if c.kind == "counts"]
    assert counts.text == "4 trials (2 ok, 1 starved, 1 over budget)"
    assert counts.name() == "counts ok,starved,over budget"
    trials = experiment.trials
    assert check_counts_record(records, trials, "trials.csv") == []
    assert check_console_claims([counts], f"Search finished: {counts.text}\n") == []
    lie = dataclasses.replace(counts, words={**counts.words, "total": 5})  # its words kept
    tampered = [lie if c is counts else c for c in records]
    text, data = check_claims(tampered, documents, experiment)
    assert {text.claim, data.claim} == {counts.name()}
    assert "its text is not its record's words" in text.why and "the data gives" in data.why
    [found] = check_claims([lie.with_text()], {"report.md": lie.with_text().text}, experiment)
    assert found.claim == counts.name() and "the data gives" in found.why
    [found] = check_counts_record([lie.with_text()], trials, "trials.csv")
    assert found.why == "trials.csv gives '4 trials (2 ok, 1 starved, 1 over budget)'"
    said = documents["report.md"].replace(counts.text, "4 trials (3 ok, 1 over budget)")
    [found] = check_claims(records, {"report.md": said}, experiment)
    assert found.claim == counts.name() and "report.md does not say it" in found.why
    [found] = check_console_claims([counts], "Search finished: 4 trials (3 ok, 1 over budget)\n")
    assert found.where == "console" and found.claim == counts.name()


def _loose_effects() -> pd.DataFrame:
    """One change against the recommended config whose interval says nothing (2 pairs)."""
    return pd.DataFrame(
        {
            "arm": [REFERENCE, "+fused_adamw"],
            "images_per_second": [100.0, 130.0],
            "throughput_ratio_vs_reference": [1.0, 1.3],
            "throughput_ratio_vs_reference_low": [1.0, 0.2],
            "throughput_ratio_vs_reference_high": [1.0, 9.0],
            "throughput_ratio_vs_reference_n": [2, 2],
        }
    )


def test_no_interval_says_anything_is_a_claim_on_every_interval(tmp_path: Path) -> None:
    """The speed section's "No probe interval says anything" and the effects' "No information"
    each rest on every interval they speak of: one that says something refutes the record."""
    loose = {"ratio": 1.3, "low": 0.2, "high": 9.0, "pairs": 2, "kept": True}
    cache = {PROBE_KEY: {"variants": [{"name": "fused_adamw", **loose}]}}
    effects = _loose_effects()
    experiment = dataclasses.replace(_experiment("says nothing"), probe_cache=cache)
    claims = build_claims(decide(experiment), effects, cache, {"trial_id": "f"})
    for kind in ("probes_say_nothing", "effects_say_nothing"):
        claim = next(c for c in claims.all.values() if c.kind == kind)
        assert "say" in claim.text and render(claim) == claim.text
        sharp = Measure.of(claim.measures[0].quantity, claim.measures[0].subjects,
                           Change(1.3, 1.2, 1.4, 6, 1.0))  # fmt: skip
        lie = dataclasses.replace(claim, measures=(sharp,))
        [found, *_] = check_claims([lie], {"report.md": claim.text}, None)
        assert found.claim == kind and "cannot be rendered" in found.why


def test_the_input_section_s_verdicts_are_claims_on_the_effects(tmp_path: Path) -> None:
    """The loader settings together against the plain input pipeline, and each loader setting
    measured beyond noise: records whose intervals the effects give again."""
    effects = pd.DataFrame(
        {
            "arm": [REFERENCE, PLAIN_LOADER, "num_workers=1"],
            "images_per_second": [100.0, 70.0, 80.0],
            "data_wait_fraction": [0.1, 0.4, 0.2],
            "throughput_ratio_vs_reference": [1.0, 0.7, 0.8],
            "throughput_ratio_vs_reference_low": [1.0, 0.65, 0.75],
            "throughput_ratio_vs_reference_high": [1.0, 0.75, 0.85],
            "throughput_ratio_vs_reference_n": [6, 6, 6],
        }
    )
    experiment = dataclasses.replace(_experiment("trade-off"), effects=effects)
    claims = build_claims(decide(experiment), effects, {}, None)
    gain = next(c for c in claims.all.values() if c.kind == "loader_gain")
    assert gain.text.startswith("Together, the loader settings make it **1.43x [1.33–1.54]")
    assert "faster** than the plain input pipeline" in gain.text and "40%" in gain.text
    clear = next(c for c in claims.all.values() if c.kind == "loader_clear")
    assert clear.text == (
        "Measured beyond noise around this config: num_workers=1: 0.80x [0.75–0.85], slower."
    )
    # (the auditor's recomputation from effects.csv is the smoke report's: test_report.py)
    assert check_claims([gain, clear], {"report.md": gain.text + clear.text}, None) == []
    moved = dataclasses.replace(clear.measures[0], high=1.2)  # a tie said to be slower
    lie = dataclasses.replace(clear, measures=(moved, *clear.measures[1:]))
    [found] = check_claims([lie], {"report.md": clear.text}, None)
    assert found.claim == clear.name() and "by the one rule" in found.why


def test_the_experiment_s_name_in_the_title_is_no_verdict(tmp_path: Path) -> None:
    records, documents = _records(_experiment("trade-off"), tmp_path)
    screen = f"# Tuning report: best-and-fastest\n\n## 1. The answer\n\n{documents['report.md']}\n"
    assert check_verdict_words(screen, records) == []


def test_a_record_s_unmeasured_figure_reads_back_as_the_data_s(tmp_path: Path) -> None:
    """A figure nobody measured (a candidate not re-measured has no time-to-target bounds) is
    NaN in the data and null in claims.json: the auditor compares them as one (a tracked search
    failed `report --check` on exactly this)."""
    rows = {"a": {"estimated_time_to_target_s": 0.07, "estimated_time_to_target_s_low": math.nan}}
    built = Claim("target", (), (), {"accuracy": 0.5, "given": False, "how": "h", "rows": rows})
    claims = Claims([built])
    claims.text("target")
    write_claims(claims, tmp_path / "claims.json")
    (record,) = read_claims(tmp_path / "claims.json")
    assert record.words["rows"]["a"]["estimated_time_to_target_s_low"] is None
    assert dict(record.words) != dict(built.words)  # as read, NaN is not None ...
    assert as_json(dict(record.words)) == as_json(dict(built.words))  # ... as compared, one


def test_an_unbounded_interval_is_strict_json_and_reads_back(tmp_path: Path) -> None:
    """An interval with no upper end (a time ratio whose slower side never reached the target)
    was written as Python's bare ``Infinity``, which strict JSON parsers refuse: now "inf",
    read back as the same float."""
    change = Change(1.76, 0.0, math.inf, 2, 1.0)
    measure = Measure.of("time_ratio", ("a", "b"), change)
    built = Claim("batch_pair", ("a", "b"), (measure,), {"sizes": [16, 64], "top": math.inf})
    claims = Claims([built])
    claims.text("batch_pair", "a", "b")
    path = tmp_path / "claims.json"
    write_claims(claims, path)

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    json.loads(path.read_text(), parse_constant=refuse)  # no NaN, Infinity or -Infinity
    (record,) = read_claims(path)
    assert record.measures[0].high == math.inf and record.measures[0].low == 0.0
    assert as_json(dict(record.words)) == as_json(dict(built.words))


def test_the_wall_time_record_is_its_trials_clocks_less_the_driver_s_down_time() -> None:
    """Issue 48: `report --check` failed every resumed experiment ("its trial_time_s is not its
    ended_at - started_at"): a trial that ran across a kill -9 and its --resume counts only the
    time a driver was on. The wall-time record carries each trial's time and what its clock
    gives: its end minus its start, less the down time the metadata records
    (tuner.experiment.limits.down_time_s). A time that counts the down time (or leaves out
    more), or a trial that ran with no clock, is no record's words."""
    trials = pd.DataFrame(
        {
            "trial_id": ["a", "b", "c"],
            "started_at": pd.to_datetime([1000.0, 1500.0, None], unit="s", utc=True),
            "ended_at": pd.to_datetime([1600.0, 1560.0, None], unit="s", utc=True),
            "trial_time_s": [300.0, 60.0, None],  # a: 600 s on the clock, 300 of them down
            "ray_status": ["TERMINATED", "TERMINATED", "PENDING"],  # c never started
        }
    )
    metadata = {CLOCK: {"down_unix_s": [[1100.0, 1400.0]]}}
    words = wall_time_words(trials, metadata)
    assert words == {"seconds": 360.0, "trials": {"a": [300.0, 300.0], "b": [60.0, 60.0]}}
    assert render(Claim("wall_time", (), (), words)) == "summed trial wall time: 6m00s"
    assert wall_time_problem(words) == ""
    for times, why in [
        ([600.0, 60.0, None], "trial a's trial_time_s is 600.0s, its clock's 300.0s"),
        ([300.0, None, None], "trial b ran, and the trials table has no start, end or time"),
    ]:
        counted = Claim(
            "wall_time", (), (), wall_time_words(trials.assign(trial_time_s=times), metadata)
        )
        [found] = check_claims([counted.with_text()], {"report.md": counted.with_text().text}, None)
        assert found.why.startswith(why), found.why


def test_a_report_whose_records_cover_it_has_every_verdict_and_duration_in_a_record() -> None:
    """Issue 48: with the clock's records (a report written since them), every section's
    verdict words and every duration stated lie in a record's words, with no regex left to
    re-read them: a "faster" beside a bare interval and a duration no record states each fail.
    A report from before them is read as before (its prose sections by the interval check)."""
    markdown = (
        "# Tuning report: e\n\n## 7. Trials\n\nIt ran 1.01x [0.90–1.12] faster.\n\n"
        "## 10. Details\n\n- summed trial wall time: 4s\n- the search took 9s\n"
    )
    clock = Claim("wall_time", (), (), {"seconds": 4.0, "trials": {}}).with_text()
    found = check_verdict_words(markdown, [clock])
    assert [(f.check, f.why.split(" lies")[0]) for f in found] == [
        ("interval", "'faster'"),
        ("duration", "'9s'"),
    ]
    assert check_verdict_words(markdown, []) == []  # an older report: not its records' to say


def test_a_value_shown_is_no_claim_in_a_report_its_records_cover() -> None:
    """A name, path or error message the report shows (a code span; a table row of the
    trials and details sections, whose cells are the data) is checked as no claim: an
    experiment named `fastest-30s` and an error that says "took 30s, best effort" are values."""
    markdown = (
        "# Tuning report: fastest\n\n## 7. Trials\n\n| a | errored | timed out after 30s, best |"
        "\n\n## 10. Details\n\n- experiment: `fastest-30s` (`/tmp/best`)\n- summed trial wall "
        "time: 4s\n"
    )
    clock = Claim("wall_time", (), (), {"seconds": 4.0, "trials": {}}).with_text()
    assert check_verdict_words(markdown, [clock]) == []


def test_no_pick_names_the_memory_budget_only_where_a_trial_was_over_it() -> None:
    words = {"counts": {"starved": 8}, "total": 8, "limit_bytes": None}
    starved = no_pick_text({**words, "memory_said": False})
    assert "none of the 8 trials finished ok." in starved and "memory" not in starved
    assert "within the memory budget" in no_pick_text(words)  # a record from before: its words
    over = {"counts": {"over budget": 2}, "total": 2, "limit_bytes": 2**20, "memory_said": True}
    over = no_pick_text(over)
    assert "finished ok within the memory budget." in over
    assert "2 trials measured more than the budget of 1.0 MiB" in over


def test_the_effects_step_s_time_is_said_by_its_clock_s_record_alone() -> None:
    """Issue 48: the effects' "No information" record carried the effects phase's "measured"
    words (its rounds, its time) beside the phase_time record stating the same duration: two
    owners of one duration. The record now rests on the phase_time record for it: its words
    name the trial alone, and section 3 says the clock record's words after it; a tampered
    duration is the phase_time record's (checked against its clock). A record written before
    (with its own ``measured``) still renders its own words."""
    effects = _loose_effects()
    info = {"trial_id": "f", "repeats_done": 2, "method": "fresh runs", "stopped": "max",
            "time_limit_s": 5.0, "seconds": 7.0,
            "started_unix_s": 100.0, "ended_unix_s": 107.0}  # fmt: skip
    base = _experiment("says nothing")
    experiment = dataclasses.replace(
        base, effects=effects, metadata={**base.metadata, "effects": info}
    )
    answer = decide(experiment)
    claims = build_claims(answer, effects, {}, info)
    claims.add(Claim("phase_time", ("effects",), (), info))
    [nothing] = [c for c in claims.all.values() if c.kind == "effects_say_nothing"]
    assert dict(nothing.words) == {"trial": "f"}  # no duration of its own
    clock = claims.all[("phase_time", ("effects",))]
    assert "took 7s: 2s over its 5s limit" in clock.text and "7s" not in nothing.text
    section = _techniques(experiment, answer, effects, progress_of(experiment), None, claims)
    [said] = section.blocks
    assert said == f"{nothing.text} Measured {clock.text}."
    markdown = "\n\n".join(section.blocks)
    assert check_claims([nothing, clock], {"report.md": markdown}, None) == []
    longer = dataclasses.replace(clock, words={**info, "seconds": 3.0}).with_text()  # a lie
    tampered = markdown.replace(clock.text, longer.text)
    [found] = check_claims([nothing, clock], {"report.md": tampered}, None)
    assert found.claim == "phase_time effects" and "report.md does not say it" in found.why
    older = dataclasses.replace(nothing, words={"trial": "f", "measured": "in 2 rounds"})
    assert "(trial `f`) in 2 rounds, and no interval" in render(older)
