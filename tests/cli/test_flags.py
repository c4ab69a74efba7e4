"""One vocabulary: every shared flag means the same in every command that has it
(tuner/commands/_flags.py), bad values end in one line and exit 2, and --json parses."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tuner.commands import COMMANDS, build_parser, main
from tuner.commands._flags import config_flag
from tuner.compare.ablation import skippable
from tuner.config import config_fields, field_help
from tuner.techniques import knob, ladder_knobs

TINY_TRAIN = [
    "--model-kwargs", '{"patch_size": 2, "embed_dim": 32, "depth": 1, "num_heads": 2}',
    "--img-size", "32", "--batch-size", "32", "--epochs", "none", "--steps", "3",
    "--warmup-steps", "1", "--max-eval-batches", "2", "--device", "cpu",
]  # fmt: skip


def _parsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a.choices, dict))
    return {name: action.choices[name] for name in COMMANDS}


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings if s.startswith("--")}


def _meaning(action: argparse.Action) -> str:
    """The help's meaning, without what differs by command: its default, its detail."""
    return (action.help or "").split(" (")[0]


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        return int(exc.code or 0)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_works(command: str, capsys: pytest.CaptureFixture) -> None:
    assert _run([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: tuner {command}")


def _shared() -> list[str]:
    seen: dict[str, int] = {}
    for parser in _parsers().values():
        for flag in _flags(parser):
            seen[flag] = seen.get(flag, 0) + 1
    return sorted(flag for flag, n in seen.items() if n > 1 and flag != "--help")


@pytest.mark.parametrize("flag", _shared())
def test_a_shared_flag_means_the_same_in_every_command(flag: str) -> None:
    actions = {name: _flags(p)[flag] for name, p in _parsers().items() if flag in _flags(p)}
    meanings = {name: _meaning(a) for name, a in actions.items()}
    assert len(set(meanings.values())) == 1, meanings
    assert len({repr(a.choices) for a in actions.values()}) == 1
    assert len({type(a).__name__ for a in actions.values()}) == 1


def test_the_vocabulary_is_shared() -> None:
    """The flags the issue names exist where they should (and nowhere with another name)."""
    flags = {name: set(_flags(p)) for name, p in _parsers().items()}
    assert all("--json" in flags[c] for c in COMMANDS)
    assert {c for c in COMMANDS if "--out" in flags[c]} == {"report", "bench"}
    assert {c for c in COMMANDS if "--reports-dir" in flags[c]} == {"search", "ablate"}
    assert {c for c in COMMANDS if "--skip" in flags[c]} == {"ablate", "bench"}
    assert {c for c in COMMANDS if "--amp" in flags[c]} == {"train", "ablate", "bench"}
    assert {c for c in COMMANDS if "--workload" in flags[c]} == {"search"}


def test_run_settings_explain_themselves_from_the_config() -> None:
    for parser in _parsers().values():
        for action in parser._actions:
            if action.dest in config_fields():
                assert action.option_strings[0] == config_flag(action.dest)  # and --no-X
                assert (action.help or "").startswith(field_help(action.dest))


def test_amp_choices_are_the_registry_s() -> None:
    amp = knob("amp")
    registry = {amp.off, *amp.values(cuda=True), *amp.values(cuda=False)}
    for parser in _parsers().values():
        if "--amp" in _flags(parser):
            assert set(_flags(parser)["--amp"].choices) == registry


def test_skip_lists_name_the_registry_s_steps() -> None:
    ladder = [k.field for k in ladder_knobs()]
    parsers = _parsers()
    assert ", ".join(ladder) + ")" in _flags(parsers["bench"])["--skip"].help
    assert ", ".join(skippable()) + ")" in _flags(parsers["ablate"])["--skip"].help


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["bench", "--skip", "amp,dropout"], "dropout"),
        (["bench", "--verify", "--skip", "dropout"], "dropout"),
        (["ablate", "--device", "cpu", "--skip", "dropout"], "dropout"),
        (["train", "--amp", "fp8"], "fp8"),
        (["ablate", "--amp", "fp8"], "fp8"),
        (["bench", "--amp", "fp8"], "fp8"),
        (["ablate", "--device", "cpu", "--amp", "off"], "off"),
        (["bench", "--amp", "off"], "off"),
        (["search", "smoke_space", "--workload", "tpu"], "tpu"),
        (["bench", "--set", "lr"], "lr"),
        (["bench", "--set", "steps=-1"], "--steps"),  # its own flag's setting: not overridden
        (["bench", "--verify", "--set", "amp=bf16"], "--amp"),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2(
    argv: list[str], named: str, capsys: pytest.CaptureFixture
) -> None:
    assert _run(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0] and "Traceback" not in err[0], err


def test_a_bad_skip_names_the_valid_entries(capsys: pytest.CaptureFixture) -> None:
    assert _run(["bench", "--skip", "dropout"]) == 2
    valid = ", ".join(k.field for k in ladder_knobs())
    assert capsys.readouterr().err.strip() == f"error: --skip dropout unknown; choose from {valid}."


def _last_json(out: str) -> object:
    return json.loads(out.strip().splitlines()[-1])


def test_spaces_json(capsys: pytest.CaptureFixture) -> None:
    assert main(["spaces", "--json"]) == 0
    spaces = _last_json(capsys.readouterr().out)
    assert {"smoke_space", "vit_space"} <= {s["name"] for s in spaces}
    assert all(s["summary"] and "cpu" in s["workloads"] for s in spaces)


def test_train_json(capsys: pytest.CaptureFixture) -> None:
    assert main(["train", *TINY_TRAIN, "--json"]) == 0
    result = _last_json(capsys.readouterr().out)
    assert result["status"] == "ok" and result["config"]["steps"] == 3


def test_report_json(smoke_experiment: Path, tmp_path: Path, capsys) -> None:
    assert main(["report", str(smoke_experiment), "--out", str(tmp_path), "--json"]) == 0
    result = _last_json(capsys.readouterr().out)
    assert result["report"] == str(tmp_path / "report.html")
    assert sum(result["trials"].values()) == 3 and result["answer"]
    assert result["recommended"] in {p["trial_id"] for p in result["picks"].values()}
    assert all(p["config"]["model"] for p in result["picks"].values())
