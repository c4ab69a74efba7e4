from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tuner.config import TrainConfig, load_config_file, make_config
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
    again = make_config(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.replace(lr=0.5).lr == 0.5


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainConfig().lr = 1.0  # type: ignore[misc]


def test_unknown_setting_is_one_clear_error() -> None:
    with pytest.raises(TunerError, match=r"Unknown run setting.*batchsize"):
        make_config({"batchsize": 8})


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
