"""trials.csv's ``speed_choice`` as a checked record (issue 48): the trial's speed phase event
keeps what its choice rested on (the probe-cache keys, the choice, its config's fields), the
report makes one record per such trial and renders trials.csv's column from it, and
``report --check`` compares each with trials.csv, with its own words and with the probe cache.
Read from the shared smoke search (tests/conftest.py); the tampered cases are copies of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tuner.commands import main
from tuner.experiment import CLAIMS_FILE, PHASES_FILE, PROBE_CACHE_FILE, read_trials_csv
from tuner.report import write_report
from tuner.report._speed_claims import _cache_problems
from tuner.report.audit import audit

KIND = "speed_choice"


@pytest.fixture(scope="module")
def report(smoke_experiment: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(smoke_experiment, out_dir=tmp_path_factory.mktemp("speed-report"))


def _records(report: Path) -> dict[str, dict]:
    claims = json.loads((report / CLAIMS_FILE).read_text())["claims"]
    return {c["subjects"][0]: c for c in claims if c["kind"] == KIND}


def _speed_events(experiment: Path) -> dict[Path, dict]:
    """Each trial folder's last speed phase event."""
    events = {}
    for log in experiment.glob(f"*/{PHASES_FILE}"):
        speed = [json.loads(x) for x in log.read_text().splitlines() if '"speed"' in x]
        speed = [e for e in speed if e["part"] == "speed"]
        if speed:
            events[log] = speed[-1]
    return events


def _check(experiment: Path, report: Path, capsys: pytest.CaptureFixture) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["report", "--check", str(experiment), "--out", str(report)])
    return code, capsys.readouterr().out.splitlines()


def test_each_trial_that_chose_speed_has_a_record_its_trials_csv_says(
    smoke_experiment: Path, report: Path, capsys: pytest.CaptureFixture
) -> None:
    events = _speed_events(smoke_experiment)
    assert events and all("choice" in e and e["keys"] for e in events.values())
    records = _records(report)
    trials = read_trials_csv(report / "trials.csv").set_index("trial_id")
    assert len(records) == len(events) == len(trials)  # each trial probed or reused a choice
    for trial, record in records.items():
        assert trials.at[trial, KIND] == record["text"] != ""
        assert record["words"]["keys"] and record["words"]["choice"]["variants"]
    code, lines = _check(smoke_experiment, report, capsys)
    assert code == 0 and lines[-1].startswith("every claim checked holds"), lines


def test_a_tampered_speed_choice_in_trials_csv_fails_naming_the_trial(
    smoke_experiment: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    copy = tmp_path / "report"
    shutil.copytree(report, copy)
    text = (copy / "trials.csv").read_text()
    trial, record = next(iter(_records(report).items()))
    assert text.count(record["text"]) >= 1
    (copy / "trials.csv").write_text(text.replace(record["text"], "fused_adamw (1.33x, kept)"))
    code, lines = _check(smoke_experiment, copy, capsys)
    assert code == 1
    said = f"claim: claims.json: 'speed_choice {trial}': report/trials.csv has speed_choice"
    assert any(line.startswith(said) for line in lines), lines


@pytest.mark.parametrize("how", ["words", "text"])
def test_a_tampered_speed_choice_record_fails_naming_the_trial(
    how: str, smoke_experiment: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    copy = tmp_path / "report"
    shutil.copytree(report, copy)
    document = json.loads((copy / CLAIMS_FILE).read_text())
    row = next(c for c in document["claims"] if c["kind"] == KIND)
    if how == "words":  # its choice said over the memory budget: other words
        row["words"]["choice"]["over_budget"] = True
    else:
        row["text"] = "channels_last (1.31x [0.13–13.56], within noise)"
    (copy / CLAIMS_FILE).write_text(json.dumps(document))
    code, lines = _check(smoke_experiment, copy, capsys)
    said = f"claim: claims.json: 'speed_choice {row['subjects'][0]}': "
    assert code == 1
    assert any(line.startswith(said) and "its text is not its record" in line for line in lines)


def test_a_record_whose_probed_row_is_not_the_probe_cache_s_fails(
    smoke_experiment: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The trial's phase log says a knob was probed at 1.20x, the cache of its key at 1.30x."""
    experiment = tmp_path / "smoke"
    shutil.copytree(smoke_experiment, experiment, ignore=shutil.ignore_patterns("checkpoint_*"))
    log, event = next(iter(sorted(_speed_events(experiment).items())))
    row = event["choice"]["variants"][0]
    probed = {"probed": True, "ratio": 1.2, "low": 1.1, "high": 1.3, "pairs": 3, "kept": False}
    row.update(probed)
    log.write_text(log.read_text() + json.dumps(event) + "\n")  # the last speed event counts
    cache = json.loads((experiment / PROBE_CACHE_FILE).read_text())
    key = next(k for k in event["keys"] if any(v["name"] == row["name"] for v in
                                                 cache[k]["variants"]))  # fmt: skip
    cached = next(v for v in cache[key]["variants"] if v["name"] == row["name"])
    cached.update({**probed, "ratio": 1.3})
    (experiment / PROBE_CACHE_FILE).write_text(json.dumps(cache))
    out = write_report(experiment, out_dir=tmp_path / "report")
    code, lines = _check(experiment, out, capsys)
    trial = next(t for t, r in _records(out).items() if r["words"]["choice"]["variants"][0] == row)
    said = f"claim: claims.json: 'speed_choice {trial}': its {row['name']} (1.20x [1.10–1.30]"
    assert code == 1
    assert any(line.startswith(said) and "probe_cache.json's under its keys (1.30x" in line
               for line in lines), lines  # fmt: skip
    # A trial with probe runs of its own whose measured row the cache holds as not probed (a
    # resumed search kept a later session's verdict): said as a note, not a finding.
    run = {"t": 1.0, "part": "probe", "arm": row["name"], "wall_s": 0.5, "status": "ok"}
    log.write_text(json.dumps(run) + "\n" + log.read_text())
    cached.update({"probed": False, "ratio": None, "low": None, "high": None})
    (experiment / PROBE_CACHE_FILE).write_text(json.dumps(cache))
    found = audit(experiment, report_dir=out)
    assert not any(line.startswith(said) for line in found.lines()), found.lines()
    assert any(note.startswith(f"speed_choice {trial}: ") and "its own probe runs" in note
               for note in found.notes), found.notes  # fmt: skip


def test_an_experiment_from_before_the_record_passes_and_says_what_it_did_not_check(
    smoke_experiment: Path, tmp_path: Path
) -> None:
    experiment = tmp_path / "smoke"
    shutil.copytree(smoke_experiment, experiment, ignore=shutil.ignore_patterns("checkpoint_*"))
    for log in experiment.glob(f"*/{PHASES_FILE}"):
        events = [json.loads(line) for line in log.read_text().splitlines()]
        old = [
            {k: v for k, v in e.items() if k not in ("keys", "choice", "config")} for e in events
        ]
        log.write_text("".join(json.dumps(e) + "\n" for e in old))
    out = write_report(experiment, out_dir=tmp_path / "report")
    assert _records(out) == {}
    found = audit(experiment, report_dir=out)
    assert found.ok, found.lines()
    assert any("speed_choice of 3 trials not checked" in note for note in found.notes), found.notes


def test_a_key_a_later_trial_completed_still_holds_the_record_s_rows() -> None:
    """The probe budget left a knob unprobed; a later trial probed it under the same key: the
    cache's entry grew, the earlier trial's rows are still in it with the same figures."""
    probed = {"name": "fused_adamw", "ratio": 1.2, "low": 1.1, "high": 1.3, "pairs": 3,
              "kept": True}  # fmt: skip
    unprobed = {"name": "set_to_none", "ratio": None, "probed": False, "kept": False}
    words = {"keys": ["k"], "choice": {"variants": [probed, unprobed]}}
    later = {**unprobed, "ratio": 1.01, "low": 0.9, "high": 1.1, "pairs": 3, "probed": True}
    assert _cache_problems(words, {"k": {"variants": [probed, later]}}) == ([], [])
    moved = {**probed, "kept": False}
    [why], [] = _cache_problems(words, {"k": {"variants": [moved, later]}})
    assert why.startswith("its fused_adamw (1.20x [1.10–1.30], kept True) is not")
    missing = [f"{PROBE_CACHE_FILE} has no entry of its key k"]
    assert _cache_problems(words, {}) == (missing, [])
    unkept = {**probed, "ratio": None, "probed": False}  # the cache holds it as not probed
    assert _cache_problems(words, {"k": {"variants": [unkept, later]}})[0] == []
