"""The search-space registry: every space samples and builds, bad spaces fail in one line."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tuner.errors import TunerError
from tuner.spaces import (
    SpaceSampler,
    get_space,
    list_spaces,
    load_space_file,
    register_spaces,
    suggest_loader_and_techniques,
    train_config_of,
)
from tuner.techniques import accuracy_neutral_fields

SPACES = [space.name for space in list_spaces()]


def _samples(name: str, *, cuda: bool, n: int = 12) -> list[tuple[dict, dict]]:
    """``n`` real Optuna trials of the space: (searched params, returned settings)."""
    space = get_space(name)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    samples = []
    for _ in range(n):
        trial = study.ask()
        params = space.sample(trial, cuda=cuda)
        samples.append((trial.params, params))
    return samples


def test_registry_ships_the_required_spaces() -> None:
    assert {"vit_space", "resnet_space", "smoke_space", "tiny_grid_space"} <= set(SPACES)


@pytest.mark.parametrize("cuda", [False, True])
@pytest.mark.parametrize("name", SPACES)
def test_every_space_samples_and_builds_a_config(name: str, cuda: bool) -> None:
    space = get_space(name)
    kind = space.workload("auto", cuda=cuda)
    for searched, params in _samples(name, cuda=cuda):
        config = train_config_of(params, workload=space.workloads[kind])
        assert config.batch_size == params["batch_size"]
        if "base_lr" in searched:  # lr is searched per 256 images
            assert math.isclose(config.lr, searched["base_lr"] * config.batch_size / 256)


@pytest.mark.parametrize("name", SPACES)
def test_conditional_parameters_appear_only_where_they_apply(name: str) -> None:
    for cuda in (False, True):
        for searched, params in _samples(name, cuda=cuda):
            if "gn_groups" in searched:
                assert params["norm"] == "group"
            if not cuda:
                assert {"prefetch", "compile", "pin_memory"}.isdisjoint(searched)
            if params.get("non_blocking") or params.get("prefetch", "off") != "off":
                assert params["pin_memory"]  # the registry's implies


@pytest.mark.parametrize("cuda", [False, True])
def test_vit_space_searches_training_knobs_and_leaves_speed_knobs_to_the_probes(cuda: bool) -> None:
    seen: dict[str, set] = {}
    for searched, _ in _samples("vit_space", cuda=cuda, n=40):
        for key, value in searched.items():
            seen.setdefault(key, set()).add(value)
    assert seen["norm"] == {"batch", "group"} and len(seen["gn_groups"]) > 1
    assert seen["amp"] == ({"off", "bf16", "fp16"} if cuda else {"off", "bf16"})
    assert len(seen["batch_size"]) == 4
    assert not set(seen) & set(accuracy_neutral_fields())  # the search's speed probes choose


def test_auto_workload_follows_the_device() -> None:
    space = get_space("vit_space")
    assert space.workload("auto", cuda=False) == "cpu"
    assert space.workload("auto", cuda=True) == "gpu"
    assert get_space("tiny_grid_space").workload("auto", cuda=True) == "cpu"
    with pytest.raises(TunerError, match="no 'gpu' workload"):
        get_space("tiny_grid_space").workload("gpu", cuda=True)


def test_unknown_space_name_is_one_clear_error() -> None:
    with pytest.raises(TunerError, match=r"Unknown search space 'nope'.*vit_space"):
        get_space("nope")


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TunerError, match="does not exist"):
        get_space(str(tmp_path / "missing.py"))


def test_file_without_a_space_function_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "half_space.py"
    path.write_text('WORKLOADS = {"cpu": {"model": "resnet10t"}}\n')
    with pytest.raises(TunerError, match=r"must define WORKLOADS .* and space\(trial"):
        load_space_file(path)


def test_workload_with_an_unknown_setting_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "typo_space.py"
    path.write_text(
        'WORKLOADS = {"cpu": {"modle": "resnet10t"}}\ndef space(trial, *, cuda):\n    return {}\n'
    )
    with pytest.raises(TunerError, match="engine does not know: modle"):
        load_space_file(path)


def test_returned_parameter_the_engine_does_not_know_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad_param_space.py"
    path.write_text(
        'WORKLOADS = {"cpu": {}}\n'
        "def space(trial, *, cuda):\n"
        '    return {"batch_size": trial.suggest_int("batch_size", 8, 16), "lr_typo": 1.0}\n'
    )
    space = load_space_file(path)
    with pytest.raises(TunerError, match="engine does not know: lr_typo"):
        space.sample(optuna.create_study().ask(), cuda=False)


def test_returned_value_of_the_wrong_type_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad_type_space.py"
    path.write_text(
        'WORKLOADS = {"cpu": {}}\n'
        "def space(trial, *, cuda):\n"
        '    return {"batch_size": str(trial.suggest_int("batch_size", 8, 16))}\n'
    )
    space = load_space_file(path)
    with pytest.raises(TunerError) as info:
        space.sample(optuna.create_study().ask(), cuda=False)
    message = str(info.value)
    assert "\n" not in message and "batch_size='" in message and "must be an integer" in message


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('    raise RuntimeError("boom")\n', "space() raised RuntimeError: boom at "),
        ("    return {'lr': 1 / 0}\n", "space() raised ZeroDivisionError: division by zero at "),
    ],
    ids=["raise", "a bug"],
)
def test_a_space_that_raises_is_one_line_naming_its_file_and_line(
    body: str, said: str, tmp_path: Path
) -> None:
    """The user's space() is user code: what it raises is a usage error naming where."""
    path = tmp_path / "raising_space.py"
    path.write_text('WORKLOADS = {"cpu": {}}\ndef space(trial, *, cuda):\n' + body)
    space = load_space_file(path)
    with pytest.raises(TunerError) as info:
        space.sample(optuna.create_study().ask(), cuda=False)
    message = str(info.value)
    assert message.startswith(f"Space raising_space: {said}"), message
    assert message.endswith(f"{path}:3.") and "\n" not in message


def test_duplicate_space_names_are_rejected(tmp_path: Path) -> None:
    body = 'NAME = "twin"\nWORKLOADS = {"cpu": {}}\ndef space(trial, *, cuda):\n    return {}\n'
    (tmp_path / "a.py").write_text(body)
    (tmp_path / "b.py").write_text(body)
    twins = [load_space_file(tmp_path / "a.py"), load_space_file(tmp_path / "b.py")]
    with pytest.raises(TunerError, match="Two search spaces are named 'twin'"):
        register_spaces(twins)


def test_space_sampler_is_picklable_and_reloads_the_space() -> None:
    import pickle

    sampler = pickle.loads(pickle.dumps(SpaceSampler("smoke_space", False)))
    params = sampler(optuna.create_study().ask())
    assert params["batch_size"] in (16, 64)


def test_spaces_command_lists_one_line_each() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tuner", "spaces"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(out) == len(SPACES)
    assert [line.split()[0] for line in out] == SPACES


@pytest.mark.parametrize("cuda", [False, True])
def test_technique_helper_searches_cuda_switches_only_with_a_gpu(cuda: bool) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    cuda_only = {"pin_memory", "non_blocking", "prefetch", "compile"}
    seen: set[str] = set()
    for _ in range(30):
        params = suggest_loader_and_techniques(study.ask(), cuda=cuda)
        seen |= set(params)
        assert not params.get("non_blocking") or params["pin_memory"]
        assert cuda or params["amp"] in ("off", "bf16")
    assert (seen >= cuda_only) if cuda else not (seen & cuda_only)


def test_trial_parameters_become_a_train_config_in_one_place() -> None:
    workload = {"model": "vit_tiny_patch16_224", "img_size": 32, "device": "auto"}
    params = {"batch_size": 32, "base_lr": 0.2, "lr": 0.025, "device": "auto"}
    config = train_config_of(params, workload=workload, search_only=["base_lr"], device="cpu")
    assert (config.batch_size, config.lr, config.img_size) == (32, 0.025, 32)
    assert config.device == "cpu"  # a trial without a GPU runs on the CPU, whatever params say
    assert train_config_of({"batch_size": 8}, workload={"batch_size": 64}).batch_size == 8
    with pytest.raises(TunerError, match="base_lr") as info:
        train_config_of(params)  # base_lr is no run setting unless named search-only
    assert "\n" not in str(info.value)
