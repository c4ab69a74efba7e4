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


@pytest.mark.parametrize(
    ("console", "said"),
    [
        ("missing", "does not exist"),
        ("binary", "is not text (UTF-8)"),
        ("a folder", "cannot be read (Is a directory)"),
    ],
)
def test_check_console_that_cannot_be_read_is_one_line(
    console: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment = _experiment(tmp_path / "e")
    assert main(["report", str(experiment), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    file = {"missing": tmp_path / "none.txt", "binary": tmp_path / "kept.txt", "a folder": tmp_path}
    (tmp_path / "kept.txt").write_bytes(bytes(range(128, 256)))
    argv = ["report", "--check", str(experiment), "--out", str(tmp_path / "report")]
    assert main([*argv, "--console", str(file[console])]) == EXIT_USAGE
    line = _error(capsys)
    assert line.startswith(f"error: --console {file[console]} {said}; give the search's console")


def test_console_without_check_is_refused_before_the_report_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--console is read by --check alone: taken silently, the user believes it was checked."""
    experiment, kept = _experiment(tmp_path / "e"), tmp_path / "kept.txt"
    kept.write_text("Search finished: 0 trials\n")
    argv = ["report", str(experiment), "--out", str(tmp_path / "report"), "--console", str(kept)]
    assert main(argv) == EXIT_USAGE
    assert _error(capsys).startswith(f"error: --console {kept} is read by --check alone; add")
    assert not (tmp_path / "report").exists()


def test_check_of_a_report_folder_that_is_not_there_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An --out with no report: checking the data alone would say every claim holds, of a
    report never read."""
    experiment, out = _experiment(tmp_path / "e"), tmp_path / "no_report"
    for made in (False, True):  # no folder, then a folder with no report.md in it
        if made:
            out.mkdir()
        assert main(["report", "--check", str(experiment), "--out", str(out)]) == EXIT_USAGE
        assert _error(capsys) == (
            f"error: --out {out}: no report there to check (no report.md); give the folder the "
            f"report was written to, or write one first (tuner report {experiment} --out {out})."
        )


def test_check_says_what_it_could_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged file is left out of the check: 'every claim checked holds' alone would hide it."""
    experiment = _experiment(tmp_path / "e")
    (experiment / "remeasure.csv").write_bytes(b"\x8d\xff not a table")
    argv = ["report", str(experiment), "--out", str(tmp_path / "report")]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["report", "--check", *argv[1:]]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("every claim checked holds")
    assert err.splitlines()[:2] == [
        f"warning: could not read everything in {experiment.resolve()}:",
        "  remeasure.csv could not be read (UnicodeDecodeError: 'utf-8' codec can't decode byte "
        "0x8d in position 0: invalid start byte); the report goes without it (restore the file, "
        "or re-run the search).",
    ]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["ablate", "--reports-dir", "{file}"], "error: --reports-dir {file}: {file} is a file,"),
        (["ablate", "--name", "a/b"], "error: --name 'a/b' must be letters, digits,"),
        (["bench", "--out", "{file}"], "error: --out {file}: {file} is a file, not a folder;"),
        (["bench", "--verify", "--out", "{file}"], "error: --out {file}: {file} is a file,"),
        (["bench", "--threads", "0"], "error: --threads 0 must be 1 or more"),
    ],
)
def test_what_would_fail_a_measurement_after_it_ran_is_refused_before(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ablation or a bench takes minutes: a report folder that cannot be written (it
    failed at the end, every run lost) or a thread count torch refuses is found first."""
    file = str(_a_file(tmp_path))
    assert main([arg.format(file=file) for arg in argv]) == EXIT_USAGE
    assert _error(capsys).startswith(said.format(file=file))


def test_check_without_a_report_says_it_checked_the_data_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no reports/e here
    experiment = _experiment(tmp_path / "e")
    assert main(["report", "--check", str(experiment)]) == 0
    out, err = capsys.readouterr()
    assert err == (
        f"no report at {Path('reports') / 'e'}: only the experiment's trials and its trackers' "
        "files were checked (--out names the report's folder)\n"
    )
    assert out.startswith("every claim checked holds")
