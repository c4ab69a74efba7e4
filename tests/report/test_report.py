"""The report on real experiments made by ``tuner search`` (see conftest)."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tuner.answer import decide
from tuner.commands import main
from tuner.compare import PLAIN, REFERENCE
from tuner.config import load_config_file
from tuner.experiment import (
    CLAIMS_FILE,
    load_experiment,
    read_trials_csv,
    speed_settings_of,
    write_trials_csv,
)
from tuner.record import KINDS
from tuner.report import write_report
from tuner.report._effects import (
    controlled_effects,
    effects_table,
    plain_loop_gain,
    says_nothing,
)
from tuner.report._write import placed_claims
from tuner.report.audit import CHECKS, audit
from tuner.report.claims import CSV_KINDS, SINCE_FORMAT_1, Claim, as_json, read_claims, render
from tuner.report.document import md_text
from tuner.techniques import settings_text, speed_knobs

SECTIONS = [
    "1. The answer",
    "2. Pareto front",
    "3. What each technique does",
    "4. Input pipeline",
    "5. Speed settings chosen per training config",
    "6. Batch size and time to target",
    "7. Trials",
    "8. Parameter importance",
    "9. Plots",
    "10. Details",
]


def md_table(markdown: str, caption: str) -> pd.DataFrame:
    """The pipe table that follows ``*caption*`` in report.md, as strings."""
    block = markdown.split(f"*{caption}*", 1)[1].strip().split("\n\n", 1)[0]
    lines = [re.split(r"(?<!\\) \| ", line.strip().strip("|")) for line in block.splitlines()]
    header, rows = [_cell(c) for c in lines[0]], [[_cell(c) for c in r] for r in lines[2:]]
    return pd.DataFrame(rows, columns=header)


def _cell(text: str) -> str:
    """A Markdown cell as its text: backslash escapes and HTML entities undone."""
    return html.unescape(re.sub(r"\\(.)", r"\1", text.strip()))


def section(markdown: str, number: int) -> str:
    return markdown.split(f"## {number}.", 1)[1].split(f"## {number + 1}.", 1)[0]


@pytest.fixture(scope="module")
def report(smoke_experiment: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(smoke_experiment, out_dir=tmp_path_factory.mktemp("report"))


def test_every_file_and_section(report: Path, smoke_experiment: Path) -> None:
    for name in (
        "trials.csv",
        "trials.parquet",
        "report.md",
        "report.html",
        "pareto.png",
        "throughput_vs_batch.png",
        "memory_vs_batch.png",
    ):
        assert (report / name).stat().st_size > 0, name
    # The effects' intervals have 2 pairs (--effects-repeats 2): a plot of them only when one
    # of them says something (it excludes 1x: a verdict however wide; tuner.stats' one rule).
    effects = controlled_effects(load_experiment(smoke_experiment).effects)
    assert (report / "effects.png").exists() != says_nothing(effects)
    markdown = (report / "report.md").read_text()
    assert [t for t in SECTIONS if f"## {t}" in markdown] == SECTIONS
    page = (report / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 3  # plots embedded
    assert not re.search(r"src=['\"](?!data:)", page)  # nothing to fetch: self-contained
    assert page.index("id='answer'") < page.index("<details>")  # metadata folded, and last


def test_the_answer_comes_first_with_its_intervals_and_the_gain(
    report: Path, smoke_experiment: Path
) -> None:
    answer = decide(load_experiment(smoke_experiment))
    first = section((report / "report.md").read_text(), 1)
    best = answer.best["images_per_second"]
    assert f"trial `{best['trial_id']}`" in first
    assert f"batch size {int(best['param_batch_size'])}" in first
    assert re.search(r"throughput [\d,]+ \[[\d,]+–[\d,]+\] images/s \(re-measured", first)
    assert re.search(r"validation accuracy 0\.\d+ \[0\.\d+–[01]\.\d+\]", first)
    arms = set(load_experiment(smoke_experiment).effects["arm"])
    if PLAIN in arms:  # the recommendation runs some speed technique: its gain, with interval
        # Bounds may have two digits before the point: 2 repeats on a busy CPU can be that wide.
        assert "Over the plain loop" in first
        assert re.search(r"\d+\.\d\dx \[\d+\.\d\d–\d+\.\d\d\]", first)
    else:
        assert "already is the plain loop" in first
    assert answer.sentence() in first
    assert "python -m tuner train --config" in first


def test_report_front_is_the_decision_on_re_measured_numbers(
    report: Path, smoke_experiment: Path
) -> None:
    experiment = load_experiment(smoke_experiment)
    answer = decide(experiment)
    front = md_table((report / "report.md").read_text(), "Pareto front")
    assert list(front["trial_id"]) == list(answer.front["trial_id"])
    assert set(front["throughput from"]) == {"re-measured"}
    for (_, shown), (_, row) in zip(front.iterrows(), answer.front.iterrows(), strict=True):
        # What the trial ran with, in words: the speed knobs its probes switched on.
        assert shown["speed settings"] == settings_text(speed_settings_of(row["speed_settings"]))
    remeasure = experiment.remeasure
    for _, row in answer.front.iterrows():
        mine = remeasure[remeasure["trial_id"] == row["trial_id"]]["images_per_second"]
        assert row["images_per_second"] == pytest.approx(mine.median())
        assert row["search_images_per_second"] == pytest.approx(
            experiment.trials.set_index("trial_id").loc[row["trial_id"], "images_per_second"]
        )
    [counts] = [c for c in read_claims(report / CLAIMS_FILE) if c.kind == "counts"]
    assert counts.words["counts"] == experiment.trials["kind"].value_counts().to_dict()
    assert set(counts.subjects) <= set(KINDS)  # the trial record's words, none of its own
    assert f"{counts.text}. Only a trial that ran ok" in section(
        (report / "report.md").read_text(), 7
    )


def test_technique_section_is_the_controlled_comparison(
    report: Path, smoke_experiment: Path
) -> None:
    techniques = section((report / "report.md").read_text(), 3)
    effects = controlled_effects(load_experiment(smoke_experiment).effects)
    # 2 rounds (--effects-repeats 2): when no interval says anything, the page shows no table
    # (an interval of 2 pairs that excludes 1x is a verdict); the table the function builds
    # still has every arm, the recommended config first.
    assert ("**No information**" in techniques) == says_nothing(effects)
    table = effects_table(effects)
    nothing = [v for v in table["verdict"].iloc[1:] if "says nothing" in v]
    assert set(nothing) <= {"no verdict: its interval says nothing (2 pairs)"}
    assert (len(nothing) == len(table) - 1) == says_nothing(effects)
    assert table["change from the recommended config"].iloc[0].startswith("(none")
    changes = set(table["change from the recommended config"])
    for knob in ("channels_last", "set_to_none", "fused_adamw"):  # switched the other way
        assert {f"+{knob}", f"-{knob}"} & changes, knob
    assert {"num_workers=1", "num_workers=0"} & changes
    assert "not compared: prefetch: needs CUDA" in techniques


KNOB_COLUMNS = {k.field for k in speed_knobs(cuda=False)} | {"num_workers=1", "num_workers=2"}


def test_speed_section_shows_each_key_and_what_won(report: Path, smoke_experiment: Path) -> None:
    speed = section((report / "report.md").read_text(), 5)
    table = md_table(speed, "Speed probes per key")
    cache = load_experiment(smoke_experiment).probe_cache
    assert len(table) == len(cache) >= 1
    assert {"set_to_none", "channels_last", "fused_adamw", "chosen", "scope"} <= set(table.columns)
    # Shared verdicts (per model, data, device, precision) hold every knob but channels_last;
    # channels_last's own verdict is per norm layer (tuner.speed; probe_verdicts.md).
    assert set(table["scope"]) <= {"shared", "config"} and "shared" in set(table["scope"])
    for _, row in table.iterrows():
        cells = {
            k: str(v) for k, v in row.items() if k in KNOB_COLUMNS and str(v) not in ("", "nan")
        }
        assert ("channels_last" in cells) == (row["scope"] == "config") or not cells
        for cell in cells.values():  # a measured ratio, or not probed for want of budget
            assert re.match(r"\d\.\d\dx", cell) or cell == "not probed (probe budget)", cell
        kept = {name for name, cell in row.items() if "(kept)" in str(cell)}
        assert set(row["chosen"].split(", ")) == (kept or {"plain"})  # exactly what was kept


def test_recommended_config_trains(report: Path) -> None:
    files = sorted(report.glob("recommended_*.json"))
    picks = {"recommended_images_per_second", "recommended_val_accuracy"}
    assert {f.stem for f in files} == picks | {"recommended_time_to_target"}  # the rule's pick
    config = load_config_file(files[0])
    trials = pd.read_csv(report / "trials.csv", dtype={"trial_id": str})
    assert config.lr in set(trials["param_lr"])  # the trial's computed lr, not base_lr
    assert config.torch_threads is not None and config.torch_threads >= 1  # as the trial ran
    command = [
        sys.executable,
        "-m",
        "tuner",
        "train",
        "--config",
        str(files[0]),
        "--json",
        "--steps",
        "2",
        "--warmup-steps",
        "1",
        "--max-eval-batches",
        "1",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok" and result["steps"] == 2


def test_importance_needs_enough_trials(report: Path) -> None:
    importance = section((report / "report.md").read_text(), 8)
    assert "fANOVA importance" not in importance
    assert importance.count("fewer than 20 is noise") == 2


def test_importance_skips_an_integer_parameter_a_trial_did_not_sample() -> None:
    """A conditional ``suggest_int`` is missing (pd.NA, a nullable integer column) in the rows of
    the trials that did not sample it: no parameter of theirs, not a crash."""
    import optuna

    from tuner.experiment import typed_trials
    from tuner.report._importance import param_importances

    dists = {
        "lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
        "gn_groups": optuna.distributions.IntDistribution(1, 32),
    }
    study = optuna.create_study()
    rows = []
    for i in range(24):
        params = {"lr": 10 ** (-4 + i / 8), **({"gn_groups": i + 1} if i % 2 else {})}
        used = {k: dists[k] for k in params}
        study.add_trial(optuna.trial.create_trial(params=params, distributions=used, value=1.0))
        columns = {f"param_{k}": v for k, v in params.items()}
        rows.append({"trial_id": str(i), "status": "ok", "images_per_second": 100.0 + i, **columns})
    trials = typed_trials(pd.DataFrame(rows))
    assert trials["param_gn_groups"].isna().any()
    found = param_importances(study, trials, ["images_per_second"])["images_per_second"]
    assert isinstance(found, dict) and "lr" in found


@pytest.mark.slow  # the nothing-fits search is the long tier's (tests/tiers.py: FAST_CPU)
def test_zero_feasible_experiment_says_why(infeasible_experiment: Path, tmp_path: Path) -> None:
    out = write_report(infeasible_experiment, out_dir=tmp_path / "r")
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) >= 1 and not trials["feasible"].any()
    assert set(trials["kind"]) == {"over budget"}
    first = section((out / "report.md").read_text(), 1)
    assert "No configuration can be recommended" in first
    assert "measured more than the budget of 488.3 KiB" in first
    failures = md_table((out / "report.md").read_text(), "Trials that cannot be picked, and why")
    assert len(failures) == len(trials) and (failures["infeasible_reason"] != "").all()
    assert set(failures["kind"]) == {"over budget"}
    assert not list(out.glob("recommended_*.json"))
    assert (out / "report.html").is_file()


def test_partial_experiment(partial_experiment: Path, tmp_path: Path) -> None:
    out = write_report(partial_experiment, out_dir=tmp_path / "r")
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 3
    assert (trials["kind"] == "incomplete").sum() == 1
    markdown = (out / "report.md").read_text()
    assert "## 2. Pareto front" in markdown and "as measured in the search" in markdown


@pytest.mark.parametrize(
    "experiment",
    [
        "smoke_experiment",
        pytest.param("infeasible_experiment", marks=pytest.mark.slow),  # the long tier's search
        "partial_experiment",
    ],
)
def test_trials_csv_reads_back_as_the_parquet_file(
    experiment: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    out = write_report(request.getfixturevalue(experiment), out_dir=tmp_path / "r")
    from_csv = read_trials_csv(out / "trials.csv")
    from_parquet = pd.read_parquet(out / "trials.parquet")
    assert list(from_csv.columns) == list(from_parquet.columns)
    assert from_csv.dtypes.to_dict() == from_parquet.dtypes.to_dict()
    pd.testing.assert_frame_equal(from_csv, from_parquet)  # and the same values
    assert from_parquet["steps"].dtype == "Int64" and from_parquet["error"].dtype == "string"


def test_cli_report(smoke_experiment: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "cli"
    assert main(["report", str(smoke_experiment), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "report.html")
    assert main(["report", "no-such-experiment", "--storage", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: No experiment") and "\n" not in err


def _runs(arms: dict[str, float], repeats: int, seed: int) -> pd.DataFrame:
    """Synthetic interleaved measurements: each arm's true speed x a shared drift x noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for repeat in range(repeats):
        drift = rng.lognormal(0, 0.1)
        for name, speed in arms.items():
            rows.append(
                {
                    "arm": name,
                    "group": "effects",
                    "repeat": repeat,
                    "status": "ok",
                    "reference": "" if name == REFERENCE else REFERENCE,
                    "baseline": "",
                    "images_per_second": speed * drift * rng.lognormal(0, 0.08),
                    "peak_memory_bytes": 100.0 * 2**20,
                    "memory_kind": "cpu_training_state",
                    "val_accuracy": float("nan"),
                    "fell_back": "",
                }
            )
    return pd.DataFrame(rows)


def test_an_effect_inside_the_noise_reads_no_measurable_effect() -> None:
    runs = _runs({REFERENCE: 1000.0, "+same": 1000.0, "+double": 2000.0, PLAIN: 500.0}, 6, 0)
    table = effects_table(controlled_effects(runs)).set_index("change from the recommended config")
    summary = controlled_effects(runs).set_index("arm")
    reach = (
        summary.at["+same", "throughput_ratio_vs_reference_high"]
        / summary.at["+same", "throughput_ratio_vs_reference"]
    )
    assert table.at["+same", "verdict"] == (
        f"no measurable effect on speed (within noise at +-{reach - 1:.0%})"
    )
    assert table.at["+same", "speed vs recommended"].startswith("tie (")
    assert table.at["+double", "verdict"] == "faster"
    gain = plain_loop_gain(controlled_effects(runs))
    assert gain is not None and not gain["tie"] and gain["low"] < 2.0 < gain["high"]


def test_the_input_pipeline_section_reads_the_recommended_trial(
    report: Path, smoke_experiment: Path
) -> None:
    answer = decide(load_experiment(smoke_experiment))
    row = answer.recommended
    text = section((report / "report.md").read_text(), 4)
    # The search's figure (issue 48: it said the re-measured one), the re-measured one named.
    assert f"trained at {row['search_images_per_second']:,.0f} images/s in the search" in text
    if row["throughput_source"] == "re-measured":
        assert f"(re-measured alone after the search: {row['images_per_second']:,.0f}" in text
    assert f"**{row['bound']}-bound**" in text  # digits in memory: the loader keeps up
    assert f"waited for the next batch {row['data_wait_fraction']:.0%}" in text


# ---- the auditor (issue 39): every claim of the smoke report holds, and each check bites -------


def test_the_auditor_finds_every_claim_of_the_smoke_report_supported(
    smoke_experiment: Path, report: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["report", "--check", str(smoke_experiment), "--out", str(report)]) == 0
    assert "every claim checked holds" in capsys.readouterr().out


def _tamper(check: str, experiment: Path, report: Path) -> None:
    """Make the report (or a client's files) claim one thing its data does not support."""
    markdown, page = report / "report.md", report / "report.html"
    trials = read_trials_csv(report / "trials.csv")
    tid, kind = str(trials["trial_id"].iloc[0]), str(trials["kind"].iloc[0])
    if check == "interval":  # a tie claimed beyond noise
        markdown.write_text(
            markdown.read_text() + "\nIt is faster beyond noise: 1.01x [0.90–1.12].\n"
        )
    elif check == "duration":  # a duration no clock record states
        markdown.write_text(markdown.read_text() + "\nThe search took 9h59m.\n")
    elif check == "kind":
        other = next(k for k in KINDS if k != kind)
        markdown.write_text(
            markdown.read_text().replace(f"| {tid} | {kind} |", f"| {tid} | {other} |")
        )
    elif check == "plot":  # a title promising more trials than it draws
        page.write_text(re.sub(r"Every trial \((\d+)\)", "Every trial (99)", page.read_text()))
    elif check == "tracker":  # one trial's TensorBoard events lost: never told
        for events in experiment.glob(f"t_{tid}_*/events.out.tfevents.*"):
            events.unlink()
    elif check == "target":  # a trial's images to target halved
        reached = trials["images_to_target"].first_valid_index()
        trials.loc[reached, "images_to_target"] = trials.loc[reached, "images_to_target"] / 2
        write_trials_csv(trials, report / "trials.csv")
    elif check == "claim":  # a record's interval moved to exclude no change, its words left
        records = json.loads((report / CLAIMS_FILE).read_text())
        measure = next(m for c in records["claims"] for m in c["measures"])
        measure["low"], measure["high"] = measure["value"] * 0.99, measure["value"] * 1.01
        (report / CLAIMS_FILE).write_text(json.dumps(records))
    elif check == "unmeasured":  # a memory violation where no peak was measured
        trials.loc[0, "peak_memory_bytes"] = pd.NA
        write_trials_csv(trials, report / "trials.csv")


def _claim_kinds(report: Path) -> dict[str, Claim]:
    """One record of each kind the smoke report wrote."""
    return {c.kind: c for c in reversed(read_claims(report / CLAIMS_FILE))}


@pytest.mark.parametrize("how", ["record", "sentence"])
def test_each_claim_kind_of_the_smoke_report_fails_report_check_when_tampered(
    how: str, smoke_experiment: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 48: a claim is a record (claims.json); ``report --check`` fails on a record the
    data does not support and on a sentence that is not the record's, naming the claim."""
    kinds = _claim_kinds(report)
    assert {"picks", "pick_title", "probe"} <= set(kinds) or {"one_pick", "pick_title"} <= set(
        kinds
    ), kinds
    for kind, claim in kinds.items():
        if how == "sentence" and kind in CSV_KINDS:
            continue  # said in trials.csv, not report.md: tests/report/test_speed_claims.py
        copy = tmp_path / f"{how}-{kind}"
        shutil.copytree(report, copy)
        if how == "record":  # its words said of another trial (or key)
            records = json.loads((copy / CLAIMS_FILE).read_text())
            row = next(r for r in records["claims"] if r["kind"] == kind)
            row["subjects"] = ["nothing", *row["subjects"][1:]]
            (copy / CLAIMS_FILE).write_text(json.dumps(records))
            name = f"{kind} {','.join(['nothing', *claim.subjects[1:]])}"
        else:  # report.md says other figures than its record
            markdown = (copy / "report.md").read_text()
            changed = re.sub(r"\d", lambda m: str((int(m[0]) + 1) % 10), claim.text, count=1)
            if changed == claim.text:  # no figure: a word of it changed
                changed = re.sub(r"\w{4,}", lambda m: m[0].upper(), claim.text, count=1)
            tampered = markdown.replace(md_text(claim.text), md_text(changed))
            assert tampered != markdown, kind  # (a value of the user's: said escaped)
            (copy / "report.md").write_text(tampered)
            name = claim.name()
        assert main(["report", "--check", str(smoke_experiment), "--out", str(copy)]) == 1
        lines = capsys.readouterr().out.splitlines()
        said = f"claim: claims.json: {name!r}"[:100]  # a long claim is cut in the line
        assert any(line.startswith(said) for line in lines), (
            kind,
            lines,
        )


def test_a_deleted_record_of_each_kind_fails_report_check_naming_it(
    smoke_experiment: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 48: the report writes the records of the claims it places and the auditor checked
    the records present, so a deleted one went unseen. ``report --check`` makes the report's
    claims again in memory (the same claims, placed by the same sections) and names each one
    claims.json lacks, and each record of a claim the report does not make. One record of each
    kind deleted, and one record added, in one copy (one check: each is its own line)."""
    experiment = load_experiment(smoke_experiment)
    made = placed_claims(experiment, decide(experiment))
    unsaid = next(c for key, c in made.all.items() if key not in made.placed)
    # (the rule picks: pick_why is made, the rule's sentence says why instead)
    copy = tmp_path / "tampered"
    shutil.copytree(report, copy)
    records = json.loads((copy / CLAIMS_FILE).read_text())
    deleted = _claim_kinds(report)
    for kind in deleted:
        records["claims"].remove(next(r for r in records["claims"] if r["kind"] == kind))
    records["claims"].append(as_json(dataclasses.asdict(unsaid)))
    (copy / CLAIMS_FILE).write_text(json.dumps(records))
    assert main(["report", "--check", str(smoke_experiment), "--out", str(copy)]) == 1
    lines = capsys.readouterr().out.splitlines()
    for claim, why in [
        *((c, "has no record of it") for c in deleted.values()),
        (unsaid, "the report does not make it"),
    ]:
        said = f"claim: claims.json: {claim.name()!r}"[:100]  # a long claim is cut in the line
        assert any(line.startswith(said) and why in line for line in lines), (claim.kind, lines)


def test_a_report_alone_whose_clock_records_were_deleted_fails_naming_them(
    report: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 48: a report checked without its experiment whose four clock records were all
    deleted read as one written before them, and got the older (regex) checks, which pass it.
    claims.json says its format (the report writer's): such a report fails, naming each record
    a report of that format always has and each duration no record states. Without a format
    (a report from before it: reports/examples) it is checked as before."""
    copy = tmp_path / "alone"
    shutil.copytree(report, copy)
    assert main(["report", "--check", str(copy)]) == 0
    records = json.loads((copy / CLAIMS_FILE).read_text())
    assert records["format"] == 1
    clock = ("phase_time", "wall_time", "probe_budget", "machine_load")
    records["claims"] = [r for r in records["claims"] if r["kind"] not in clock]
    (copy / CLAIMS_FILE).write_text(json.dumps(records))
    capsys.readouterr()
    assert main(["report", "--check", str(copy)]) == 1
    lines = capsys.readouterr().out.splitlines()
    for kind in ("wall_time", "machine_load"):
        said = f"claim: claims.json: {kind!r}: claims.json says format 1"
        assert any(line.startswith(said) for line in lines), lines
    assert any(line.startswith("duration: report.md: ") for line in lines), lines
    del records["format"]  # what the format is for: read as older, the checks pass it
    (copy / CLAIMS_FILE).write_text(json.dumps(records))
    assert main(["report", "--check", str(copy)]) == 0


def test_a_report_from_before_the_format_lacks_its_newer_records_and_passes(
    smoke_experiment: Path, report: Path, tmp_path: Path
) -> None:
    """A claims.json without a format, checked with its experiment, was written before the
    records of SINCE_FORMAT_1 (how far it got, speed_choice): their absence is its age, not a
    deletion. With the format, each one deleted is named."""
    experiment, copy = tmp_path / "smoke", tmp_path / "report"
    shutil.copytree(smoke_experiment, experiment, ignore=shutil.ignore_patterns("checkpoint_*"))
    shutil.copytree(report, copy)
    records = json.loads((copy / CLAIMS_FILE).read_text())
    newer = [r for r in records["claims"] if r["kind"] in SINCE_FORMAT_1]
    assert {r["kind"] for r in newer} >= {"state", "speed_choice"}
    records["claims"] = [r for r in records["claims"] if r["kind"] not in SINCE_FORMAT_1]
    (copy / CLAIMS_FILE).write_text(json.dumps(records))
    missing = [f for f in audit(experiment, report_dir=copy).findings if "no record" in f.why]
    assert {f.claim.split()[0] for f in missing} >= {"state", "speed_choice"}
    del records["format"]
    (copy / CLAIMS_FILE).write_text(json.dumps(records))
    found = audit(experiment, report_dir=copy).findings
    assert not [f for f in found if "no record" in f.why], [f.why for f in found]


@pytest.mark.parametrize("check", CHECKS)
def test_each_check_of_the_auditor_fails_on_a_report_tampered_that_one_way(
    check: str, smoke_experiment: Path, report: Path, tmp_path: Path
) -> None:
    experiment, copy = tmp_path / "smoke", tmp_path / "report"
    shutil.copytree(smoke_experiment, experiment, ignore=shutil.ignore_patterns("checkpoint_*"))
    shutil.copytree(report, copy)
    _tamper(check, experiment, copy)
    found = audit(experiment, report_dir=copy)
    assert found.findings, check
    assert {f.check for f in found.findings} == {check}, found.lines()


def test_each_stated_duration_is_a_clock_record_and_a_tampered_one_fails(
    smoke_experiment: Path, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 48: every duration the report states is a record carrying the clock it rests on
    (a phase's two ends; the trials' starts and ends less the driver's down time), its words
    rendered from it and checked against the data. A tampered record, a tampered sentence, a
    deleted record, a wall time that is not its clocks', and a duration no record states each
    fail ``report --check`` (the regexes that re-read "took 8s" are gone)."""
    records = {(c.kind, c.subjects): c for c in read_claims(report / CLAIMS_FILE)}
    phase, wall = records["phase_time", ("remeasure",)], records["wall_time", ()]
    markdown = (report / "report.md").read_text()
    assert f"measured {phase.text}" in markdown and f"- {wall.text}\n" in markdown
    assert "took" in phase.text and wall.words["trials"]
    t, (s, clock) = next(iter(wall.words["trials"].items()))  # a trial's time and its clock's
    assert s == pytest.approx(clock, abs=1.5)

    def rewritten(copy: Path, kind: str, **words: float) -> None:  # a record's words, re-said
        rows = json.loads((copy / CLAIMS_FILE).read_text())
        row = next(r for r in rows["claims"] if r["kind"] == kind)
        row["words"] = {**row["words"], **words}
        row["text"] = render(Claim(kind, tuple(row["subjects"]), (), row["words"]))
        (copy / CLAIMS_FILE).write_text(json.dumps(rows))

    def said(copy: Path) -> None:
        took = re.sub(r"took \d+", "took 99", phase.text)
        (copy / "report.md").write_text(markdown.replace(phase.text, took))

    def deleted(copy: Path) -> None:
        rows = json.loads((copy / CLAIMS_FILE).read_text())
        rows["claims"] = [r for r in rows["claims"] if r["kind"] != "wall_time"]
        (copy / CLAIMS_FILE).write_text(json.dumps(rows))

    ended = phase.words["ended_unix_s"] + 60
    cases = {
        "record": (lambda c: rewritten(c, "phase_time", ended_unix_s=ended), ["the data gives"]),
        "sentence": (said, ["report.md does not say it", "duration: report.md: "]),
        "deleted": (deleted, ["has no record of it", "duration: report.md: "]),
        "unlike its clock": (
            lambda c: rewritten(c, "wall_time", trials={t: [s + 600, clock]}),
            [f"'wall_time': trial {t}'s trial_time_s is"],
        ),
    }
    for name, (tamper, why) in cases.items():
        copy = tmp_path / name
        shutil.copytree(report, copy)
        tamper(copy)
        assert main(["report", "--check", str(smoke_experiment), "--out", str(copy)]) == 1
        lines = capsys.readouterr().out.splitlines()
        for words in why:
            assert any(words in line for line in lines), (name, words, lines)
