"""A trial Tune retries, said and kept (tuner.tune.retries), and the running line of a trial that
went silent (tuner.tune.progress): from the files Tune writes at a retry, without a search."""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.fs
import pytest
from ray import cloudpickle
from ray.exceptions import RayTaskError

from tuner import record
from tuner.tune.progress import ProgressPrinter
from tuner.tune.rank_pool import RankFailed
from tuner.tune.retries import RetryRecord, attempt_text, failure_line, read_retries

STALLED = "rank 1 stalled (node 10.0.0.5, pid 4121) at step 360: no heartbeat for 20 s"


def _failed_trial(folder: Path, error: BaseException | None, text: str = "") -> Any:
    """A trial as Tune leaves it at a retry: its error files in the driver's folder."""
    pickled = folder / "error.pkl"
    if error is not None:
        pickled.write_bytes(cloudpickle.dumps(error))
    (folder / "error.txt").write_text(text or "Failure # 1 (occurred at now)\n")
    return SimpleNamespace(
        trial_id="abc",
        num_failures=1,
        max_failures=3,
        pickled_error_file=str(pickled),
        error_file=str(folder / "error.txt"),
        storage=SimpleNamespace(storage_filesystem=pyarrow.fs.LocalFileSystem()),
        path=str(folder),
        config={},
        last_result={},
    )


def test_the_failure_is_the_trainables_own_exception(tmp_path: Path) -> None:
    wrapped = RayTaskError("train", "Traceback ...", RankFailed(STALLED))
    trial = _failed_trial(tmp_path, wrapped)
    assert failure_line(trial) == f"RankFailed: {STALLED}"
    assert attempt_text(trial) == "attempt 2 of 4"
    assert attempt_text(SimpleNamespace(num_failures=2, max_failures=-1)) == "attempt 3"


def test_without_a_pickled_error_the_texts_last_line(tmp_path: Path) -> None:
    text = "Failure # 1 (occurred at now)\nTraceback ...\nray.exceptions.ActorDiedError: gone\n"
    trial = _failed_trial(tmp_path, None, text)
    assert failure_line(trial) == "ray.exceptions.ActorDiedError: gone"


def test_a_retry_is_one_console_line_and_a_file_the_retry_reports(tmp_path: Path) -> None:
    trial = _failed_trial(tmp_path, RayTaskError("train", "tb", RankFailed(STALLED)))
    out = io.StringIO()
    printer = ProgressPrinter(total=2, stream=out)
    printer.on_trial_recover(0, [], trial)
    RetryRecord().on_trial_recover(0, [], trial)
    (line,) = out.getvalue().splitlines()
    assert f"retry  abc  attempt 2 of 4 from its checkpoint: RankFailed: {STALLED}" in line
    assert read_retries(str(tmp_path)) == (1, f"RankFailed: {STALLED}")
    assert read_retries(str(tmp_path / "none")) == (0, "")
    report = record.trial_report(
        {}, max_memory_bytes=None, phase="train", node="n", final=False, counters={},
        retries=1, last_error=f"RankFailed: {STALLED}",
    )  # fmt: skip
    assert report[record.RETRIES] == 1 and "stalled" in report[record.LAST_ERROR]


def test_a_retry_is_kept_when_the_first_attempt_left_no_folder(tmp_path: Path) -> None:
    # An H200 search's actor died one second after its trial started: no folder yet.
    trial = _failed_trial(tmp_path, RayTaskError("train", "tb", RuntimeError("died")))
    trial.path = str(tmp_path / "t_abc_1" / "not-yet")
    RetryRecord().on_trial_recover(0, [], trial)
    assert read_retries(trial.path) == (1, "RuntimeError: died")


def test_a_silent_trial_claims_no_live_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    printer = ProgressPrinter(total=1, stream=io.StringIO())
    trial = SimpleNamespace(trial_id="abc")
    now = time.time()
    for at, step in ((now - 10, 100), (now, 200)):  # reports 10 s apart
        monkeypatch.setattr(time, "time", lambda at=at: at)
        printer.on_trial_result(0, [], trial, {record.STEP: step, "images_per_second": 900.0})
    assert printer._running_text() == "abc step 200 900.0 img/s"
    monkeypatch.setattr(time, "time", lambda: now + 45)
    assert printer._running_text() == "abc step 200, no report for 45s"
    printer.doing = {"abc": ("waiting on rank 1 (node n, pid 7): silent for 12 s", now + 40)}
    assert (
        printer._running_text()
        == "abc step 200, waiting on rank 1 (node n, pid 7): silent for 12 s"
    )
