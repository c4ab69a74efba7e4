"""The command line: flags generated from TrainConfig, one-line errors, the --json contract."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tuner.commands import build_parser, main
from tuner.commands.train import config_from_args
from tuner.config import TrainConfig, field_help

TINY_FLAGS = [
    "--model-kwargs",
    '{"patch_size": 2, "embed_dim": 32, "depth": 1, "num_heads": 2}',
    "--img-size",
    "32",
    "--batch-size",
    "32",
    "--epochs",
    "none",
    "--steps",
    "3",
    "--warmup-steps",
    "1",
    "--max-eval-batches",
    "2",
    "--device",
    "cpu",
]
REQUIRED_KEYS = {
    "status",
    "images_per_second",
    "data_wait_fraction",
    "peak_memory_bytes",
    "memory_kind",
    "val_accuracy",
    "val_loss",
    "device",
    "config",
}


def _parse(*argv: str):
    return build_parser().parse_args(["train", *argv])


def test_every_config_field_is_a_documented_flag() -> None:
    text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    for f in dataclasses.fields(TrainConfig):
        assert "--" + f.name.replace("_", "-") in text
        assert field_help(f.name) and f.metadata["help"] == field_help(f.name)


def test_flags_override_the_config_file_and_unset_flags_do_not(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"lr": 0.01, "amp": "bf16", "steps": 9}))
    config = config_from_args(_parse("--config", str(path), "--steps", "4", "--no-drop-last"))
    assert (config.lr, config.amp, config.steps, config.drop_last) == (0.01, "bf16", 4, False)
    assert config_from_args(_parse()) == TrainConfig()


def test_typed_flags_parse_booleans_optionals_and_json() -> None:
    config = config_from_args(
        _parse("--channels-last", "--grad-clip-norm", "none", "--model-kwargs", '{"depth": 1}')
    )
    assert config.channels_last and config.grad_clip_norm is None
    assert dict(config.model_kwargs) == {"depth": 1}


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--no-such-flag"],
        ["train", "--amp", "fp8"],
        ["train", "--batch-size", "many"],
        ["train", "--model-kwargs", "{oops"],
    ],
)
def test_bad_flags_exit_2_with_an_error_line(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("tuner")


def test_impossible_setting_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"batchsize": 8}))
    assert main(["train", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: Unknown run setting(s) batchsize")
    assert main(["train", "--norm", "group", "--gn-groups", "5", *TINY_FLAGS]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gn_groups=5 does not divide" in err[0]


def test_json_result_is_the_last_stdout_line(capfd: pytest.CaptureFixture[str]) -> None:
    # In this process, its file descriptors captured (what a library writes to fd 1 too): a
    # process of its own would import torch and timm again for 13 CPU-seconds.
    code = main(["train", *TINY_FLAGS, "--amp", "bf16", "--json"])
    out, err = capfd.readouterr()
    assert code == 0, err[-2000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result.keys() >= REQUIRED_KEYS
    assert result["status"] == "ok" and result["config"]["amp"] == "bf16"
    assert result["config"]["steps"] == 3 and result["memory_kind"] == "cpu_training_state"


def test_a_run_its_time_budget_cut_says_so_on_its_status_line(capfd) -> None:
    """The issue's case: the workload's time budget ended the run after a fifth of its steps,
    and the command said a bare ``ok``; the cut is on the status line and in --json."""
    flags = [*TINY_FLAGS, "--steps", "100000", "--time-budget-s", "0.5", "--torch-threads", "1"]
    threads = torch.get_num_threads()
    try:
        code = main(["train", *flags, "--json"])
    finally:
        torch.set_num_threads(threads)  # the run set this process's: the next tests keep theirs
    out, err = capfd.readouterr()
    assert code == 0, err[-2000:]
    status = next(line for line in err.splitlines() if line.startswith("status"))
    assert "ok, cut by its time budget: time_budget_s=0.5 ended it after" in status
    assert "(1 threads)" in err  # the device line: the threads torch computed with
    result = json.loads(out.strip().splitlines()[-1])
    assert any(note.startswith("cut by its time budget") for note in result["notes"])


def test_failed_run_prints_the_status_and_exits_nonzero(capsys) -> None:
    code = main(["train", *TINY_FLAGS, "--lr", "1e30", "--warmup-fraction", "0"])
    captured = capsys.readouterr()
    assert code == 1 and "status            diverged" in captured.out
    assert captured.err.strip().splitlines()[-1].startswith("error: run diverged")


def test_version_prints_the_version(capsys) -> None:
    from tuner import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"tuner {__version__}"


def test_no_command_prints_the_help_with_the_exit_codes(capsys) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tuner") and "COMMAND" in out
    assert "exit codes:" in out and "130" in out


@pytest.mark.parametrize(
    ("argv", "prog"),
    [
        (["--no-such-flag"], "tuner"),
        (["bogus"], "tuner"),
        (["search", "--num-samples", "x"], "tuner search"),
        (["report"], "tuner report"),
    ],
)
def test_usage_errors_are_one_line_that_points_to_the_help(argv, prog, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{prog}: error: ")
    assert err[0].endswith(f"(see {prog} --help)")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("lr=abc", "error: lr='abc' is a str; lr must be a finite number."),
        ("batch_size=abc", "error: batch_size='abc' is a str; batch_size must be an integer."),
    ],
)
def test_a_bad_set_value_is_one_line_and_exit_2_before_ray_starts(
    setting: str, message: str, tmp_path: Path, capsys
) -> None:
    argv = ["search", "smoke_space", "--storage", str(tmp_path), "--set", setting]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]
    assert not any(tmp_path.iterdir())  # nothing ran


def test_a_config_file_with_a_wrong_type_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"lr": "abc"}))
    assert main(["train", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: lr='abc' is a str; lr must be a finite number."]


def test_search_and_train_spell_a_run_setting_the_same_way() -> None:
    parser = build_parser()
    new = ["search", "s", "--img-size", "64", "--time-budget-s", "30", "--epochs", "none"]
    args = parser.parse_args(new)
    assert (args.img_size, args.time_budget_s, args.epochs) == (64, 30.0, None)
    search_help = parser._subparsers._group_actions[0].choices["search"].format_help()
    assert "--img-size" in search_help and "--time-budget-s" in search_help
    for old in ("--image-size", "--time-per-trial"):  # the first release's spellings are gone
        with pytest.raises(SystemExit):
            parser.parse_args(["search", "s", old, "30"])
    train = _parse("--img-size", "64", "--time-budget-s", "30")
    assert (train.img_size, train.time_budget_s) == (64, 30.0)


def test_an_image_size_the_model_cannot_take_is_one_line_and_exit_2_before_training(
    capsys,
) -> None:
    code = main(["train", "--data", "digits", "--img-size", "16", "--steps", "5", "--json"])
    captured = capsys.readouterr()
    why = (
        "model='vit_tiny_r_s16_p8_224' cannot take img_size=16: its backbone makes a 4x4 "
        "feature map of it, which its 8x8 patches do not divide; use an --img-size that is a "
        "multiple of 32, or a smaller patch_size in --model-kwargs."
    )
    assert code == 2 and captured.err.strip().splitlines() == [f"error: {why}"]
    # Nothing trained; --json still ends stdout in one JSON document, the error's.
    assert captured.out.splitlines() == [
        json.dumps({"status": "error", "error": why, "exit_code": 2})
    ]


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["search", "smoke_space", "--sampler", "annealing", "--json"],
         "tuner search: error: argument --sampler: invalid choice: 'annealing' (choose from "),
        (["train", "--json", "--steps"],
         "tuner train: error: argument --steps: expected one argument (see tuner train --help)"),
    ],
)  # fmt: skip
def test_a_flag_argparse_refuses_is_one_line_and_with_json_the_errors_document(
    argv: list[str], start: str, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()  # argparse's own words (Python versions quote choices
    assert exit_.value.code == 2 and line.startswith(start)  # differently), in one line
    assert line.endswith("--help)")
    assert captured.out.splitlines() == [
        json.dumps({"status": "error", "error": line, "exit_code": 2})
    ]
    with pytest.raises(SystemExit):  # without --json, stdout stays empty
        main([a for a in argv if a != "--json"])
    assert capsys.readouterr().out == ""


def test_a_run_that_failed_before_its_first_step_still_prints_its_summary_and_json(
    capsys,
) -> None:
    from tuner.commands.train import _print_summary
    from tuner.engine.result import RunResult

    result = RunResult(status="error", error="OSError: gone")  # no config, no lr: none built
    _print_summary(result, file=sys.stdout)
    out = capsys.readouterr().out
    assert "status            error (OSError: gone)" in out and "peak lr n/a" in out
    assert json.loads(result.to_json())["status"] == "error"


@pytest.mark.parametrize("code", [130, 143])
def test_a_command_stopped_before_its_result_says_so_in_its_json(
    code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from tuner.commands import _ended

    said = {"status": "interrupted", "code": code}
    assert _ended(argparse.Namespace(json=True), "interrupted", **said) == code
    assert json.loads(capsys.readouterr().out) == {"status": "interrupted", "exit_code": code}
    assert _ended(argparse.Namespace(), "interrupted", **said) == code  # no --json: no stdout
    assert capsys.readouterr().out == ""


def test_a_reader_that_goes_away_is_no_traceback() -> None:
    """``tuner spaces | head``: the reader closes the pipe before tuner writes to it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe's buffer
    child = subprocess.Popen(
        [sys.executable, "-m", "tuner", "spaces"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # gone before the first line
    stderr = child.stderr.read()
    assert child.wait(timeout=120) == 1
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
