"""The auditor (issue 39) on what needs no search: the example reports kept in the repository,
the durations a console states, and the one interval rule's words. The experiments the tests
build are audited where they are built (tests/report/test_report.py: the smoke report, each
check tampered; tests/tune/test_clients.py: every kind and every tracker;
tests/tune/test_tracking.py: a tracked search and its report)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tuner.commands import main
from tuner.measure import budget_text
from tuner.report._audit_text import check_intervals
from tuner.report.audit import audit, check_console

EXAMPLES = Path(__file__).parents[2] / "reports" / "examples"
# A claim of vit_space-cpu's answer ("the next takes 1.01x [0.66–1.56], an interval that says
# nothing") made false: an interval holding 1x called beyond noise.
TRUE_CLAIM = "1.01x [0.66–1.56], an interval that says nothing"
FALSE_CLAIM = "1.01x [0.66–1.56], beyond noise"


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_every_claim_of_the_example_reports_is_checked(example: str) -> None:
    found = audit(EXAMPLES / example)
    assert found.findings == [], found.lines()


def test_the_check_flag_lists_each_failing_claim_and_exits_1(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    assert main(["report", "--check", str(EXAMPLES / "vit_space-cpu")]) == 0
    capsys.readouterr()
    report = tmp_path / "vit_space-cpu"
    shutil.copytree(EXAMPLES / "vit_space-cpu", report)
    text = (report / "report.md").read_text()
    assert text.count(TRUE_CLAIM) == 1
    (report / "report.md").write_text(text.replace(TRUE_CLAIM, FALSE_CLAIM))
    assert main(["report", "--check", str(report)]) == 1
    lines = capsys.readouterr().out.splitlines()
    # the regexes' reading of the interval, then the records': the sentence is no claim's words
    assert lines[0].startswith("interval: report.md: '1.01x [0.66–1.56]': it says separated")
    assert any(line.startswith("claim: claims.json: 'rule_pick ") for line in lines), lines
    assert main(["report", "--check", str(EXAMPLES / "input_space-cpu")]) == 0


def test_a_report_alone_without_its_starved_record_fails_naming_each_trial(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """Issue 48: a deleted record went unseen. A report folder alone has no experiment to make
    its claims again from (with one, every kind is: tests/report/test_report.py); its
    trials.csv still names each trial cut short (starved_by), and each must be in a record."""
    report = tmp_path / "vit_space-cpu"
    shutil.copytree(EXAMPLES / "vit_space-cpu", report)
    assert main(["report", "--check", str(report)]) == 0  # the untouched copy
    records = json.loads((report / "claims.json").read_text())
    [starved] = [r for r in records["claims"] if r["kind"] == "starved"]
    records["claims"].remove(starved)
    (report / "claims.json").write_text(json.dumps(records))
    capsys.readouterr()
    assert main(["report", "--check", str(report)]) == 1
    lines = capsys.readouterr().out.splitlines()
    for trial in starved["subjects"]:
        said = f"claim: claims.json: 'starved {trial}': vit_space-cpu/trials.csv has starved_by"
        assert any(line.startswith(said) and "no record names it" in line for line in lines)


def test_a_phase_states_its_duration_on_the_clock() -> None:
    """Issue 39: the re-measurement "took 1m16s, within its limit" while 1m59s passed."""
    info = {"time_limit_s": 80.0, "seconds": 76.0, "started_unix_s": 1000.0, "ended_unix_s": 1119.0}
    assert budget_text(info).startswith("took 1m59s on the clock, 1m16s of it measuring, within")
    assert budget_text({**info, "ended_unix_s": 1076.2}).startswith("took 1m16s, within")


def test_a_stated_duration_shorter_than_the_consoles_own_clock_fails() -> None:
    console = (
        "Re-measuring throughput of the top 2 candidate(s) alone ...\n"
        "  ... re-measuring: 30s, taking longer than estimated\n"
        "  ... re-measuring: 1m00s, taking longer than estimated\n"
        "  2 rounds in 15s, ended by the most rounds allowed (took 15s, within its 15s limit).\n"
    )
    trials = pd.DataFrame({"trial_id": ["a"], "kind": ["ok"]})
    (finding,) = check_console(console, trials)
    assert finding.check == "duration" and "1m00s" in finding.why
    fixed = console.replace(
        "took 15s, within", "took 1m02s on the clock, 15s of it measuring, within"
    )
    assert check_console(fixed, trials) == []


@pytest.mark.parametrize(
    ("text", "fails"),
    [
        ("| plain loop | tie (0.69x [0.25–1.92]) | no verdict |", True),  # the table
        ("| plain loop | says nothing (0.69x [0.25–1.92]) | no verdict |", False),
        ("Too noisy: 22.32x [8.30–59.98] says nothing.", True),  # excludes 1x: a verdict
        ("It is faster beyond noise (22.32x [8.30–59.98]).", False),
        ("The two run at the same speed within noise (1.01x [0.98–1.04]).", False),
        ("The two run at the same speed within noise (1.01x [0.40–2.50]).", True),
        ("| knob | 1.26x [0.42–3.79] (kept) |", True),  # says nothing, shown bare
        # the answer's gain line: "faster" inside "not measurably faster" claims no separation
        ("the recommendation is **not measurably faster**: 1.05x [0.87–1.27].", False),
        ("the recommendation is **not measurably faster**: 1.35x [1.17–1.57].", True),
    ],
)
def test_verdict_words_are_checked_by_the_one_rule(text: str, fails: bool) -> None:
    assert bool(check_intervals(text, "report.md")) == fails
