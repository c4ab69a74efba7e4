"""``tuner bench --verify``: the engine vs an independent minimal loop, in fresh processes."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from tuner.commands import main
from tuner.compare import fidelity, minimal_loop
from tuner.errors import TunerError
from tuner.report.bench import write_verify
from tuner.stats import Change
from tuner.workloads import MICRO_BENCH

TINY_WORKLOAD = {**MICRO_BENCH, "device": "cpu"}


def test_the_minimal_loop_imports_nothing_from_tuner() -> None:
    tree = ast.parse(Path(minimal_loop.__file__).read_text())
    imported = {
        n.name for node in ast.walk(tree) if isinstance(node, ast.Import) for n in node.names
    }
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.split(".")[0] == "tuner" for name in imported), imported


def test_the_engine_runs_what_the_minimal_loop_runs() -> None:
    config = fidelity.verify_config(cuda=False)
    assert config.amp == "off" and config.set_to_none  # fp32; zero_grad() frees the grads
    assert not (config.channels_last or config.fused_adamw or config.compile != "off")
    assert fidelity.verify_config(cuda=True, workload={"device": "cpu"}).amp == "bf16"
    with pytest.raises(TunerError, match="fp32 \\(off\\) or bf16"):
        fidelity.verify_config(cuda=True, amp="fp16")


@pytest.mark.parametrize(
    ("value", "low", "high", "says"),
    [
        (0.98, 0.95, 1.02, "within the noise"),
        (0.90, 0.86, 0.94, "10.0% slower than the minimal loop, outside the noise"),
        (1.05, 1.01, 1.09, "5.0% faster"),
        (0.69, 0.25, 1.92, "too wide to say anything"),  # never "within the noise"
        (3.0, 1.5, 6.0, "faster than the minimal loop, outside the noise"),  # wide, excludes 1x
        (1.0, math.nan, math.nan, "one pair: no interval"),
        (math.nan, math.nan, math.nan, "No pair of runs finished"),
    ],
)
def test_the_verdict_says_whether_the_engine_is_within_noise(
    value: float, low: float, high: float, says: str
) -> None:
    assert says in fidelity.verdict(Change(value, low, high, 5, 1.0))


def test_one_pair_is_too_few(capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", "--verify", "--repeats", "1"]) == 2
    assert "at least 2 pairs" in capsys.readouterr().err


def test_the_time_limit_bounds_every_process_and_every_pair() -> None:
    unlimited, short = fidelity._Deadline(None), fidelity._Deadline(30.0)
    assert unlimited.timeout() == fidelity._TIMEOUT_S and unlimited.fits(10_000)
    assert 29 < short.timeout() <= 30  # no process outlives the limit
    assert short.fits(20) and not short.fits(26)  # a pair needs its time and a fifth to spare
    assert not fidelity._Deadline(15.0).fits(0)  # nor is one started on the last few seconds
    assert fidelity._Deadline(5.0).timeout() is None  # too little left to start a process


def test_a_spent_time_limit_starts_no_process_and_says_so(tmp_path: Path) -> None:
    config = fidelity.verify_config(cuda=False, workload=TINY_WORKLOAD)
    report = fidelity.run_verify(config, repeats=3, time_limit_s=0, log=print)
    write_verify(report, tmp_path)
    assert report["runs"] == [] and report["repeats"] == 0 and report["repeats_planned"] == 3
    text = (tmp_path / "fidelity_cpu.md").read_text()
    assert "Only 0 of the 3 planned pairs ran" in text and "No pair of runs finished" in text


@pytest.mark.slow
def test_verify_measures_both_loops_in_fresh_processes(tmp_path: Path) -> None:
    argv = ["bench", "--verify", "--repeats", "2", "--steps", "4", "--warmup-steps", "1",
            "--threads", "1", "--out", str(tmp_path),
            *(f"--set={k}={json.dumps(v)}" for k, v in TINY_WORKLOAD.items())]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((tmp_path / "fidelity_cpu.json").read_text())
    assert [(r["repeat"], r["kind"]) for r in report["runs"]] == [
        (0, "engine"), (0, "minimal"), (1, "engine"), (1, "minimal")]  # fmt: skip
    assert all(r["status"] == "ok" and r["images_per_second"] > 0 for r in report["runs"])
    ratio = report["ratio_engine_to_minimal"]
    assert ratio["n"] == 2 and ratio["value"] > 0 and ratio["low"] <= ratio["value"]
    assert report["verdict"] in (tmp_path / "fidelity_cpu.md").read_text()
    assert report["threads_per_process"] == 1
