"""The report on real experiments made by ``tuner search`` (see conftest)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tuner.cli import main
from tuner.config import load_config_file
from tuner.report import write_report
from tuner.report._tables import fmt

SECTIONS = [
    "1. Run summary",
    "2. Pareto front",
    "3. Recommended configuration",
    "4. Parameter importance",
    "5. Technique effects",
    "6. Plots",
]


def md_table(markdown: str, caption: str) -> pd.DataFrame:
    """The pipe table that follows ``*caption*`` in report.md, as strings."""
    block = markdown.split(f"*{caption}*", 1)[1].strip().split("\n\n", 1)[0]
    lines = [line.strip().strip("|").split(" | ") for line in block.splitlines()]
    header, rows = [c.strip() for c in lines[0]], [[c.strip() for c in r] for r in lines[2:]]
    return pd.DataFrame(rows, columns=header)


@pytest.fixture(scope="module")
def report(smoke_experiment: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(smoke_experiment, out_dir=tmp_path_factory.mktemp("report"))


def test_every_file_and_section(report: Path) -> None:
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
    markdown = (report / "report.md").read_text()
    for title in SECTIONS:
        assert f"## {title}" in markdown
    page = (report / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 3  # plots embedded
    assert not re.search(r"src=['\"](?!data:)", page)  # nothing to fetch: self-contained


def test_trials_table_has_the_documented_columns(report: Path, smoke_experiment: Path) -> None:
    trials = pd.read_csv(report / "trials.csv")
    for column in (
        "trial_id",
        "status",
        "feasible",
        "images_per_second",
        "val_accuracy",
        "peak_memory_bytes",
        "node",
        "wall_time_s",
    ):
        assert column in trials
    for param in ("norm", "batch_size", "base_lr", "set_to_none", "lr"):
        assert f"param_{param}" in trials
    assert len(trials) == len(list(smoke_experiment.glob("*/params.json"))) == 3
    parquet = pd.read_parquet(report / "trials.parquet")
    pd.testing.assert_series_equal(parquet["images_per_second"], trials["images_per_second"])
    # lr is derived from the searched base_lr by the space: lr = base_lr * batch / 256.
    expected = trials["param_base_lr"] * trials["param_batch_size"] / 256
    assert (trials["param_lr"] - expected).abs().max() < 1e-12


def test_report_numbers_equal_trials_csv(report: Path) -> None:
    trials = pd.read_csv(report / "trials.csv", dtype={"trial_id": str}).set_index("trial_id")
    markdown = (report / "report.md").read_text()
    front = md_table(markdown, "Pareto front (feasible)")
    assert len(front) >= 1
    for _, row in front.iterrows():
        source = trials.loc[row["trial_id"]]
        assert bool(source["feasible"])
        for column in ("images_per_second", "val_accuracy", "peak_memory_bytes"):
            assert row[column] == fmt(source[column].item()), column
    # Non-dominated: no feasible trial is at least as good on both and better on one.
    feasible = trials[trials["feasible"]]
    for trial_id in front["trial_id"]:
        ips, acc = trials.loc[trial_id, ["images_per_second", "val_accuracy"]]
        better = (feasible["images_per_second"] >= ips) & (feasible["val_accuracy"] >= acc)
        strictly = (feasible["images_per_second"] > ips) | (feasible["val_accuracy"] > acc)
        assert not (better & strictly).any()
    counts = md_table(markdown, "Trials by status").set_index("status")
    assert counts["trials"].astype(int).to_dict() == trials["status"].value_counts().to_dict()


def test_recommended_config_trains(report: Path, tmp_path: Path) -> None:
    files = sorted(report.glob("recommended_*.json"))
    assert {f.stem for f in files} == {"recommended_images_per_second", "recommended_val_accuracy"}
    config = load_config_file(files[0])
    trials = pd.read_csv(report / "trials.csv", dtype={"trial_id": str})
    assert config.lr in set(trials["param_lr"])  # the trial's computed lr, not base_lr
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


def test_importance_and_effects_sections(report: Path) -> None:
    markdown = (report / "report.md").read_text()
    importance = markdown.split("## 4.", 1)[1].split("## 5.", 1)[0]
    # Three trials: either fANOVA importances, or one line saying why there are none.
    assert "fANOVA importance" in importance or "too few finished trials" in importance
    effects = markdown.split("## 5.", 1)[1].split("## 6.", 1)[0]
    assert "Observational" in effects


def test_zero_feasible_experiment(infeasible_experiment: Path, tmp_path: Path) -> None:
    out = write_report(infeasible_experiment, out_dir=tmp_path / "r")
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) >= 1 and not trials["feasible"].any()
    markdown = (out / "report.md").read_text()
    assert "No feasible trial" in markdown
    failures = md_table(markdown, "Trials that are not feasible, and why")
    assert len(failures) == len(trials) and (failures["infeasible_reason"] != "").all()
    assert not list(out.glob("recommended_*.json"))
    assert (out / "report.html").is_file()


def test_partial_experiment(partial_experiment: Path, tmp_path: Path) -> None:
    out = write_report(partial_experiment, out_dir=tmp_path / "r")
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 3
    assert (trials["status"] == "incomplete").sum() == 1
    assert "## 2. Pareto front" in (out / "report.md").read_text()


def test_cli_report(smoke_experiment: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "cli"
    assert main(["report", str(smoke_experiment), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "report.html")
    assert main(["report", "no-such-experiment", "--storage", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: No experiment") and "\n" not in err
