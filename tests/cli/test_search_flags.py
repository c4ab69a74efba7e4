"""``tuner search``'s flags, generated from :class:`SearchOptions`' fields: none lost, each
bad value one line and exit 2 before anything runs, and the API taking the same names."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from tuner.commands import build_parser, main
from tuner.errors import TunerError
from tuner.experiment.options import SearchOptions

# The flags of `tuner search` before they were generated (2026-11-29): a flag may be added,
# none may go.
FLAGS_BEFORE = frozenset((
    "--address", "--checkpoint-every-s", "--concurrency", "--cpus-per-trial", "--data",
    "--effects-repeats", "--epochs", "--feasibility-steps", "--fresh-probes", "--gpus-per-trial",
    "--help", "--images", "--img-size", "--json", "--max-failures", "--max-memory", "--mlflow",
    "--model", "--name", "--no-early-stopping", "--no-report", "--num-samples", "--objective",
    "--probe-share", "--probe-steps", "--remeasure-max-repeats", "--remeasure-repeats",
    "--remeasure-top", "--reports-dir", "--resume", "--sampler", "--search-time-budget-s",
    "--seed", "--set", "--speed-repeats", "--spread-workers", "--steps", "--storage",
    "--target-accuracy", "--time-budget-s", "--trust-budget", "--verbose", "--wandb",
    "--warm-start", "--workload", "--world-size", "-h", "-v"
))  # fmt: skip
# The keyword arguments of tuner.search() (SearchOptions' fields) before, likewise.
FIELDS_BEFORE = frozenset((
    "space", "name", "storage", "reports_dir", "no_report", "num_samples", "search_time_budget_s",
    "objective", "sampler", "seed", "max_memory_bytes", "concurrency", "gpus_per_trial",
    "cpus_per_trial", "address", "world_size", "spread_workers", "resume", "max_failures",
    "checkpoint_every_s", "workload", "overrides", "probe_steps", "speed_repeats", "probe_share",
    "feasibility_steps", "fresh_probes", "warm_start", "early_stopping", "remeasure_top",
    "target_accuracy", "remeasure_repeats", "remeasure_max_repeats", "effects_repeats",
    "trust_budget", "mlflow", "wandb", "verbose"
))  # fmt: skip


def _search_parser() -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a.choices, dict))
    return action.choices["search"]


def test_no_flag_and_no_api_keyword_is_lost() -> None:
    flags = {s for a in _search_parser()._actions for s in a.option_strings}
    assert flags >= FLAGS_BEFORE, sorted(FLAGS_BEFORE - flags)
    fields = {f.name for f in dataclasses.fields(SearchOptions)}
    assert fields >= FIELDS_BEFORE, sorted(FIELDS_BEFORE - fields)


def test_every_option_has_its_flag_and_the_defaults_are_the_fields() -> None:
    dests = {a.dest for a in _search_parser()._actions}
    # space is the positional; overrides are --set and the run settings' own flags.
    assert {f.name for f in dataclasses.fields(SearchOptions)} - dests == {"overrides"}
    assert _search_parser().format_help().count("default") > 10  # the defaults are said


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--objective", "speed"], "--objective"),
        (["--sampler", "cmaes"], "--sampler"),
        (["--workload", "tpu"], "--workload"),
        (["--num-samples", "0"], "--num-samples 0 must be positive"),
        (["--num-samples", "x"], "--num-samples"),
        (["--search-time-budget-s", "-1"], "--search-time-budget-s -1.0 must be positive"),
        (["--concurrency", "0"], "--concurrency 0 must be positive"),
        (["--cpus-per-trial", "0"], "--cpus-per-trial 0.0 must be positive"),
        (["--world-size", "0"], "--world-size 0 must be positive"),
        (["--probe-steps", "0"], "--probe-steps 0 must be positive"),
        (["--feasibility-steps", "0"], "--feasibility-steps 0 must be positive"),
        (["--gpus-per-trial", "1.5"], "--gpus-per-trial above 1 must be a whole number"),
        (["--gpus-per-trial", "-1"], "--gpus-per-trial -1.0 must be 0 or more"),
        (["--speed-repeats", "-1"], "--speed-repeats -1 must be 0"),
        (["--effects-repeats", "-1"], "--effects-repeats -1 must be 0"),
        (["--checkpoint-every-s", "-0.5"], "--checkpoint-every-s -0.5 must be 0 or more"),
        (["--max-failures", "-1"], "--max-failures"),
        (["--remeasure-top", "-1"], "--remeasure-top"),
        (["--remeasure-repeats", "0"], "--remeasure-repeats"),
        (["--remeasure-repeats", "9", "--remeasure-max-repeats", "5"], "max-repeats 5 is below"),
        (["--probe-share", "1.5"], "--probe-share 1.5 must be"),
        (["--probe-share", "half"], "--probe-share"),
        (["--target-accuracy", "1.5"], "--target-accuracy 1.5 must be in (0, 1]"),
        (["--trust-budget", "soon"], "--trust-budget 'soon': give seconds"),
        (["--trust-budget", "100%"], "--trust-budget '100%'"),
        (["--trust-budget", "-5"], "--trust-budget '-5'"),
        (["--max-memory", "20GB/s"], "--max-memory"),
        (["--max-memory", "0MiB"], "--max-memory"),
        (["--resume"], "--resume needs --name"),
        (["--name", "a/b"], "no slashes"),
        (["--wandb", "a/b"], "--wandb 'a/b' must be a W&B project name"),
        (["--mlflow", " "], "--mlflow needs a tracking URI"),
        (["--set", "lr"], "KEY=VALUE"),
        (["--set", "lr=abc"], "lr must be a finite number"),
    ],
)
def test_a_bad_search_flag_is_one_line_and_exit_2_before_anything_runs(
    flags: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "smoke_space", "--storage", str(tmp_path), *flags]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert named in err[0] and "Traceback" not in err[0], err
    assert not any(tmp_path.iterdir())  # nothing ran


def test_a_remeasure_max_below_the_repeats_given_is_refused_not_raised() -> None:
    """--remeasure-repeats alone lifts the default max to it; both given and contradictory are
    a usage error (the max was lifted silently: a whole search ran on flags it overruled)."""
    from tuner.commands.search import options_from_args

    def options(*flags: str) -> SearchOptions:
        return options_from_args(_search_parser().parse_args(["smoke_space", *flags]))

    assert options("--remeasure-repeats", "30").remeasure_max_repeats == 30
    assert options("--remeasure-max-repeats", "9").remeasure_max_repeats == 9
    with pytest.raises(TunerError, match=r"^--remeasure-max-repeats 5 is below --remeasure-rep"):
        options("--remeasure-repeats", "10", "--remeasure-max-repeats", "5")


def test_the_api_checks_its_keywords_as_the_command_checks_its_flags(tmp_path: Path) -> None:
    import tuner

    with pytest.raises(tuner.TunerError, match=r"^--num-samples '3' must be a whole number\.$"):
        tuner.search("smoke_space", storage=str(tmp_path), num_samples="3")
    with pytest.raises(tuner.TunerError, match=r"^--speed-repeats -1 must be 0 or more: 0 turns"):
        tuner.search("smoke_space", storage=str(tmp_path), speed_repeats=-1)
    assert not any(tmp_path.iterdir())
