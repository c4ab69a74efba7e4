"""The model stage: timm's factory or the user's own (``module:function`` ->
``build_model(config, num_classes, **model_kwargs)``), then the ``norm`` knob: every norm layer
over 2-D feature maps (``BatchNorm2d``, ``GroupNorm``, ``LayerNorm2d``, their ``*Act`` forms)
is replaced; token norms stay. A norm+act layer keeps its activation, and the affine parameters
are copied (a ResNet's zero-initialized last BN survives the swap).
"""

from __future__ import annotations

import functools
import math
import traceback
from collections.abc import Callable, Collection

import timm
import torch
from timm.layers import BatchNormAct2d, GroupNormAct, LayerNorm2d, LayerNormAct2d
from torch import nn

from tuner.config import TrainConfig
from tuner.errors import TunerError
from tuner.usercode import UserCodeError, call_user, is_ref, resolve

__all__ = ["build_model", "check_norm_choices", "conv_norm_layers"]

# What counts as a convolutional norm layer (the *Act variants subclass these).
CONV_NORM_TYPES = (nn.BatchNorm2d, nn.GroupNorm, LayerNorm2d, LayerNormAct2d)

# norm name -> (plain layer, norm+act layer), each built as f(channels, groups, apply_act).
_PLAIN: dict[str, Callable[[int, int], nn.Module]] = {
    "batch": lambda c, g: nn.BatchNorm2d(c),
    "group": lambda c, g: nn.GroupNorm(g, c),
    "layer": lambda c, g: LayerNorm2d(c),
}
_WITH_ACT: dict[str, Callable[[int, int], nn.Module]] = {
    "batch": lambda c, g: BatchNormAct2d(c, apply_act=False),
    "group": lambda c, g: GroupNormAct(c, num_groups=g, apply_act=False),
    "layer": lambda c, g: LayerNormAct2d(c, apply_act=False),
}


def build_model(config: TrainConfig, num_classes: int) -> nn.Module:
    """``config.model`` (timm without pretrained weights, or the user's factory) with the norm
    knob applied; ``img_size`` goes to timm models that take it (TunerError: bad input)."""
    kwargs = dict(config.model_kwargs)
    if is_ref(config.model):
        model = _user_model(config, num_classes, kwargs)
    else:
        model = _timm_model(config, num_classes, kwargs)
    if config.norm != "native":
        norm, groups = config.norm, config.gn_groups
        check_norm_choices(model, model_name=type(model).__name__, norms=[norm], groups=[groups])
        for name, layer in conv_norm_layers(model).items():
            _set_module(model, name, _replacement(layer, norm, groups))
    return model


def _user_model(config: TrainConfig, num_classes: int, kwargs: dict) -> nn.Module:
    factory = resolve(config.model, what="model")
    what = f"model={config.model!r}"
    model = call_user(factory, config, num_classes, what=what, **kwargs)
    if not isinstance(model, nn.Module):
        raise UserCodeError(
            f"{what} returned {type(model).__name__}, not a torch.nn.Module; return the model."
        )
    return model


def _timm_model(config: TrainConfig, num_classes: int, kwargs: dict) -> nn.Module:
    if not timm.is_model(config.model):
        close = timm.list_models(f"*{config.model.split('_')[0]}*")[:5]
        hint = f" (similar: {', '.join(close)})" if close else ""
        raise TunerError(
            f"model={config.model!r} is not a timm model{hint}; see timm.list_models(), or "
            "name your own as module:function."
        )
    try:
        return _create(config.model, num_classes, config.img_size, kwargs)
    except TypeError as exc:
        raise TunerError(f"model_kwargs {kwargs} do not fit {config.model}: {exc}") from None
    except AssertionError as exc:  # timm asserts what the image size must be; the why is ours
        raise TunerError(_size_misfit(config, exc)) from None


def _size_misfit(config: TrainConfig, exc: AssertionError) -> str:
    """Why timm refused ``config.img_size`` (timm's assert says nothing): for a hybrid ViT,
    the backbone's feature map, which the patch size must divide."""
    where = exc.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    layer = where.tb_frame.f_locals.get("self") if where is not None else None
    feature, patch = getattr(layer, "feature_size", None), getattr(layer, "patch_size", None)
    start = f"model={config.model!r} cannot take img_size={config.img_size}"
    if feature is None or patch is None or not feature[0]:  # not the image: the settings
        return _settings_misfit(config, exc, layer)
    multiple = config.img_size // int(feature[0]) * int(patch[0])
    return (
        f"{start}: its backbone makes a {int(feature[0])}x{int(feature[1])} feature map of it, "
        f"which its {patch[0]}x{patch[1]} patches do not divide; use an --img-size that is a "
        f"multiple of {multiple}, or a smaller patch_size in --model-kwargs."
    )


def _settings_misfit(config: TrainConfig, exc: AssertionError, layer: object) -> str:
    """A timm assert on the model's own settings, the cause first (a cut line still names it)."""
    check = traceback.extract_tb(exc.__traceback__)[-1]
    kwargs = dict(config.model_kwargs)
    cause = f"timm's check `{check.line}` failed in {type(layer).__name__}"
    dim, heads = kwargs.get("embed_dim"), kwargs.get("num_heads")
    if "num_heads" in str(check.line) and isinstance(dim, int) and isinstance(heads, int):
        cause = f"embed_dim {dim} is not a multiple of num_heads {heads} ({cause})"
    return (
        f"model={config.model!r} with model_kwargs {kwargs}: {cause}; change --model-kwargs "
        "(or the values the space samples) so that they fit together."
    )


def _create(name: str, num_classes: int, img_size: int, kwargs: dict) -> nn.Module:
    try:
        return timm.create_model(name, num_classes=num_classes, img_size=img_size, **kwargs)
    except TypeError as exc:
        if "img_size" not in str(exc):
            raise
    return timm.create_model(name, num_classes=num_classes, **kwargs)


def conv_norm_layers(model: nn.Module) -> dict[str, nn.Module]:
    """Every convolutional norm layer of ``model`` by qualified name."""
    return {n: m for n, m in model.named_modules() if isinstance(m, CONV_NORM_TYPES)}


def check_norm_choices(
    model: nn.Module,
    *,
    model_name: str,
    norms: Collection[str],
    groups: Collection[int],
    chosen_by: str = "",
) -> None:
    """That every norm in ``norms`` swaps into ``model`` and every group count divides every
    conv norm layer's channels: for one run and for the search's preflight (``chosen_by``)."""
    swapped = sorted(set(norms) - {"native"})
    unknown = [n for n in swapped if n not in _PLAIN]
    if unknown:
        raise TunerError(
            f"norm={unknown[0]!r} cannot be swapped in; use one of {', '.join(_PLAIN)}."
        )
    layers = conv_norm_layers(model)
    if swapped and not layers:
        raise TunerError(
            f"norm={'/'.join(swapped)}{chosen_by} changes nothing: {model_name} has no "
            "convolutional norm layers; use norm=native, or a model with a conv stem or "
            "backbone (e.g. vit_small_r26_s32_224, resnet50)."
        )
    if "group" not in swapped:
        return
    channels = {name: _channels(layer) for name, layer in layers.items()}
    common = functools.reduce(math.gcd, channels.values())
    fits = [d for d in range(1, common + 1) if common % d == 0]
    for g in groups:
        bad = next((name for name, c in channels.items() if c % g), None)
        if bad is not None:
            raise TunerError(
                f"gn_groups={g}{chosen_by} does not divide the {channels[bad]} channels of layer "
                f"{bad!r}; use one of {', '.join(map(str, fits))} (divides every layer)."
            )


def _replacement(old: nn.Module, norm: str, groups: int) -> nn.Module:
    channels = _channels(old)
    act = getattr(old, "act", None)
    if isinstance(act, nn.Module):
        new = _WITH_ACT[norm](channels, groups)
        new.act, new.drop = act, old.drop
    else:
        new = _PLAIN[norm](channels, groups)
    weight, bias = getattr(old, "weight", None), getattr(old, "bias", None)
    if weight is not None and bias is not None and new.weight is not None:
        with torch.no_grad():
            new.weight.copy_(weight)
            new.bias.copy_(bias)
    return new


def _channels(layer: nn.Module) -> int:
    if isinstance(layer, nn.BatchNorm2d):
        return layer.num_features
    if isinstance(layer, nn.GroupNorm):
        return layer.num_channels
    return int(layer.normalized_shape[0])


def _set_module(model: nn.Module, name: str, module: nn.Module) -> None:
    # nn.Module.set_submodule is torch >= 2.5; pyproject allows 2.4.
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, module)
