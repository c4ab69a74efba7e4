"""The flags that more than one command takes, each defined once, so one name means one thing:
the run settings (one flag per ``TrainConfig`` field, spelled, typed and explained from the
field) and the shared flags of :data:`SHARED`. Nothing here imports torch, pandas or Ray.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal, get_args, get_origin

from tuner.api import DEFAULT_REPORTS_DIR, DEFAULT_STORAGE
from tuner.config import config_fields, field_help, field_type
from tuner.errors import TunerError
from tuner.units import json_ready

__all__ = [
    "SHARED",
    "add",
    "add_config_flag",
    "config_flag",
    "parse_sets",
    "print_json",
    "run_settings",
    "skip_list",
]


# The shared flags: one spelling, one meaning each. A command adds one with :func:`add`, giving
# only what differs by command (its default, what it covers) as the help's parenthesis.
SHARED: dict[str, dict[str, Any]] = {
    "--set": {
        "action": "append",
        "default": [],
        "metavar": "KEY=VALUE",
        "help": "any other TrainConfig field (JSON value), repeatable",
    },
    "--out": {"metavar": "DIR", "help": "the folder this command writes its files into"},
    "--reports-dir": {
        "metavar": "DIR",
        "default": DEFAULT_REPORTS_DIR,
        "help": f"the reports root: the report goes to DIR/NAME (default: {DEFAULT_REPORTS_DIR})",
    },
    "--name": {"help": "the run's name: the name of its folders (under --storage, --reports-dir)"},
    "--storage": {
        "metavar": "DIR",
        "default": DEFAULT_STORAGE,
        "help": f"folder or URI (s3://...) where experiments live (default: {DEFAULT_STORAGE})",
    },
    "--json": {
        "action": "store_true",
        "help": "print the result as one JSON document, the last line of stdout",
    },
    "--skip": {"default": "", "metavar": "A,B", "help": "comma list of ladder steps to leave out"},
    "--repeats": {"type": int, "metavar": "N", "help": "interleaved repeats of each measured arm"},
    "--verbose": {"action": "store_true", "help": "say more"},
}


def add(
    parser: argparse._ActionsContainer, flag: str, *, detail: str | None = None, **spec: Any
) -> None:
    """Add the shared ``flag``; ``detail`` goes in parentheses after its meaning."""
    spec = {**SHARED[flag], **spec}
    if detail is not None:
        spec["help"] += f" ({detail})"
    parser.add_argument(*((flag, "-v") if flag == "--verbose" else (flag,)), **spec)


def add_config_flag(
    group: argparse._ActionsContainer, name: str, *, default: str | None = None
) -> None:
    """The flag of one ``TrainConfig`` field, from the field; left out of the namespace unless
    given, so a command's own workload keeps its values. ``default``: what applies unset."""
    kwargs = dict(dest=name, default=argparse.SUPPRESS, **_flag_kwargs(name))
    help_text = field_help(name) + ("" if default is None else f" (default: {default})")
    group.add_argument(config_flag(name), help=help_text, **kwargs)


def config_flag(name: str) -> str:
    """The command-line spelling of a ``TrainConfig`` field: ``img_size`` -> ``--img-size``."""
    return "--" + name.replace("_", "-")


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The run-setting flags that were given: ``TrainConfig`` field -> value."""
    return {k: v for k, v in vars(args).items() if k in config_fields()}


def parse_sets(items: Iterable[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as settings; a value that is not JSON is a string (amp=bf16)."""
    settings: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise TunerError(f"--set {item!r} must look like KEY=VALUE, e.g. --set lr=0.001.")
        try:
            settings[key] = json.loads(text)
        except json.JSONDecodeError:
            settings[key] = text
    return settings


def print_json(value: Any) -> None:
    """The ``--json`` result: one line, the last of stdout (NaN and infinities as null)."""
    print(json.dumps(json_ready(value), default=_null_or_text, allow_nan=False), flush=True)


def _null_or_text(value: Any) -> Any:
    """What ``json_ready`` leaves: pandas' missing value is null, any other object its text."""
    return None if type(value).__name__ == "NAType" else str(value)


def skip_list(text: str, *, valid: Sequence[str]) -> list[str]:
    """The ``--skip`` list, every entry checked against ``valid``."""

    entries = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in entries if s not in valid]
    if unknown:
        raise TunerError(f"--skip {', '.join(unknown)} unknown; choose from {', '.join(valid)}.")
    return entries


def _flag_kwargs(name: str) -> dict[str, Any]:
    base, optional = field_type(name)
    if get_origin(base) is Literal:
        return {"choices": list(get_args(base))}
    if base is bool:
        return {"action": argparse.BooleanOptionalAction}
    if get_origin(base) is not None:  # Mapping[str, Any]
        return {"type": _json_object, "metavar": "JSON"}
    return {"type": _optional(base) if optional else base, "metavar": base.__name__.upper()}


def _optional(convert: type) -> Any:
    def parse(text: str) -> Any:
        return None if text.lower() == "none" else convert(text)

    parse.__name__ = convert.__name__  # argparse names the type in its error messages
    return parse


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value
