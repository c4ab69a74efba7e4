"""The examples run end to end: the space file with its own nn.Module (BatchNorm2d) and Dataset
class searched by the CLI, and the notebook-style script through the Python API, each with
data-parallel trials of 2 gloo ranks. The fast siblings (the example's model and
data trained in-process, a few steps) are in tests/engine/test_engine_usercode.py and
tests/test_api.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from search_cli import search_command

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytestmark = [pytest.mark.slow, pytest.mark.machine, pytest.mark.timeout(900)]

QUICK = ["--remeasure-top", "0", "--effects-repeats", "0", "--speed-repeats", "1"]


def _finals(experiment: Path) -> list[dict]:
    finals = []
    for result in sorted(experiment.glob("*/result.json")):
        lines = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        finals.append(lines[-1])
    return finals


def test_the_example_space_is_searched_with_ddp_trials(tmp_path: Path) -> None:
    command = search_command(
        str(EXAMPLES / "own_space.py"), "--num-samples", "2", "--world-size", "2",
        "--cpus-per-trial", "1", "--no-report", *QUICK, name="own", storage=tmp_path,
    )  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=800, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finals = _finals(tmp_path / "own")
    assert len(finals) == 2
    for final in finals:
        assert final["status"] == "ok" and final["final"] is True and final["world_size"] == 2
        assert final["config"]["model"].endswith("examples/own_space.py:build_model")
        assert final["val_accuracy"] > 0.25  # chance is 0.25 on its 4 classes


def test_the_notebook_script_searches_through_the_api(tmp_path: Path) -> None:
    command = [
        sys.executable, str(EXAMPLES / "notebook_search.py"), "--smoke-test",
        "--world-size", "2", "--name", "nb", "--storage", str(tmp_path / "exp"),
        "--reports-dir", str(tmp_path / "reports"),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=800, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "answer: " in done.stdout and "recommended: {" in done.stdout
    finals = _finals(tmp_path / "exp" / "nb")
    assert len(finals) == 2
    assert all(f["status"] == "ok" and f["world_size"] == 2 for f in finals)
    assert {f["config"]["model"] for f in finals} == {"@MySpace:build_model"}
    assert (tmp_path / "reports" / "nb" / "trials.csv").is_file()
