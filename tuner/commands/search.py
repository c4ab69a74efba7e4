"""``tuner search SPACE``: Ray Tune trials driven by Optuna, under a memory budget."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tuner.api import SearchOptions
from tuner.commands import _flags
from tuner.errors import TunerError
from tuner.experiment.options import NUMBERS
from tuner.record import TARGET_ACCURACY

if TYPE_CHECKING:
    from tuner.api import SearchResult

# The TrainConfig fields that have their own override flag (any other: --set KEY=VALUE).
WORKLOAD_FLAGS = ("model", "data", "img_size", "epochs", "images", "steps", "time_budget_s")

_EPILOG = """\
workload: every space declares a small 'cpu' workload (runs on a laptop in minutes) and a
realistic 'gpu' one; --workload auto picks 'gpu' when trials get a GPU. The override flags
(--model, --data, --img-size, --steps, --epochs, --time-budget-s, --set KEY=VALUE) replace
single fields of the chosen workload, e.g.:
  python -m tuner search vit_space
  python -m tuner search vit_space --workload gpu --data imagefolder:/data/imagenette
  python -m tuner search resnet_space --max-memory 20GiB --num-samples 60 --objective pareto
  python -m tuner search my_space.py --search-time-budget-s 3600 --sampler gp
  python -m tuner search --resume --name vit_space-20250101-120000

exit codes: 0 finished with at least one usable trial; 1 finished with none, or a runtime
error (e.g. the Ray cluster was lost: the message says how to --resume); 2 usage error;
130 interrupted, 143 terminated by SIGTERM (either way: continue with --resume).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search training settings with Ray Tune + Optuna (throughput vs accuracy)",
        description="Run a Ray Tune search in which every trial is a real training run, "
        "driven by Optuna's samplers, for the best throughput/accuracy trade-off that fits "
        "a memory budget. Prints the best configurations and where the results are.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group: argparse._ActionsContainer = parser
    for option in dataclasses.fields(SearchOptions):  # in --help's order
        if option.metadata["flag"].section:
            group = parser.add_argument_group(option.metadata["flag"].section)
        _add_flag(group, option)
    _flags.add(group, "--json")
    parser.set_defaults(run=run)


def _add_flag(group: argparse._ActionsContainer, option: dataclasses.Field[Any]) -> None:
    """The flag of one :class:`SearchOptions` field, from its ``Flag``. Left out of the
    namespace unless given: a resume tells "given, even at the default" from "not given"."""
    spec, flag = option.metadata["flag"], SearchOptions.flag(option.name)
    help_text = spec.help.replace("%", "%%")  # argparse formats the help with %
    if option.name == "space":
        group.add_argument("space", nargs="?", help=help_text)
        return
    if option.name == "overrides":
        for name in WORKLOAD_FLAGS:  # spelled as `tuner train` spells them
            _flags.add_config_flag(group, name)
    if option.name == TARGET_ACCURACY:  # the run's setting, every trial's target in the table
        _flags.add_config_flag(group, option.name, default=help_text)
    elif flag in _flags.SHARED:
        _flags.add(group, flag, detail=help_text or None, default=argparse.SUPPRESS)
    else:
        group.add_argument(
            flag,
            dest=option.name,
            default=argparse.SUPPRESS,
            help=help_text + _default_said(option),
            **_kind(option, spec),
        )


def _default_said(option: dataclasses.Field[Any]) -> str:
    """`` (default: X)`` where the help does not say it and X can be typed."""
    default = option.default
    if default is None or isinstance(default, bool) or "default" in option.metadata["flag"].help:
        return ""
    return f" (default: {default})".replace("%", "%%")


def _kind(option: dataclasses.Field[Any], spec: Any) -> dict[str, Any]:
    """A flag's action, or its type and metavar, from its field."""
    if isinstance(option.default, bool):
        return {"action": "store_false" if option.default else "store_true"}
    if spec.choices:
        return {"choices": spec.choices}
    parse = spec.parse and _argument_type(spec.parse)
    return {"type": parse or NUMBERS.get(option.name), "metavar": spec.metavar}


def _argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as argparse's type: its error is argparse's one usage line."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except TunerError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


_FIELDS = frozenset(SearchOptions.__dataclass_fields__)


def options_from_args(args: argparse.Namespace) -> SearchOptions:
    """The CLI flags as :class:`SearchOptions` (one to one: each flag's dest is the field)."""
    if not args.space and not getattr(args, "resume", False):
        raise TunerError("Name a search space (python -m tuner spaces) or a .py file.")
    given = {key: value for key, value in vars(args).items() if key in _FIELDS}
    overrides = {key: getattr(args, key) for key in WORKLOAD_FLAGS if hasattr(args, key)}
    given["space"] = args.space or ""
    given["overrides"] = {**overrides, **_flags.parse_sets(getattr(args, "set", ()))}
    if "remeasure_max_repeats" not in given:  # --remeasure-repeats above the default max
        default = SearchOptions.__dataclass_fields__["remeasure_max_repeats"].default  # lifts it
        given["remeasure_max_repeats"] = max(default, given.get("remeasure_repeats", default))
    return SearchOptions(**given)  # both given: the options check that they agree


def given_fields(args: argparse.Namespace) -> frozenset[str]:
    """The :class:`SearchOptions` fields the command line set (what a resume compares)."""
    fields = {key for key in vars(args) if key in _FIELDS} - {"space"}
    if args.space:
        fields.add("space")
    if getattr(args, "set", None) or any(hasattr(args, key) for key in WORKLOAD_FLAGS):
        fields.add("overrides")
    return frozenset(fields)


def run(args: argparse.Namespace) -> int:
    """0: finished with a usable trial; 1: finished with none; 130 or 143: interrupted."""
    options = options_from_args(args)  # a bad flag fails before even pandas loads
    from tuner.api import run_options

    result = run_options(options, given=given_fields(args))
    code = result.exit_code
    if args.json:
        _flags.print_json(_result_json(result, code, storage=options.storage))
    return code  # interrupted: 130 on Ctrl-C, 143 on SIGTERM


def _result_json(result: SearchResult, code: int, *, storage: str) -> dict[str, Any]:
    """The search's ``--json``: its state first; interrupted, its exit code and how to resume."""
    from tuner.commands.report import result_json
    from tuner.experiment.paths import ExperimentPaths

    value = {
        "status": result.state,
        **result_json(result.experiment, result.answer, result.report_dir),
    }
    if result.state != "finished":
        paths = ExperimentPaths.of(storage, result.experiment_dir.name)
        value.update(exit_code=code, resume=paths.resume_command())
    return value
