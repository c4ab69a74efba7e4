"""Bad input to ``tuner report``: one line naming the problem and its fix, the usage exit code
(2), no traceback, before anything is read or written. Each runs the real command in this
process on an experiment folder made by hand (no search)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.commands import main
from tuner.errors import EXIT_USAGE
from tuner.experiment import METADATA_FILE


def _experiment(folder: Path) -> Path:
    """An experiment folder with its metadata alone: a search that ran no trial."""
    folder.mkdir()
    (folder / METADATA_FILE).write_text(json.dumps({"name": folder.name}))
    return folder


def _a_file(folder: Path) -> Path:
    path = folder / "a_file"
    path.write_text("not a folder\n")
    return path


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr; nothing on stdout."""
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, (out, err)
    return lines[0]


@pytest.mark.parametrize("under", [False, True], ids=["a file", "under a file"])
def test_report_out_that_cannot_be_a_folder_is_one_line(
    under: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment, file = _experiment(tmp_path / "e"), _a_file(tmp_path)
    out = file / "report" if under else file
    assert main(["report", str(experiment), "--out", str(out)]) == EXIT_USAGE
    line = _error(capsys)
    assert line == (
        f"error: --out {out}: {file} is a file, not a folder; give a folder (it is created if "
        "missing), or move the file."
    )
