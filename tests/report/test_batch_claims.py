"""The batch-size section's verdicts as records (issue 48, issue 47's batch-size answer): each
adjacent pair of batch sizes (``batch_pair``: the time ratio, its interval and the one rule's
verdict) and the conclusion (``batch_answer``) built from the trials and re-measurements,
rendered into the section's words, written to claims.json; the auditor builds them again and
finds a tampered record, a tampered sentence and a deleted record. Built from numbers (no
search): each batch size one trial whose accuracy curve crosses the target."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import pytest
from built_experiment import built_experiment

from tuner.answer import decide
from tuner.experiment import Experiment, typed_trials
from tuner.experiment._load import curves_frame
from tuner.record import COUNT, ENGINE_KEYS, NUMBER, SEARCH_KEYS, TABLE_KEYS
from tuner.report._audit_claims import check_claims, check_claims_kept, check_verdict_words
from tuner.report._batch import batch_section
from tuner.report._build_claims import claims_for
from tuner.report._write import placed_claims
from tuner.report.claims import Claim, Claims, Measure, read_claims, render, write_claims
from tuner.stats import Change

TARGET = 0.3
STEPS = 25  # evaluations per curve; the target is crossed at the 20th (the one before: 0.95)
SIZES = {"a": 16, "b": 32, "c": 64}


def _runs(ips: float) -> list[float]:
    """Six re-measured rounds around ``ips``, within +-1 %: a tight paired interval."""
    return [ips * (1 + d) for d in (0.01, -0.01, 0.005, -0.005, 0.0, 0.002)]


def batch_experiment(trials: dict[str, tuple[int, float | None]]) -> Experiment:
    """``trials``: id -> (images to the target, re-measured images/s; None: not re-measured,
    the search's figure 100 images/s), at the batch size :data:`SIZES` gives; a target
    accuracy of 0.3 given. Images to target None: the curve never reaches it."""
    rows = [(t, "ok", ips or 100.0, 0.5, 2000) for t, (_, ips) in trials.items()]
    experiment = built_experiment(rows, {t: _runs(ips) for t, (_, ips) in trials.items() if ips})
    frame = experiment.trials.assign(param_batch_size=[SIZES[t] for t in trials])
    keys = {**TABLE_KEYS, **SEARCH_KEYS, **ENGINE_KEYS}  # the figures the report's tables show
    numbers = [k for k, key in keys.items() if key.dtype in (NUMBER, COUNT) and k not in frame]
    missing = dict.fromkeys(numbers, math.nan)
    frame = typed_trials(frame.assign(**missing))
    curves = [
        {"trial_id": t, "step": k, "images_seen": (images or 1000) * k // 20, "train_time_s": k,
         "val_accuracy": TARGET * k / 20 if images else 0.1, "val_images": 2000}
        for t, (images, _) in trials.items()
        for k in range(1, STEPS + 1)
    ]  # fmt: skip
    return dataclasses.replace(
        experiment,
        trials=frame,
        metadata={**experiment.metadata, "options": {"target_accuracy": TARGET}},
        configs={t: {"batch_size": SIZES[t], "base_lr": 0.1} for t in trials},
        param_names=["batch_size", "base_lr"],
        curves=curves_frame(curves),
    )


# Each outcome of the section: images to target and images/s per trial.
CASES = {
    # 16 -> 32 pays beyond noise (10 s -> 5.6 s), 32 -> 64 reaches it later beyond noise
    "stops": {"a": (1000, 100.0), "b": (1000, 180.0), "c": (2000, 200.0)},
    # 16 -> 32 pays, 32 -> 64 a tie (5.6 s each, the crossings' ranges within 5 %)
    "tie": {"a": (1000, 100.0), "b": (1000, 180.0), "c": (2000, 360.0)},
    # every larger batch sooner, beyond noise
    "pays": {"a": (1000, 100.0), "b": (1000, 180.0), "c": (1000, 300.0)},
    # not re-measured: no interval, so no verdict
    "cannot tell": {"a": (1000, None), "b": (1000, None), "c": (1000, None)},
    # one size reached the target
    "too few": {"a": (1000, 100.0), "b": (None, 180.0), "c": (None, 300.0)},
    # two sizes reached it, each sooner; batch 64 was searched and never did
    "unreached": {"a": (1000, 100.0), "b": (1000, 180.0), "c": (None, 300.0)},
    # batch 32 between them never did: 16 -> 64 compared, and 32 named as not reached
    "gap": {"a": (1000, 100.0), "b": (None, 180.0), "c": (1000, 300.0)},
}
WORDS = {
    "stops": "A larger batch stops paying from batch 64: it reaches the target later, beyond "
    "noise. The critical batch size on this hardware is about 32.",
    "tie": "From batch 32 to 64 the times are a tie: a larger batch stops paying from 64, so "
    "the critical batch size on this hardware is about 32.",
    "pays": "Every larger batch searched reached the target sooner, beyond noise: the critical "
    "batch size is above the largest searched (64).",
    "cannot tell": "From batch 16 to 32 the measurements cannot tell (1.00x, no interval: not "
    "re-measured side by side): no critical batch size can be named from these trials.",
    "too few": "Too few trials to answer: only batch 16 reached the target. Whether a larger "
    "batch reaches it sooner needs at least two batch sizes that do (more trials, or a lower "
    "--target-accuracy).",
    "unreached": "Every larger batch that reached the target reached it sooner, beyond noise "
    "(no trial of batch 64 reached it): the critical batch size is at least 32; nothing is "
    "known above it.",
    "gap": "Every larger batch that reached the target reached it sooner, beyond noise (no "
    "trial of batch 32 reached it): the critical batch size is above the largest searched (64).",
}


def _section(experiment: Experiment, claims: Claims) -> str:
    """The section's verdict paragraph, placed from ``claims``."""
    section = batch_section(experiment, decide(experiment), None, claims)
    assert section is not None
    return section.blocks[1]


def _records(experiment: Experiment, tmp_path: Path) -> tuple[list[Claim], dict[str, str]]:
    """The batch section's records through claims.json, and a report.md saying the section."""
    claims = Claims(c for c in claims_for(experiment, decide(experiment)).all.values())
    text = _section(experiment, claims)
    write_claims(claims, tmp_path / "claims.json")
    records = read_claims(tmp_path / "claims.json")
    markdown = f"# Tuning report\n\n## 6. Batch size and time to target\n\n{text}\n"
    return records, {"report.md": markdown}


@pytest.mark.parametrize("case", CASES)
def test_each_outcome_is_a_record_said_in_the_section_s_words(case: str, tmp_path: Path) -> None:
    experiment = batch_experiment(CASES[case])
    records, documents = _records(experiment, tmp_path)
    [answer] = [c for c in records if c.kind == "batch_answer"]
    pairs = [c for c in records if c.kind == "batch_pair"]
    assert answer.text == WORDS[case] and render(answer) == answer.text
    assert {c.kind for c in records} == {"batch_answer", *(["batch_pair"] if pairs else [])}
    reached = [t for t, (images, _) in CASES[case].items() if images]
    assert [c.subjects for c in pairs] == list(itertools.pairwise(reached))
    for pair in pairs:  # the words: the two sizes, the ratio with its interval and verdict
        sizes = [SIZES[t] for t in pair.subjects]
        assert pair.words == {"sizes": sizes}
        assert pair.text.startswith(f"batch {sizes[0]} to {sizes[1]}: ")
        assert pair.text in documents["report.md"]
    # the conclusion rests on the pairs up to the one it names
    assert answer.measures == tuple(p.measures[0] for p in pairs[: len(answer.subjects) - 1])
    assert check_claims(records, documents, experiment) == []
    assert check_verdict_words(documents["report.md"], records) == []


def test_the_pairs_measure_the_one_rule_s_verdicts(tmp_path: Path) -> None:
    verdicts = {}
    for case in ("stops", "tie", "cannot tell"):
        records, _ = _records(batch_experiment(CASES[case]), tmp_path)
        pairs = [c for c in records if c.kind == "batch_pair"]
        verdicts[case] = [(c.measures[0].quantity, c.measures[0].verdict) for c in pairs]
    ratio = "batch_time_ratio"
    assert verdicts == {
        "stops": [(ratio, "separated"), (ratio, "separated")],
        "tie": [(ratio, "separated"), (ratio, "tie")],
        "cannot tell": [(ratio, "none"), (ratio, "none")],
    }


def _moved(measure: Measure, **change: float) -> Measure:
    """The measure with its value, interval or pairs changed and its verdict the rule's."""
    c = measure.change
    fields = {"value": c.value, "low": c.low, "high": c.high, "n": c.n, **change}
    return Measure.of(measure.quantity, measure.subjects, Change(**fields, neutral=c.neutral))


def _tampered_records(claim: Claim) -> dict[str, Claim]:
    """The record changed each way, its words left as they were (claims.json edited)."""
    m = claim.measures[0]
    return {
        "value": dataclasses.replace(claim, measures=(_moved(m, value=m.value * 1.1),)),
        "interval": dataclasses.replace(claim, measures=(_moved(m, low=m.value * 0.99),)),
        "verdict": dataclasses.replace(claim, measures=(dataclasses.replace(m, verdict="tie"),)),
        "sizes": dataclasses.replace(claim, words={"sizes": [16, 128]}),
    }


@pytest.mark.parametrize("what", ["value", "interval", "verdict", "sizes"])
def test_a_tampered_pair_record_fails_naming_it(what: str, tmp_path: Path) -> None:
    experiment = batch_experiment(CASES["stops"])
    records, documents = _records(experiment, tmp_path)
    pair = next(c for c in records if c.kind == "batch_pair")
    lie = _tampered_records(pair)[what]
    for told in (lie, lie.with_text()):  # its words left, or made the lie's (and said so)
        said = documents["report.md"].replace(pair.text, told.text)
        found = check_claims([told if c is pair else c for c in records], {"report.md": said},
                             experiment)  # fmt: skip
        assert found and {f.claim for f in found} == {"batch_pair a,b"}, [f.line() for f in found]


def test_a_tampered_conclusion_record_fails_naming_it(tmp_path: Path) -> None:
    """The conclusion made to rest on the tie of the tie case: it then names that pair,
    rendered consistently, and only the data refutes it."""
    experiment = batch_experiment(CASES["stops"])
    records, documents = _records(experiment, tmp_path)
    answer = next(c for c in records if c.kind == "batch_answer")
    tied = _moved(answer.measures[-1], value=1.0, low=0.97, high=1.03)
    lie = dataclasses.replace(answer, measures=(*answer.measures[:-1], tied)).with_text()
    assert lie.text.startswith("From batch 32 to 64 the times are a tie")
    said = documents["report.md"].replace(answer.text, lie.text)
    found = check_claims([lie if c is answer else c for c in records], {"report.md": said},
                         experiment)  # fmt: skip
    assert [f.claim for f in found] == ["batch_answer a,b,c"]
    assert "the data gives" in found[0].why


@pytest.mark.parametrize("kind", ["batch_pair", "batch_answer"])
def test_a_tampered_sentence_in_report_md_fails_naming_its_claim(kind: str, tmp_path: Path) -> None:
    experiment = batch_experiment(CASES["stops"])
    records, documents = _records(experiment, tmp_path)
    claim = next(c for c in records if c.kind == kind)
    said = documents["report.md"].replace(claim.text, claim.text.replace("beyond noise", "a tie"))
    assert said != documents["report.md"]
    [found] = check_claims(records, {"report.md": said}, experiment)
    assert found.claim == claim.name() and "report.md does not say it" in found.why


@pytest.mark.parametrize("kind", ["batch_pair", "batch_answer"])
def test_a_deleted_record_fails_naming_it(kind: str) -> None:
    """check_claims_kept makes the report's claims again (placed_claims places the batch
    section's, with no plot drawn) and names each record claims.json lacks."""
    experiment = batch_experiment(CASES["stops"])
    made = placed_claims(experiment, decide(experiment))
    placed = list(made.placed.values())
    assert {"batch_pair", "batch_answer"} <= {c.kind for c in placed}
    assert check_claims_kept(placed, experiment) == []
    gone = next(c for c in placed if c.kind == kind)
    [found] = check_claims_kept([c for c in placed if c is not gone], experiment)
    assert found.claim == gone.name() and "has no record of it" in found.why


def test_the_conclusion_s_measures_are_the_pairs_it_rests_on() -> None:
    """Every pair paid: the conclusion rests on all; one stops: on those up to it."""
    for case, rests in (("pays", ("a", "b", "c")), ("stops", ("a", "b", "c"))):
        experiment = batch_experiment(CASES[case])
        claims = claims_for(experiment, decide(experiment)).all
        [answer] = [c for c in claims.values() if c.kind == "batch_answer"]
        assert answer.subjects == rests and len(answer.measures) == 2
    experiment = batch_experiment(CASES["cannot tell"])
    claims = claims_for(experiment, decide(experiment)).all
    [answer] = [c for c in claims.values() if c.kind == "batch_answer"]
    assert answer.subjects == ("a", "b") and math.isnan(answer.measures[0].low)


def test_a_verdict_word_of_the_section_outside_its_claims_fails(tmp_path: Path) -> None:
    """The section is one whose verdict words must lie in a claim's words: one added beside
    them is a verdict nothing checks."""
    records, documents = _records(batch_experiment(CASES["stops"]), tmp_path)
    added = documents["report.md"] + "\nBatch 128 would be faster.\n"
    [found] = check_verdict_words(added, records)
    assert found.check == "interval" and "'faster' lies in no claim's words" in found.why
