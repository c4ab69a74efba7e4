"""Deterministic errors are found in the driver, in one line, before any trial starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_cli import search_command

from tuner.errors import TunerError
from tuner.spaces import get_space
from tuner.tune import SearchOptions
from tuner.tune.plan import check_space, make_plan
from tuner.tune.preflight import check_before_ray, check_equal_budget, check_workload


def _check(space_name: str, **overrides: object) -> None:
    space = get_space(space_name)
    plan = make_plan(
        SearchOptions(space=space_name, overrides=overrides), space, node_cpus=[2.0], total_gpus=0.0
    )
    check_workload(plan, check_space(space, plan))


def test_the_default_workloads_pass() -> None:
    _check("vit_space")
    _check("smoke_space")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"data": "imagefolder:/nonexistent"}, "has no train/ folder"),
        ({"model": "vit_nope"}, "is not a timm model"),
        ({"model": "vit_tiny_patch16_224", "model_kwargs": {}}, "no convolutional norm layers"),
    ],
)
def test_a_bad_workload_is_one_line(overrides: dict, message: str) -> None:
    with pytest.raises(TunerError, match=message) as info:
        _check("vit_space", **overrides)
    assert "\n" not in str(info.value)


def test_a_batch_size_choice_larger_than_the_data(tmp_path: Path) -> None:
    for split in ("train", "val"):
        folder = tmp_path / split / "a"
        folder.mkdir(parents=True)
        from PIL import Image

        for i in range(40):
            Image.new("RGB", (8, 8), (i, i, i)).save(folder / f"{i}.png")
    with pytest.raises(TunerError, match=r"batch_size=64, 128, 256 \(the space's choice\)"):
        _check("vit_space", data=f"imagefolder:{tmp_path}")


def test_a_group_count_choice_that_does_not_divide(tmp_path: Path) -> None:
    space = tmp_path / "groups_space.py"
    space.write_text(
        "WORKLOADS = {'cpu': {'model': 'vit_tiny_r_s16_p8_224', 'img_size': 32, 'steps': 4,\n"
        "    'model_kwargs': {'patch_size': 2, 'embed_dim': 32, 'depth': 1, 'num_heads': 2}}}\n"
        "def space(trial, *, cuda):\n"
        "    g = trial.suggest_categorical('gn_groups', [4, 3])\n"
        "    return {'norm': 'group', 'gn_groups': g}\n"
    )
    with pytest.raises(TunerError, match=r"gn_groups=3 \(a choice of the space\) does not divide"):
        _check(str(space))


@pytest.mark.parametrize(
    "flags",
    [  # one search driver each (13 CPU-seconds): the fast tier keeps one (tests/tiers.py: FAST_CPU)
        pytest.param(["--data", "imagefolder:/nonexistent"], marks=pytest.mark.slow),
        ["--model", "vit_nope"],
    ],
)
def test_the_cli_fails_in_the_driver_with_one_line_and_no_trial(
    flags: list[str], tmp_path: Path
) -> None:
    import subprocess

    command = search_command("vit_space", *flags, name="bad", storage=tmp_path)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert not list(tmp_path.glob("bad/*/params.json"))  # no trial started


_BAD_SPACE = """
WORKLOADS = {"cpu": {"model": "resnet18", "data": "digits", "img_size": 16, "steps": 2}}


def space(trial, *, cuda):
    return {"batch_size": trial.suggest_categorical("batch_size", [8, 0])}
"""


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "batch_size=0"], "batch_size=0 must be a positive integer"),
        (["--set", "lr=-1"], "must be positive"),
        (["--data", "imagefolder:/nonexistent"], "has no train/ folder"),
        (["--model", "vit_nope"], "is not a timm model"),
        (["bad_space.py"], "batch_size=0 must be a positive integer"),
        (["--warm-start", "nosuch"], "--warm-start nosuch"),
    ],
)
def test_usage_errors_end_before_ray_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    flags: list[str], message: str,
) -> None:  # fmt: skip
    from tuner.commands import main
    from tuner.tune import cluster

    def no_ray(**_: object) -> None:
        raise AssertionError("Ray was started before the usage error was found")

    monkeypatch.setattr(cluster, "connect", no_ray)
    (tmp_path / "bad_space.py").write_text(_BAD_SPACE)
    space = str(tmp_path / flags[0]) if flags[0].endswith(".py") else "vit_space"
    flags = flags[1:] if flags[0].endswith(".py") else flags
    storage = tmp_path / "experiments"
    argv = ["search", space, *flags, "--storage", str(storage), "--no-report"]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not storage.exists()  # no experiment folder either (nor its lock)


def test_an_odd_space_file_name_is_no_fault_of_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuner.commands import main

    odd = tmp_path / "my space (v2)!.py"
    odd.write_text(_BAD_SPACE)
    assert main(["search", str(odd), "--storage", str(tmp_path / "exp"), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "batch_size=0" in err and "--name" not in err  # the space's fault, named as such


@pytest.mark.parametrize(
    ("flags", "setting", "fix"),
    [
        (["--steps", "100"], "steps=100", "--set steps=null --set images=N"),
        (
            ["--set", "eval_every_steps=50", "--set", "eval_every_images=null"],
            "eval_every_steps=50",
            "--set eval_every_steps=null --set eval_every_images=N",
        ),
    ],
)
def test_a_step_budget_over_sampled_batch_sizes_is_refused_before_trials(
    flags: list[str], setting: str, fix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuner.commands import main

    assert main(["search", "vit_space", "--storage", str(tmp_path), *flags]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{setting} is a budget in steps" in line and "32, 64, 128, 256" in line
    assert fix in line
    assert not any(tmp_path.iterdir())  # refused before anything ran


def test_a_step_budget_at_one_batch_size_is_equal_images() -> None:
    # The batch size pinned: every trial's steps are the same images, nothing to refuse.
    space = get_space("vit_space")
    options = SearchOptions(space="vit_space", overrides={"steps": 100, "batch_size": 64})
    check_equal_budget(check_before_ray(options, space).profile, space.name)
