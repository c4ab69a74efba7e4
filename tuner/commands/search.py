"""``tuner search SPACE``: Ray Tune trials driven by Optuna, under a memory budget."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from tuner.api import OBJECTIVES, SAMPLERS, WORKLOAD_CHOICES, SearchOptions
from tuner.commands import _flags
from tuner.errors import TunerError
from tuner.record import MAX_MEMORY_BYTES, TARGET_ACCURACY
from tuner.units import parse_memory_size

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
    parser.add_argument(
        "space", nargs="?", help="space name (python -m tuner spaces) or path to a .py file"
    )
    _add_budget_flags(parser.add_argument_group("budget and objective"))
    _add_workload_flags(parser.add_argument_group("workload (what each trial trains)"))
    _add_resource_flags(parser.add_argument_group("resources and cluster"))
    _add_experiment_flags(parser.add_argument_group("experiment"))
    parser.set_defaults(run=run)


def _add_budget_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--num-samples", type=int, help="number of trials (default: the space's)")
    group.add_argument(
        "--search-time-budget-s",
        type=float,
        metavar="SECONDS",
        help="stop the whole search, running trials included, once its trials have run this "
        "long, every --resume of it together (each trial's own training time: --time-budget-s)",
    )
    _option(
        group,
        "--objective",
        choices=OBJECTIVES,
        help="pareto: maximize throughput and accuracy (default)",
    )
    _option(group, "--sampler", choices=SAMPLERS, help="Optuna sampler")
    _option(
        group,
        "--seed",
        type=int,
        help="random seed (of the sampler, the start-up design and every trial's run; default 0)",
    )
    group.add_argument(
        "--max-memory",
        dest=MAX_MEMORY_BYTES,  # the SearchOptions field
        type=_memory_size,
        metavar="SIZE",
        help="memory budget per trial, e.g. 20GiB (a constraint for Optuna)",
    )
    group.add_argument(
        "--no-early-stopping",
        dest="early_stopping",
        action="store_false",
        help="run every trial to its end (default: stop trials ranked outside the best third "
        "at each rung: by non-dominated rank for pareto, by the metric otherwise)",
    )


def _add_workload_flags(group: argparse._ArgumentGroup) -> None:
    _option(
        group,
        "--workload",
        choices=WORKLOAD_CHOICES,
        help="which declared workload: auto = gpu if trials get a GPU",
    )
    for name in WORKLOAD_FLAGS:  # spelled as `tuner train` spells them
        _flags.add_config_flag(group, name)
    _flags.add(
        group,
        "--set",
        detail="a field the space samples is fixed to VALUE and leaves the space: every trial "
        "runs it, the start line says so",
    )
    _option(
        group,
        "--probe-steps",
        type=int,
        help="measured steps of each speed-probe run (default 5)",
    )
    _option(
        group,
        "--probe-share",
        type=_share,
        help="the share of the trials' time the speed probes may take, all trials together "
        "(default 0.2 = 20%%): a knob left unprobed for want of it keeps its default and is "
        "recorded as not probed; later trials probe what is left; off: no bound",
    )
    _option(
        group,
        "--feasibility-steps",
        type=int,
        help="measured steps before each run's feasibility check, which stops a run over the "
        "memory budget (default 5)",
    )
    _option(
        group,
        "--speed-repeats",
        type=int,
        help="interleaved repeats of the speed probes that choose the accuracy-neutral knobs "
        "per training config (default 2: enough to choose by estimate; 3 or more also tells "
        "which gains are beyond noise; 0: no probes, those knobs stay as the space sets them)",
    )
    group.add_argument(
        "--fresh-probes",
        action="store_true",
        help="probe every training config again instead of reusing the speed probes earlier "
        "searches on this machine remembered (in $TUNER_CACHE_DIR, else the user cache folder, "
        "e.g. ~/.cache/tuner); the new probes replace them",
    )


def _add_resource_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--concurrency", type=int, help="max parallel trials (default: #GPUs, or 1 per node on CPU)"
    )
    group.add_argument(
        "--gpus-per-trial",
        type=float,
        help="default 1 where GPUs exist; a fraction shares GPUs (reported)",
    )
    group.add_argument("--cpus-per-trial", type=float, help="default: a node's cores per trial")
    group.add_argument("--address", help="join a Ray cluster (host:port, auto; or RAY_ADDRESS)")
    _option(
        group,
        "--world-size",
        type=int,
        help="each trial's data-parallel world size: N workers (DDP, kept warm across trials); "
        "CPUs/GPUs per trial are then per worker (default 1: one process per trial)",
    )
    group.add_argument(
        "--spread-workers",
        action="store_true",
        help="place a trial's workers on different nodes (default: packed on one node)",
    )
    _option(
        group,
        "--max-failures",
        type=int,
        help="retries of a crashed trial (from its checkpoint)",
    )
    _option(
        group,
        "--checkpoint-every-s",
        type=float,
        help="a trial checkpoints at its first evaluation, then at the first one this many "
        "seconds after its last checkpoint, and at its end: what a crashed trial trains again "
        "(0: at every evaluation; default 10)",
    )


def _add_experiment_flags(group: argparse._ArgumentGroup) -> None:
    _flags.add(group, "--name", detail="default: SPACE-DATE-TIME")
    _flags.add(group, "--storage", default=argparse.SUPPRESS)  # as _option's
    _flags.add(group, "--reports-dir", default=argparse.SUPPRESS)
    group.add_argument(
        "--resume", action="store_true", help="continue the interrupted experiment --name"
    )
    group.add_argument(
        "--warm-start",
        metavar="EXPERIMENT",
        help="start the study with the finished trials of an earlier experiment of the same "
        "space and workload (its name under --storage, or its folder): the sampler learns "
        "from them and the start-up design skips what they cover",
    )
    _option(
        group,
        "--remeasure-top",
        type=int,
        help="re-measure this many top candidates after the search (more when both ends of "
        "the front and the soonest to the target need it; the search says so)",
    )
    _flags.add_config_flag(
        group,
        TARGET_ACCURACY,  # the run's field, and every trial's target in the trials table
        default="derived from the candidates: the lower of the most accurate's lower 95%% "
        "bound and their median accuracy; every trial's time to it is measured, and the "
        "default recommendation is the config that reaches it soonest",
    )
    _add_after_trials_flags(group)
    group.add_argument("--no-report", action="store_true", help="skip writing the report")
    group.add_argument(
        "--mlflow",
        metavar="URI",
        help="also log every trial to this MLflow tracking URI (sqlite:///mlflow.db, "
        "http://host:5000, ...) and the report to a parent run; needs pip install "
        "'train-tuner[mlflow]'. Off by default: nothing leaves the machine",
    )
    group.add_argument(
        "--wandb",
        metavar="PROJECT",
        help="also log every trial as a W&B run of this project, offline, into the experiment "
        "folder's wandb/ (upload later with wandb sync); needs pip install "
        "'train-tuner[wandb]'",
    )
    _flags.add(group, "--verbose", detail="also Ray Tune's own progress")
    _flags.add(group, "--json")


def _add_after_trials_flags(group: argparse._ArgumentGroup) -> None:
    """What runs after the trials: the re-measurement, the seed retraining, the effects."""
    _option(
        group,
        "--remeasure-repeats",
        type=int,
        help="interleaved rounds of the re-measurement, at least (default 8)",
    )
    _option(
        group,
        "--remeasure-max-repeats",
        type=int,
        help="at most this many rounds; it stops earlier (at round 8, 12, 16) once every "
        "interval is within +-3 %% (default 20)",
    )
    _option(
        group,
        "--effects-repeats",
        type=int,
        help="at most this many rounds of the controlled technique effects around the "
        "recommended config, ended like the re-measurement (0: skip them; default 20)",
    )
    _option(
        group,
        "--trust-budget",
        metavar="SECONDS|SHARE",
        help="time for the re-measurement, the seed retraining and the effects together: "
        "seconds (90), a share of the whole command (25%%, the default), or off; their first "
        "rounds (3 pairs, 3 seeds) run even past it",
    )


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(SearchOptions)}
# The fields whose default a command line can type (--objective pareto): their flags are left
# out of the parsed namespace unless given (_option), so that a resume tells "given, at the
# default" (applied, or refused) from "not given" (the experiment's own kept). Any other flag is
# given exactly when it differs from its default: a switch, or a default no one can type (None).
_TYPED_DEFAULTS = frozenset(
    name
    for name, default in _DEFAULTS.items()
    if isinstance(default, str | int | float) and not isinstance(default, bool)
)


def _option(group: argparse._ArgumentGroup, flag: str, **spec: Any) -> None:
    """The flag of the :class:`SearchOptions` field of the same name (whose default applies
    when it is not given: _TYPED_DEFAULTS)."""
    group.add_argument(flag, default=argparse.SUPPRESS, **spec)


def _share(text: str) -> float | None:
    """``0.2``, ``20%``, or ``off`` (no bound)."""
    if text == "off":
        return None
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share (0.2, 20%, or off)") from None


def _memory_size(text: str) -> int:
    try:
        return parse_memory_size(text)
    except TunerError as exc:  # argparse prints ArgumentTypeError as one usage line
        raise argparse.ArgumentTypeError(str(exc)) from None


def options_from_args(args: argparse.Namespace) -> SearchOptions:
    """The CLI flags as :class:`SearchOptions` (one to one: each flag's dest is the field)."""
    if not args.space and not args.resume:
        raise TunerError("Name a search space (python -m tuner spaces) or a .py file.")
    given = {key: value for key, value in vars(args).items() if key in _DEFAULTS}
    overrides = {key: getattr(args, key) for key in WORKLOAD_FLAGS if hasattr(args, key)}
    given["space"] = args.space or ""
    given["overrides"] = {**overrides, **_flags.parse_sets(args.set)}
    repeats = given.get("remeasure_repeats", _DEFAULTS["remeasure_repeats"])
    most = given.get("remeasure_max_repeats", _DEFAULTS["remeasure_max_repeats"])
    given["remeasure_max_repeats"] = max(most, repeats)
    return SearchOptions(**given)


def given_fields(args: argparse.Namespace) -> frozenset[str]:
    """The :class:`SearchOptions` fields the command line set (what a resume compares with
    the experiment's own; a field left out keeps the experiment's)."""
    fields = {
        key
        for key, value in vars(args).items()
        if key in _DEFAULTS and (key in _TYPED_DEFAULTS or value != _DEFAULTS[key])
    }
    fields.discard("space")  # the positional: set when named
    if args.space:
        fields.add("space")
    if args.set or any(hasattr(args, key) for key in WORKLOAD_FLAGS):
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
    """The search's ``--json``: its state first; interrupted, the exit code and the command
    that continues it (the summary's)."""
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
