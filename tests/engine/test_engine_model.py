from __future__ import annotations

import pytest
import torch
from engine_helpers import TINY_RESNET, TINY_VIT, tiny
from timm.layers import BatchNormAct2d, GroupNormAct, LayerNorm2d, LayerNormAct2d
from torch import nn

from tuner.engine.model import build_model, conv_norm_layers
from tuner.errors import TunerError

MODELS = {"hybrid_vit": TINY_VIT, "resnet": TINY_RESNET}
# The layer each norm must become: (plain, with activation).
EXPECTED = {
    "batch": (nn.BatchNorm2d, BatchNormAct2d),
    "group": (nn.GroupNorm, GroupNormAct),
    "layer": (LayerNorm2d, LayerNormAct2d),
}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("norm", ["batch", "group", "layer"])
def test_norm_knob_replaces_every_convolutional_norm(model: str, norm: str) -> None:
    native = build_model(tiny(**MODELS[model]), 10)
    swapped = build_model(tiny(**MODELS[model], norm=norm, gn_groups=4), 10)
    before, after = conv_norm_layers(native), conv_norm_layers(swapped)
    assert before.keys() == after.keys() and len(after) > 0
    plain, with_act = EXPECTED[norm]
    for name, layer in after.items():
        has_act = isinstance(getattr(before[name], "act", None), nn.Module)
        assert type(layer) is (with_act if has_act else plain), name
        if has_act:  # the activation survives the swap
            assert type(layer.act) is type(before[name].act)
        if norm == "group":
            assert layer.num_groups == 4
    # Token norms of the transformer are not convolutional and stay nn.LayerNorm.
    token_norms = [m for m in swapped.modules() if type(m) is nn.LayerNorm]
    assert len(token_norms) == len([m for m in native.modules() if type(m) is nn.LayerNorm])
    logits = swapped(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, 10) and torch.isfinite(logits).all()


def test_hybrid_vit_natively_uses_groupnormact_and_batch_swaps_it() -> None:
    native = conv_norm_layers(build_model(tiny(), 10))
    assert all(type(m) is GroupNormAct for m in native.values())
    swapped = conv_norm_layers(build_model(tiny(norm="batch"), 10))
    assert all(type(m) is BatchNormAct2d for m in swapped.values())


def test_swap_keeps_affine_init_such_as_zeroed_last_bn() -> None:
    cfg = tiny(model="resnet18", model_kwargs={}, img_size=32)
    torch.manual_seed(0)
    native = conv_norm_layers(build_model(cfg, 10))
    torch.manual_seed(0)
    swapped = conv_norm_layers(build_model(cfg.replace(norm="group", gn_groups=8), 10))
    zeroed = [n for n, m in native.items() if m.weight.abs().sum() == 0]
    assert zeroed  # timm zero-initializes each block's last BN
    assert all(swapped[n].weight.abs().sum() == 0 for n in zeroed)


def test_group_count_that_does_not_divide_channels_is_a_clear_error() -> None:
    with pytest.raises(TunerError) as info:
        build_model(tiny(norm="group", gn_groups=5), 10)
    message = str(info.value)
    assert "gn_groups=5 does not divide the 64 channels of layer" in message
    assert "1, 2, 4, 8, 16, 32, 64" in message and "\n" not in message


def test_a_norm_swap_on_a_model_without_conv_norms_is_a_clear_error() -> None:
    # A plain ViT has a patch-embedding conv but no norm on feature maps: nothing to swap.
    plain_vit = {"model": "vit_tiny_patch16_224", "model_kwargs": {"depth": 1}}
    build_model(tiny(**plain_vit), 10)  # norm=native is fine
    with pytest.raises(TunerError, match="has no convolutional norm layers"):
        build_model(tiny(**plain_vit, norm="group", gn_groups=4), 10)


def test_img_size_is_passed_only_to_models_that_take_it() -> None:
    vit = build_model(tiny(img_size=48), 10)
    assert vit.patch_embed.img_size == (48, 48)
    resnet = build_model(tiny(**{**TINY_RESNET, "img_size": 48}), 3)
    assert resnet(torch.randn(1, 3, 48, 48)).shape == (1, 3)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"model": "no_such_model_xyz"}, "not a timm model"),
        ({"model_kwargs": {"bogus": 1}}, "bogus"),
    ],
)
def test_bad_model_is_a_clear_error(changes: dict, match: str) -> None:
    with pytest.raises(TunerError, match=match):
        build_model(tiny(**changes), 10)


def test_heads_that_do_not_divide_the_width_are_named_not_the_image_size() -> None:
    """Issue 39: num_heads=3 with embed_dim 32 read "cannot take img_size=16 ... try another
    --img-size", and a console line cut short lost the real cause."""
    kwargs = {**TINY_VIT["model_kwargs"], "embed_dim": 32, "num_heads": 3}
    with pytest.raises(TunerError) as raised:
        build_model(tiny(model_kwargs=kwargs, img_size=16), 10)
    message = str(raised.value)
    assert "embed_dim 32 is not a multiple of num_heads 3" in message[:160]
    assert "img_size" not in message
