from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tuner.config import TrainConfig, load_config_file
from tuner.errors import TunerError


def test_default_config_is_the_plain_loop() -> None:
    config = TrainConfig()
    assert (config.amp, config.prefetch, config.compile, config.norm) == (
        "off", "off", "off", "native",
    )  # fmt: skip
    assert not (config.set_to_none or config.non_blocking or config.channels_last)
    assert not (config.fused_adamw or config.pin_memory)
    assert config.grad_clip_norm is None and config.label_smoothing == 0


def test_to_dict_round_trips_through_json() -> None:
    config = TrainConfig(model_kwargs={"depth": 2}, amp="bf16", steps=7)
    again = TrainConfig.from_params(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.replace(lr=0.5).lr == 0.5


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainConfig().lr = 1.0  # type: ignore[misc]


def test_unknown_setting_is_one_clear_error() -> None:
    with pytest.raises(TunerError, match=r"Unknown run setting.*batchsize"):
        TrainConfig.from_params({"batchsize": 8})


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"amp": "fp8"}, "amp='fp8' is not one of"),
        ({"batch_size": 0}, "batch_size=0"),
        ({"persistent_workers": True}, "persistent_workers needs num_workers"),
        ({"epochs": None, "steps": None, "time_budget_s": None}, "no budget"),
        ({"target_accuracy": 1.5}, "target_accuracy"),
        ({"lr": 0}, "lr=0"),
    ],
)
def test_impossible_settings_name_the_problem(changes: dict, match: str) -> None:
    with pytest.raises(TunerError, match=match):
        TrainConfig(**changes)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"lr": "abc"}, r"lr='abc' is a str; lr must be a finite number"),
        ({"batch_size": "abc"}, r"batch_size='abc' is a str; batch_size must be an integer"),
        ({"batch_size": 6.5}, r"batch_size=6.5 is a float; batch_size must be an integer"),
        ({"channels_last": "yes"}, r"channels_last='yes' is a str; channels_last must be true"),
        ({"steps": "10"}, r"steps='10' is a str; steps must be an integer or none"),
        ({"model_kwargs": "depth=2"}, r"model_kwargs='depth=2' is a str; .*JSON object"),
        ({"lr": float("nan")}, r"lr=nan is a float; lr must be a finite number"),
        ({"num_workers": True}, r"num_workers=True is a bool; num_workers must be an integer"),
    ],
)
def test_wrong_types_name_the_setting_the_value_and_the_type(changes: dict, match: str) -> None:
    with pytest.raises(TunerError, match=match):
        TrainConfig.from_params(changes)


def test_numbers_are_taken_in_the_type_the_field_declares() -> None:
    config = TrainConfig.from_params({"lr": 1, "batch_size": 32.0, "time_budget_s": 5})
    assert isinstance(config.lr, float) and config.batch_size == 32
    assert isinstance(config.batch_size, int) and isinstance(config.time_budget_s, float)


def test_search_only_keys_are_dropped_by_name_and_others_still_fail() -> None:
    config = TrainConfig.from_params({"base_lr": 0.1, "lr": 0.2}, ignore=("base_lr",))
    assert config.lr == 0.2
    with pytest.raises(TunerError, match=r"Unknown run setting.*base_lr"):
        TrainConfig.from_params({"base_lr": 0.1})


def test_config_file_loads_and_unwraps_a_json_result(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"status": "ok", "config": {"lr": 0.01, "steps": 3}}))
    config = load_config_file(path)
    assert config.lr == 0.01 and config.steps == 3


@pytest.mark.parametrize(("text", "match"), [("{", "not valid JSON"), ("[1]", "JSON object")])
def test_bad_config_file_is_one_clear_error(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(TunerError, match=match):
        load_config_file(path)
    with pytest.raises(TunerError, match="does not exist"):
        load_config_file(tmp_path / "missing.json")
