"""Usage errors of ``tuner search`` that need only arguments and files: one line, exit code 2,
answered before torch and Ray are imported, those that need no sampling of the space before
pandas and Optuna too (a memory budget below the model's training state: before Ray). Each runs
the real command in a subprocess, whose imports it reports at exit."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner.errors import EXIT_TERMINATED
from tuner.experiment import METADATA_FILE, STUDY_FILE
from tuner.experiment.lock import driver_lock

# Runs ``python -m tuner ARGS`` and says at exit which heavy modules it imported.
_HARNESS = """
import atexit, runpy, sys
HEAVY = ("torch", "ray", "pandas", "optuna")
atexit.register(lambda: print("imported:", json.dumps(
    [m for m in HEAVY if m in sys.modules]), file=sys.stderr))
import json
sys.argv = ["tuner", *sys.argv[1:]]
runpy.run_module("tuner", run_name="__main__")
"""


def _tuner(*args: str) -> tuple[int, list[str], list[str]]:
    """Exit code, the error lines, and the heavy modules imported."""
    done = subprocess.run(
        [sys.executable, "-c", _HARNESS, *args], capture_output=True, text=True, timeout=300
    )
    lines = done.stderr.strip().splitlines()
    imported = json.loads(lines[-1].removeprefix("imported: "))
    assert done.stdout == "", done.stdout
    return done.returncode, lines[:-1], imported


def _space_with_string_lr(folder: Path) -> Path:
    path = folder / "string_lr_space.py"
    path.write_text(
        "from tuner.workloads import MICRO_VIT\n"
        "WORKLOADS = {'cpu': {**MICRO_VIT, 'steps': 2}, 'gpu': {**MICRO_VIT, 'steps': 2}}\n"
        "def space(trial, *, cuda):\n"
        "    return {'lr': str(trial.suggest_float('lr', 1e-4, 1e-2, log=True))}\n"
    )
    return path


def _a_file(folder: Path) -> Path:
    """A file where a folder is asked for: the search writes its report there after its trials,
    so the check must come first."""
    path = folder / "a_file"
    path.write_text("not a folder\n")
    return path


def _space_that_raises(folder: Path) -> Path:
    path = folder / "raising_space.py"
    path.write_text(
        "from tuner.workloads import MICRO_VIT\n"
        "WORKLOADS = {'cpu': {**MICRO_VIT, 'steps': 2}, 'gpu': {**MICRO_VIT, 'steps': 2}}\n"
        "def space(trial, *, cuda):\n"
        "    raise RuntimeError('boom')\n"
    )
    return path


def _space_with_a_syntax_error(folder: Path) -> Path:
    path = folder / "broken_space.py"
    path.write_text("def space(trial, *, cuda):\n    return {'lr': (}\n")
    return path


@pytest.mark.parametrize(
    ("case", "first_words", "loaded"),
    [
        ("unknown resume", "error: No experiment 'no_such_name' in ", []),
        ("negative lr", "error: lr=-1.0 must be positive.", []),
        ("space file syntax error", "error: Search space file ", []),
        ("space returns a string lr", "error: Space string_lr_space: lr='", ["optuna"]),
        ("space raises", "error: Space raising_space: space() raised RuntimeError", ["optuna"]),
        ("locked", "error: Experiment 'held' is being driven by process ", []),
        ("storage is a file", "error: --storage ", []),
        ("grid sampler, no GRID", "error: --sampler grid needs a space that declares GRID", []),
        ("reports dir is a file", "error: --reports-dir ", []),
    ],
)
def test_a_usage_error_is_one_line_before_torch_and_ray(
    case: str, first_words: str, loaded: list[str], tmp_path: Path
) -> None:
    """``loaded``: what the check needs (sampling the space needs Optuna); nothing else loads,
    so the answer takes well under a second."""
    storage, file = ["--storage", str(tmp_path)], str(_a_file(tmp_path))
    argv = {
        "unknown resume": ["search", "--resume", "--name", "no_such_name", *storage],
        "negative lr": ["search", "smoke_space", "--set", "lr=-1", *storage],
        "space file syntax error": ["search", str(_space_with_a_syntax_error(tmp_path)), *storage],
        "space returns a string lr": ["search", str(_space_with_string_lr(tmp_path)), *storage],
        "space raises": ["search", str(_space_that_raises(tmp_path)), *storage],
        "locked": ["search", "smoke_space", "--name", "held", *storage],
        "storage is a file": ["search", "smoke_space", "--storage", file],
        "grid sampler, no GRID": ["search", "smoke_space", "--sampler", "grid", *storage],
        "reports dir is a file": ["search", "smoke_space", *storage, "--reports-dir", file],
    }[case]
    with driver_lock(tmp_path / "held", command="tuner search smoke_space (the test)"):
        code, errors, imported = _tuner(*argv)
    assert code == 2 and len(errors) == 1, errors
    assert errors[0].startswith(first_words), errors
    assert imported == loaded
    assert not list(tmp_path.glob("*/" + METADATA_FILE))  # nothing started
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["held"]  # no folder left


def test_a_memory_budget_below_the_model_s_training_state_is_refused_before_ray(
    tmp_path: Path,
) -> None:
    code, errors, imported = _tuner(
        "search", "smoke_space", "--max-memory", "100KB", "--storage", str(tmp_path)
    )
    assert code == 2 and len(errors) == 1, errors
    assert errors[0].startswith("error: --max-memory 97.7 KiB is below the 485.2 KiB"), errors
    assert "torch" in imported and "ray" not in imported  # torch counted; Ray never started
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        (["--set", "lr=0.5"], "error: --set lr=0.5 cannot change on --resume"),
        (["--objective", "accuracy"], "error: --objective accuracy cannot change on --resume"),
    ],
)
def test_a_resume_refuses_what_it_cannot_change_in_one_line(
    flags: list[str], refused: str, smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "smoke"  # the metadata alone: the refusal reads nothing else
    copy.mkdir()
    shutil.copy(smoke_experiment / METADATA_FILE, copy / METADATA_FILE)
    code, errors, imported = _tuner(
        "search", "--resume", "--name", "smoke", "--storage", str(tmp_path), *flags
    )
    assert code == 2 and len(errors) == 1, errors
    assert errors[0].startswith(refused) and "--warm-start smoke" in errors[0], errors
    assert imported == []  # the metadata alone: no pandas, no Optuna


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        (["--num-samples", "2"], r"error: --num-samples 2 is below the 3 trials smoke has started"),
        (
            ["--search-time-budget-s", "1"],
            r"error: --search-time-budget-s 1 is not more than the \d+ s the search smoke has "
            r"run its trials already \(the budget counts every run together\); give more than",
        ),
    ],
)
def test_a_resume_refuses_a_limit_it_has_passed_in_one_line(
    flags: list[str], refused: str, smoke_experiment: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "smoke"  # the metadata and the study: the check reads nothing else
    copy.mkdir()
    for file in (METADATA_FILE, STUDY_FILE):
        shutil.copy(smoke_experiment / file, copy / file)
    code, errors, imported = _tuner(
        "search", "--resume", "--name", "smoke", "--storage", str(tmp_path), *flags
    )
    assert code == 2 and len(errors) == 1, errors
    assert re.match(refused, errors[0]), errors
    assert not {"torch", "ray"} & set(imported)  # the study is read (Optuna), nothing heavier


def _space_that_stalls_its_first_sample(folder: Path) -> Path:
    """A space whose first sample in a process waits (a driver held in its start-up checks:
    the space is sampled there) once it has created ``started``."""
    path = folder / "stalling_space.py"
    path.write_text(
        "import time\n"
        "from pathlib import Path\n"
        "from tuner.workloads import MICRO_VIT\n"
        "WORKLOADS = {'cpu': {**MICRO_VIT, 'steps': 2}, 'gpu': {**MICRO_VIT, 'steps': 2}}\n"
        f"STARTED = Path({str(folder / 'started')!r})\n"
        "def space(trial, *, cuda):\n"
        "    if not STARTED.exists():\n"
        "        STARTED.touch()\n"
        "        time.sleep(120)\n"
        "    return {'lr': trial.suggest_float('lr', 1e-4, 1e-2, log=True)}\n"
    )
    return path


def test_a_driver_in_its_start_up_checks_refuses_a_second_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    """The lock is taken before anything slow: a second driver started while the first one is
    in its checks is refused in one line, before torch and Ray (issue 40). SIGTERM there ends
    the first with exit 143 and one line, its lock file and its new folder gone."""
    argv = ["search", str(_space_that_stalls_its_first_sample(tmp_path)), "--name", "twice"]
    argv += ["--storage", str(tmp_path / "experiments")]
    first = subprocess.Popen(
        [sys.executable, "-c", _HARNESS, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        waited = 0
        while not (tmp_path / "started").exists():  # the first driver samples the space
            assert first.poll() is None and waited < 1200, first.communicate()
            time.sleep(0.1)
            waited += 1
        code, errors, imported = _tuner(*argv)
        assert code == 2 and len(errors) == 1, errors
        assert errors[0].startswith("error: Experiment 'twice' is being driven by process "), errors
        assert imported == []
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=60)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == EXIT_TERMINATED, err.decode()[-2000:]
    said = out.decode().strip().splitlines()
    assert said == ["Stopped before the search 'twice' started: nothing was kept. Start it again "
                    "with the same command."], said  # fmt: skip
    assert not (tmp_path / "experiments" / "twice").exists()  # no lock file, no empty folder


@pytest.mark.parametrize("damaged", [STUDY_FILE, "experiment_state"])
def test_a_resume_of_a_damaged_study_or_ray_state_is_one_line_before_ray(
    damaged: str, smoke_experiment: Path, tmp_path: Path
) -> None:
    """Issue 48: study.db cut to 4 KiB made --resume print a 107-line traceback ("database disk
    image is malformed") and exit 1 after 13 s, after Ray had started."""
    copy = tmp_path / "smoke"
    shutil.copytree(smoke_experiment, copy)
    file = copy / STUDY_FILE if damaged == STUDY_FILE else sorted(copy.glob(f"{damaged}-*"))[-1]
    with file.open("r+b") as handle:
        handle.truncate(4096 if damaged == STUDY_FILE else file.stat().st_size // 2)
    code, errors, imported = _tuner(
        "search", "--resume", "--name", "smoke", "--storage", str(tmp_path)
    )
    assert code == 2 and len(errors) == 1, errors
    assert errors[0].startswith(f"error: {file} is damaged ("), errors
    assert "cannot be resumed" in errors[0] and f"`tuner report {copy}`" in errors[0]
    assert not {"torch", "ray"} & set(imported)  # said before Ray starts
