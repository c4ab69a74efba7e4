"""The user's own model and data through the engine: a real run of each, the knobs acting on
them, and one clear line for each kind of bad user code (before anything trains)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from engine_helpers import tiny
from torch import nn

from tuner.engine import build, train
from tuner.engine.data import build_data
from tuner.engine.model import build_model, conv_norm_layers
from tuner.usercode import UserCodeError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_space.py"
MODULE = "user_factories"


def user(model: str = "good_model", data: str = "pil_data", **overrides: Any) -> Any:
    """A tiny run of this folder's user code, named by module the way a user names theirs."""
    params: dict[str, Any] = {
        "model": f"{MODULE}:{model}",
        "data": f"{MODULE}:{data}",
        "model_kwargs": {},
        "img_size": 16,
        "batch_size": 8,
    }
    return tiny(**{**params, **overrides})


def test_example_model_and_data_train_and_learn() -> None:
    config = tiny(
        model=f"{EXAMPLE}:build_model",
        data=f"{EXAMPLE}:build_data",
        model_kwargs={},
        img_size=16,
        batch_size=32,
        steps=60,
        lr=0.01,
        max_eval_batches=None,
    )
    result = train(config)
    assert result.status == "ok", result.error
    assert result.val_accuracy is not None and result.val_accuracy > 0.6  # chance: 0.25
    assert result.memory_kind == "cpu_training_state" and result.peak_memory_bytes > 0


def test_model_kwargs_reach_the_factory_and_the_norm_knob_swaps_its_batchnorm() -> None:
    narrow = build_model(user(model_kwargs={"width": 4}), 4)
    wide = build_model(user(model_kwargs={"width": 16}), 4)
    assert narrow[0].out_channels == 4 and wide[0].out_channels == 16
    swapped = build_model(user(norm="group", gn_groups=2, model_kwargs={"width": 8}), 4)
    layers = conv_norm_layers(swapped)
    assert [type(layer) for layer in layers.values()] == [nn.GroupNorm]
    assert next(iter(layers.values())).num_groups == 2


def test_loader_knobs_act_on_user_pil_images() -> None:
    config = user(num_workers=1, persistent_workers=True, channels_last=True, amp="bf16")
    result = train(config)
    assert result.status == "ok", result.error
    assert result.effective["num_workers"] == 1 and result.effective["persistent_workers"]
    assert result.effective["channels_last"] and result.effective["amp"] == "bf16"
    images, labels = next(iter(build_data(config, torch.device("cpu")).train_loader))
    assert images.dtype == torch.uint8 and images.shape == (8, 3, 16, 16)
    assert labels.dtype == torch.int64


def test_float_images_are_normalized_by_the_users_mean_and_std() -> None:
    data = build_data(user(data="float_data"), torch.device("cpu"))
    assert data.mean == (0.5, 0.5, 0.5) and data.std == (0.25, 0.25, 0.25)
    assert train(user(data="float_data")).status == "ok"


@pytest.mark.parametrize(
    ("model", "data", "message"),
    [
        (
            "raising_model",
            "pil_data",
            r"raised ValueError: my model needs width >= 4 at .*user_factories.py:\d+",
        ),
        ("not_a_module", "pil_data", r"returned str, not a torch.nn.Module"),
        ("wrong_classes_model", "pil_data", r"returned \[2, 5\] for a batch of 2; .*\[2, 4\]"),
        (
            "one_channel_model",
            "pil_data",
            r"on a batch of \[2, 3, 16, 16\] images: .*raised RuntimeError",
        ),
        ("no_such_function", "pil_data", r"has no function 'no_such_function'"),
        ("good_model", "labels_out_of_range", r"train item 0 has label \d, outside num_classes=4"),
        (
            "good_model",
            "triples",
            r"train item 0 is a tuple of 3; each item must be \(image, label\)",
        ),
        ("good_model", "lists_not_datasets", r"returned a list as its train dataset"),
        ("good_model", "float_labels", r"train item 0's label is tensor\(\d\.\); give an int"),
        (
            "good_model",
            "two_things",
            r"returned tuple; return \(train_dataset, val_dataset, num_classes\)",
        ),
    ],
)
def test_bad_user_code_is_one_line_before_training(model: str, data: str, message: str) -> None:
    with pytest.raises(UserCodeError, match=message) as caught:
        train(user(model=model, data=data))
    assert "\n" not in str(caught.value)


def test_an_import_path_that_does_not_resolve_is_named() -> None:
    with pytest.raises(UserCodeError, match=r"module no_such_module does not import"):
        train(user(model="x", data="pil_data").replace(model="no_such_module:build"))
    with pytest.raises(UserCodeError, match=r"file .*missing.py does not exist"):
        train(user().replace(data="/nowhere/missing.py:build_data"))


def test_a_relative_file_reference_becomes_absolute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE.parents[1])
    config = tiny(model="examples/own_space.py:build_model")
    assert config.model == f"{EXAMPLE}:build_model"


def test_the_check_leaves_the_run_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """The preflight's forward runs in eval mode on a forked RNG: the same losses with it as
    with it turned off, and the BatchNorm statistics the same."""
    with_check = train(user(steps=4))
    monkeypatch.setattr(build, "uses_user_code", lambda config: False)
    without = train(user(steps=4))
    assert with_check.train_loss_curve == without.train_loss_curve
    assert with_check.val_loss == without.val_loss


def test_a_failure_while_training_is_a_result_with_the_users_traceback() -> None:
    result = train(user(model="fails_while_training", steps=6))
    assert result.status == "error" and result.steps == 2
    assert result.error == "ValueError: my forward failed at step 3"
    assert "user_factories.py" in result.error_traceback
    assert 'raise ValueError("my forward failed at step 3")' in result.error_traceback


def test_more_classes_than_the_data_has_are_the_models_outputs() -> None:
    """num_classes above the data's: the model is built for it and the check expects it."""
    result = train(user(num_classes=6, steps=2))
    assert result.status == "ok", result.error


@pytest.mark.cuda
@pytest.mark.parametrize("data", ["pil_data", "float_data"])
def test_the_prefetcher_normalizes_user_images_as_the_plain_path(data: str) -> None:
    """On a GPU the CUDA prefetcher copies and normalizes the user's images (uint8 from PIL, or
    float) with the user's mean and std, the same numbers as the plain path on the host."""
    from tuner.engine.data import normalize
    from tuner.engine.prefetch import CudaPrefetcher

    device = torch.device("cuda")
    bundle = build_data(user(data=data, pin_memory=True, device="cuda"), device)
    prefetcher = CudaPrefetcher(bundle.train_loader, device, bundle.mean, bundle.std)
    mean = torch.tensor(bundle.mean).view(1, -1, 1, 1)
    std = torch.tensor(bundle.std).view(1, -1, 1, 1)
    plain = [normalize(x, mean, std) for x, _ in bundle.train_loader]
    fetched = [x.cpu() for x, _ in prefetcher]
    assert len(plain) == len(fetched) > 0
    for a, b in zip(plain, fetched, strict=True):
        torch.testing.assert_close(a, b)
    config = user(data=data, device="cuda", prefetch="cuda_stream", pin_memory=True, amp="bf16")
    result = train(config.replace(non_blocking=True, channels_last=True))
    assert result.status == "ok", result.error
    assert result.effective["prefetch"] == "cuda_stream" and result.effective["pin_memory"]


def test_numpy_integer_labels_are_class_indices() -> None:
    assert train(user(data="numpy_labels", steps=2)).status == "ok"


@pytest.mark.slow
def test_compile_applies_to_the_users_swapped_model() -> None:
    """torch.compile (inductor, ~30 s on a CPU) on the user's model with its BatchNorm2d
    swapped for GroupNorm; the fast sibling is the same run uncompiled (above)."""
    result = train(user(compile="default", steps=6, norm="group", gn_groups=2))
    assert result.status == "ok", result.error
    assert result.effective["compile"] == "default" and result.effective["norm"] == "group"
