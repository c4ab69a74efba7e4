"""The GPU suite: its stages, their plans from the registry, a real CPU dry run of them all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.gpu_suite import _cuda_tests, _ladder, _recipe, _search
from bench.gpu_suite import _stages as gpu_suite
from bench.gpu_suite._context import STOPPED, StageContext, device_slug, run_stoppable
from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.techniques import knob

ROOT = Path(__file__).resolve().parents[2]
STAGES = ["cuda-tests", "ladder", "recipe", "norms", "search", "fidelity", "data-parallel"]
# What each stage must leave in its folder (beside stage.json).
EXPECTED = {
    "cuda-tests": ["cuda-tests.md", "junit.xml", "pytest.log", "tests.csv",
                   "prefetch_reserved_per_epoch.csv"],
    "ladder": ["ladder.md", "ladder.json", "ladder.csv", "runs.csv", "sweep.csv", "ladder.png"],
    "recipe": ["recipe.md", "recipe.html", "recipe.csv", "runs.csv", "recipe.png"],
    "norms": ["norms.md", "norms.csv", "runs.csv"],
    "search": ["search.md", "search.json", "search.log", "vit_space-suite/report.md",
               "experiment/study.db"],
    "fidelity": ["fidelity_cpu.md", "fidelity_cpu.json"],
    "data-parallel": ["data-parallel.json", "trial.log"],
}  # fmt: skip
BASE = TrainConfig(epochs=None, steps=2, device="cpu")


def test_the_stages_run_in_the_issue_order_and_each_fits_one_device_call() -> None:
    assert [s.name for s in gpu_suite.STAGES] == STAGES
    assert all(0 < s.estimate_min <= 9 for s in gpu_suite.STAGES)
    assert gpu_suite.stage_names(["all"]) == STAGES
    with pytest.raises(TunerError, match="unknown stage 'lader'"):
        gpu_suite.stage_names(["lader"])


@pytest.mark.parametrize(
    ("name", "slug"),
    [("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"), ("NVIDIA H200", "nvidia-h200")],
)
def test_device_names_become_folder_names(name: str, slug: str) -> None:
    assert device_slug(name) == slug


def test_the_ladder_is_the_registry_ladder_restricted_to_its_rungs() -> None:
    arms, _ = _ladder.plan(BASE, cuda=True, dry_run=False)
    assert [a.name for a in arms] == ["plain", "+amp", "+fused_adamw", "+compile", "+max-autotune"]
    assert arms[1].config.amp == "bf16" and arms[-1].config.compile == "max-autotune"
    assert all(a.reference == b.name for a, b in zip(arms[1:], arms, strict=False))
    dry, skip = _ladder.plan(BASE, cuda=False, dry_run=True)
    assert [a.name for a in dry] == ["plain", "+amp", "+fused_adamw"] and "compile" in skip


def test_the_recipe_adds_each_step_in_order_from_the_registry() -> None:
    arms = _recipe.plan(BASE)
    assert [a.name for a in arms] == ["plain", "+amp", "+set_to_none", "+non_blocking", "+prefetch"]
    assert arms[1].changes == knob("amp").settings("fp16")  # AMP with a GradScaler
    assert arms[3].changes == knob("non_blocking").settings(True)  # from pinned memory
    top = arms[-1].config
    assert (top.amp, top.set_to_none, top.pin_memory, top.non_blocking, top.prefetch) == (
        "fp16", True, True, True, "cuda_stream")  # fmt: skip
    assert not top.channels_last and not top.fused_adamw and top.compile == "off"


def test_a_gpu_run_without_a_gpu_is_one_clear_error(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(TunerError, match="no CUDA device"):
        gpu_suite.run_stage("ladder", root=tmp_path, dry_run=False)


@pytest.mark.slow
def test_the_dry_run_of_every_stage_passes_on_the_cpu(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    # What it costs is measured where load cannot fail a test: bench/tier_bench.py's slowest
    # tests (reports/benchmarks/test_tiers.md), about 1.5 min on 2 quiet cores; the
    # data-parallel stage, added later, takes about a minute more (56-83 s in its dry runs).
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_suite", "all", "--dry-run", "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    for name in STAGES:
        record = json.loads((tmp_path / name / "stage.json").read_text())
        assert record["ok"] and record["dry_run"], record
        for file in EXPECTED[name]:
            assert (tmp_path / name / file).is_file(), f"{name}/{file} missing"


def test_the_torch_api_check_names_what_this_torch_lacks(
    tmp_path: Path,
) -> None:
    # bench/gpu_rehearse.sh runs it under the GPU image's older torch; here, the installed one.
    (tmp_path / "uses.py").write_text(
        "import torch\nfrom torch.amp import GradScaler\n"
        "torch.cuda.Stream\ntorch.compiler.not_an_api_yet()\n"
    )
    check = [sys.executable, str(ROOT / "bench" / "torch_api_check.py")]
    made_up = subprocess.run([*check, str(tmp_path)], capture_output=True, text=True, check=False)
    assert made_up.returncode == 1, made_up.stdout + made_up.stderr
    lines = made_up.stdout.splitlines()
    missing = [line.split()[1] for line in lines if line.startswith("  missing ")]
    assert missing == ["torch.compiler.not_an_api_yet"], made_up.stdout


@pytest.mark.slow  # the whole project's sources: 10 CPU-seconds; bench/gpu_rehearse.sh runs it too
def test_the_torch_api_check_passes_the_project() -> None:
    check = [sys.executable, str(ROOT / "bench" / "torch_api_check.py")]
    project = subprocess.run(
        [*check, *(str(ROOT / d) for d in ("tuner", "bench", "tests"))],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert project.returncode == 0, project.stdout + project.stderr


def test_the_search_gets_the_time_the_stage_has_left_and_the_ladder_needs_two_repeats(
    tmp_path: Path,
) -> None:
    def budget(limit_s: float) -> list[str]:
        ctx = StageContext("search", tmp_path, dry_run=False, cuda=True, time_limit_s=limit_s)
        return _search._time_budget(ctx, 300)

    assert budget(620) == ["--search-time-budget-s", "300"]  # room for all of it
    # 300 s kept: Ray's start and the report (50 s), re-measuring 2 (120 s), 9 seed runs of
    # the trials' 10 s (90 s), Ctrl-C's grace (40 s)
    assert 98 <= int(budget(400)[1]) <= 100
    assert budget(100) == ["--search-time-budget-s", "60"]  # never below a minute
    row = {"arm": "plain", "images_per_second": 100.0}
    report = {"rows": [row], "best_mfu": 0.2, "best_rung": "plain", "mfu_reference": "bf16"}
    assert not _ladder._result({**report, "repeats": 1}).ok  # one repeat: no interval
    assert _ladder._result({**report, "repeats": 2}).ok
    said = _ladder._result({**report, "repeats": 2, "unbuilt": ["+max-autotune"]}).summary
    assert said.startswith("1/1 rungs measured (+max-autotune left out: no time to build)")


def test_fidelity_compares_the_engines_overall_mean_with_the_minimal_loops() -> None:
    from tuner.compare.fidelity import rate

    engine = {"images_per_second": 120.0, "images_per_second_mean": 100.0}  # median window, mean
    assert rate(engine) == 100.0
    assert rate({"images_per_second": 90.0}) == 90.0  # the minimal loop reports only its mean


def test_a_pytest_past_its_time_is_interrupted_and_reports_what_ran(tmp_path: Path) -> None:
    from bench.gpu_suite._cuda_tests import _counts

    (tmp_path / "test_slow.py").write_text(
        "import time\n\ndef test_quick():\n    pass\n\ndef test_hangs():\n    time.sleep(600)\n"
    )
    junit = tmp_path / "junit.xml"
    command = [sys.executable, "-m", "pytest", str(tmp_path), "-v", "-p", "no:cacheprovider",
               f"--junitxml={junit}"]  # fmt: skip
    started = time.perf_counter()
    # 20 s: pytest's own start (its plugins' imports) took over 5 s on a loaded machine.
    assert run_stoppable(command, tmp_path / "pytest.log", timeout=20) == STOPPED
    assert time.perf_counter() - started < 60  # interrupted, not waited for
    log = (tmp_path / "pytest.log").read_text()
    assert "test_quick PASSED" in log and "[stopped by the stage after 20 s]" in log
    assert _counts(junit)["tests"] >= 1  # pytest wrote what ran before the interrupt
    quick = [sys.executable, "-c", "raise SystemExit(3)"]
    assert run_stoppable(quick, tmp_path / "quick.log", timeout=30) == 3  # its own exit code


def test_the_suite_finds_the_engine_tests_beside_it_or_where_told(tmp_path: Path) -> None:
    assert _cuda_tests.engine_tests(None) == ROOT / "tests" / "engine"
    assert _cuda_tests.engine_tests(tmp_path) == tmp_path
    with pytest.raises(TunerError, match="--tests PATH"):
        _cuda_tests.engine_tests(tmp_path / "missing")


def test_the_suite_is_not_in_the_installed_package_and_calls_current_flags() -> None:
    assert not (ROOT / "tuner" / "gpu_suite").exists()
    import argparse

    from tuner.commands import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a.choices, dict))
    search = commands.choices["search"]
    known = {s for a in search._actions if a.help != argparse.SUPPRESS for s in a.option_strings}
    for settings in (_search._GPU, _search._DRY):
        flags = [f for f in settings["flags"] if f.startswith("--")]
        flags += ["--num-samples", "--remeasure-top", "--search-time-budget-s"]  # from options
        assert set(flags) <= known, set(flags) - known


def test_a_search_whose_one_trial_was_cut_is_incomplete_and_fails_the_stage(
    tmp_path: Path,
) -> None:
    """The H100 run (reports/examples/gpu-nvidia-h100-80gb-hbm3/search-3-stage.md): one trial,
    cut by the search's time budget before it reported, was told as "0 within the budget
    19.0 GiB, 1 not", and the stage passed with no ok trial."""
    import pandas as pd

    ctx = StageContext("search", tmp_path, dry_run=False, cuda=True, time_limit_s=480)
    (tmp_path / _search.NAME).mkdir()
    (tmp_path / _search.NAME / "report.md").write_text("# report\n")
    budget = (20434649088, "1.5x the workload's peak")
    cut = pd.DataFrame(
        {"trial_id": ["b47105e7"], "kind": ["incomplete"], "feasible": [False],
         "status": [None], "peak_memory_bytes": [float("nan")]}
    )  # fmt: skip
    result = _search._finish(ctx, ["tuner", "search"], 1, budget, cut)
    assert not result.ok, result.summary
    assert "1 incomplete" in result.summary and "not" not in result.summary.split(";")[0]
    assert json.loads((tmp_path / "search.json").read_text())["kinds"] == {"incomplete": 1}
    # Four finished, one of them ok and one over the budget: the plan's search passes.
    kinds = ["ok", "over budget", "stopped early", "errored", "incomplete"]
    done = pd.DataFrame({"trial_id": list("abcde"), "kind": kinds})
    ctx = StageContext("search", tmp_path, False, True, 480, {"min_trials": 4})
    result = _search._finish(ctx, ["tuner", "search"], 0, budget, done)
    assert result.ok, result.summary
    assert "1 over the budget 19.0 GiB" in result.summary and "4 finished" in result.summary
    ctx = StageContext("search", tmp_path, False, True, 480, {"min_trials": 5})
    assert "fewer than 5 finished" in _search._finish(ctx, [], 0, budget, done).summary


def test_each_plan_command_fits_nine_minutes_and_passes_its_settings_on(tmp_path: Path) -> None:
    """The GPU plan (bench/README.md): two commands of at most 9 minutes, by value."""
    assert [[s.stage for s in gpu_suite.PLANS[n]] for n in (1, 2)] == [
        ["cuda-tests", "ladder"], ["data-parallel", "search", "recipe", "norms"]]  # fmt: skip
    for steps in gpu_suite.PLANS.values():
        total = sum(s.time_limit_s for s in steps) + gpu_suite.PLAN_OVERHEAD_S
        assert total <= gpu_suite.PLAN_COMMAND_S <= 9 * 60
    with pytest.raises(TunerError, match="unknown plan 3"):
        gpu_suite.plan_steps(3)
    search = next(s for s in gpu_suite.PLANS[2] if s.stage == "search")
    ctx = StageContext("search", tmp_path, False, True, search.time_limit_s, search.options)
    assert _search.settings(ctx)["trials"] == gpu_suite.SEARCH_TRIALS
    budget = int(_search._time_budget(ctx, gpu_suite.SEARCH_BUDGET_S, 1)[1])
    assert 60 <= budget <= gpu_suite.SEARCH_BUDGET_S
    (tmp_path / "results" / "ladder").mkdir(parents=True)
    (tmp_path / "results" / "ladder" / "ladder.md").write_text("# ladder\n")
    archive = tmp_path / "plan1.tgz"
    assert 0 < gpu_suite.write_archive(tmp_path / "results", archive) <= 16 * 2**20
    import tarfile

    with tarfile.open(archive) as tar:
        assert "results/ladder/ladder.md" in tar.getnames()
