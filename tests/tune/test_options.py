"""Options, memory sizes and the CLI flags that map onto them."""

from __future__ import annotations

import dataclasses

import pytest

from tuner.commands import build_parser
from tuner.commands.search import options_from_args
from tuner.errors import TunerError
from tuner.tune import SearchOptions
from tuner.units import format_bytes, parse_memory_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("20GiB", 20 * 2**30),
        ("512MiB", 512 * 2**20),
        ("1.5GB", 1_500_000_000),
        ("300 mib", 300 * 2**20),
        ("4096", 4096),
        ("2KiB", 2048),
    ],
)
def test_memory_sizes_parse(text: str, size: int) -> None:
    assert parse_memory_size(text) == size


@pytest.mark.parametrize("text", ["", "GiB", "20 GiBs", "-1GiB", "0MiB", "twenty", "1e3MB"])
def test_bad_memory_size_is_one_clear_error(text: str) -> None:
    with pytest.raises(TunerError, match=r"Memory size|must be positive"):
        parse_memory_size(text)


def test_format_bytes() -> None:
    assert format_bytes(1.5 * 2**30) == "1.5 GiB"
    assert format_bytes(300 * 2**20) == "300.0 MiB"
    assert format_bytes(None) == "n/a" and format_bytes(float("nan")) == "n/a"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"objective": "speed"}, "--objective"),
        ({"sampler": "cmaes"}, "--sampler"),
        ({"workload": "tpu"}, "--workload"),
        ({"num_samples": 0}, "--num-samples"),
        ({"gpus_per_trial": 1.5}, "whole number"),
        ({"resume": True}, "--resume needs --name"),
        ({"name": "a/b"}, "no slashes"),
        ({"gpus_per_trial": -1}, "--gpus-per-trial -1 must be 0 or more"),
        ({"effects_repeats": -1}, "--effects-repeats -1 must be 0"),
        ({"checkpoint_every_s": -0.5}, "--checkpoint-every-s -0.5 must be 0 or more"),
        ({"max_failures": -1}, "--max-failures -1 must be 0 or more"),
        ({"remeasure_repeats": 0}, "--remeasure-repeats 0 must be 1 or more"),
        (
            {"probe_share": 1.5},
            r"--probe-share 1.5 must be in \[0, 1\]: a share of the trials' time",
        ),
        ({"num_samples": "12"}, "--num-samples '12' must be a whole number"),  # the API's
        ({"num_samples": True}, "--num-samples True must be a whole number"),
        ({"checkpoint_every_s": "soon"}, "--checkpoint-every-s 'soon' must be a number"),
        ({"remeasure_max_repeats": 2, "remeasure_repeats": 3}, "is below --remeasure-repeats 3"),
        ({"trust_budget": "soon"}, "--trust-budget 'soon': give seconds"),
        ({"trust_budget": "100%"}, "--trust-budget '100%'"),
        ({"trust_budget": "-5"}, "--trust-budget '-5'"),
    ],
)
def test_impossible_options_are_one_clear_error(changes: dict, message: str) -> None:
    with pytest.raises(TunerError, match=message):
        SearchOptions(space="smoke_space", **changes)


def test_the_api_takes_numpy_s_numbers_and_a_whole_number_for_a_float() -> None:
    import numpy as np

    options = SearchOptions(
        space="smoke_space", num_samples=np.int64(3), search_time_budget_s=60, probe_share=0.5
    )
    assert (options.num_samples, options.search_time_budget_s) == (3, 60)


def test_cli_flags_map_to_options() -> None:
    args = build_parser().parse_args(
        [
            "search",
            "vit_space",
            "--max-memory",
            "20GiB",
            "--objective",
            "accuracy",
            "--sampler",
            "gp",
            "--num-samples",
            "12",
            "--search-time-budget-s",
            "600",
            "--workload",
            "gpu",
            "--model",
            "vit_small_r26_s32_224",
            "--img-size",
            "224",
            "--time-budget-s",
            "90",
            "--set",
            "amp=bf16",
            "--set",
            "warmup_steps=10",
            "--gpus-per-trial",
            "0.5",
            "--concurrency",
            "4",
            "--name",
            "run1",
        ]
    )
    options = options_from_args(args)
    assert options.max_memory_bytes == 20 * 2**30
    assert (options.objective, options.sampler, options.num_samples) == ("accuracy", "gp", 12)
    assert options.search_time_budget_s == 600 and options.workload == "gpu"
    assert options.overrides == {
        "model": "vit_small_r26_s32_224",
        "img_size": 224,
        "time_budget_s": 90.0,
        "amp": "bf16",
        "warmup_steps": 10,
    }
    assert options.gpus_per_trial == 0.5 and options.concurrency == 4


def test_bad_set_flag_is_one_clear_error() -> None:
    args = build_parser().parse_args(["search", "vit_space", "--set", "lr"])
    with pytest.raises(TunerError, match="KEY=VALUE"):
        options_from_args(args)


def test_search_help_shows_the_workload_override(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "--help"])
    text = capsys.readouterr().out
    for flag in ("--workload", "--model", "--data", "--img-size", "--time-budget-s"):
        assert flag in text


def test_resuming_an_unknown_experiment_is_one_clear_error(tmp_path) -> None:
    from tuner.tune import SearchDriver

    options = SearchOptions(space="", name="nothing", storage=str(tmp_path), resume=True)
    with pytest.raises(TunerError, match="No experiment 'nothing'"):
        SearchDriver(options).run()


def test_reusing_an_experiment_name_without_resume_is_one_clear_error(tmp_path) -> None:
    from tuner.tune import SearchDriver

    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "tuner_experiment.json").write_text("{}")
    options = SearchOptions(space="smoke_space", name="taken", storage=str(tmp_path))
    with pytest.raises(TunerError, match=r"already exists.*--resume"):
        SearchDriver(options).run()


def test_bad_max_memory_flag_is_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "vit_space", "--max-memory", "20GB/s"])
    err = capsys.readouterr().err.strip().splitlines()
    assert "argument --max-memory: Memory size '20GB/s' is not understood" in err[-1]


def test_a_resume_reads_an_older_tuner_s_options_and_says_what_it_ignores(tmp_path, capsys):
    import dataclasses

    from tuner.experiment import write_metadata
    from tuner.experiment.options import options_to_resume
    from tuner.experiment.paths import ExperimentPaths

    paths = ExperimentPaths.of(str(tmp_path), "old")
    saved = {**dataclasses.asdict(SearchOptions(space="vit_space")), "overrides": {}}
    del saved["search_time_budget_s"]
    saved.update(time_budget_s=600.0, gone_flag=3)  # an earlier name, and a removed option
    write_metadata(paths.local, {"options": saved})
    options = options_to_resume(paths.local, SearchOptions(space="", resume=True, name="old"))
    assert options.search_time_budget_s == 600.0 and options.resume
    assert "'gone_flag'" in capsys.readouterr().err


def test_a_resume_keeps_the_experiment_s_options_and_says_what_it_changes(tmp_path, capsys):
    from tuner.experiment import write_metadata
    from tuner.experiment.options import options_record, options_to_resume
    from tuner.experiment.paths import ExperimentPaths

    paths = ExperimentPaths.of(str(tmp_path), "kept")
    started = SearchOptions(space="vit_space", name="kept", reports_dir="mine", no_report=True)
    write_metadata(paths.local, {"options": options_record(started)})
    plain = options_to_resume(paths.local, SearchOptions(space="", resume=True, name="kept"))
    assert (plain.reports_dir, plain.no_report, plain.resume) == ("mine", True, True)
    assert capsys.readouterr().err == ""  # nothing changed, nothing said
    command = paths.resume_command()
    assert command.endswith("--reports-dir mine --no-report"), command

    given = SearchOptions(space="", resume=True, name="kept", reports_dir="other")
    assert options_to_resume(paths.local, given).reports_dir == "other"
    assert "note: --reports-dir other applies from this resume on." in capsys.readouterr().err
    with pytest.raises(TunerError, match=r"^--max-memory 1000 cannot change on --resume"):
        options_to_resume(paths.local, dataclasses.replace(given, max_memory_bytes=1000))
    # How often trials checkpoint is no part of what is searched: it can change, and is shown.
    every = dataclasses.replace(given, reports_dir="mine", checkpoint_every_s=0.0)
    assert options_to_resume(paths.local, every).checkpoint_every_s == 0.0
    assert "note: --checkpoint-every-s 0.0 applies from this resume on." in capsys.readouterr().err


def test_a_resume_sets_a_changeable_option_back_to_its_default_and_refuses_a_named_default(
    tmp_path, capsys
):
    from tuner.commands.search import given_fields
    from tuner.experiment import write_metadata
    from tuner.experiment.options import options_record, options_to_resume
    from tuner.experiment.paths import ExperimentPaths

    paths = ExperimentPaths.of(str(tmp_path), "kept")
    started = SearchOptions(
        space="vit_space", name="kept", reports_dir="mine", trust_budget="90", objective="accuracy"
    )
    write_metadata(paths.local, {"options": options_record(started)})
    resume = ["search", "--resume", "--name", "kept", "--storage", str(tmp_path)]

    def resumed(*flags: str) -> SearchOptions:
        args = build_parser().parse_args([*resume, *flags])
        return options_to_resume(paths.local, options_from_args(args), named=given_fields(args))

    plain = resumed()
    assert (plain.reports_dir, plain.trust_budget, plain.objective) == ("mine", "90", "accuracy")
    assert capsys.readouterr().err == ""
    back = resumed("--reports-dir", "reports", "--trust-budget", "25%")
    assert (back.reports_dir, back.trust_budget) == ("reports", "25%")
    notes = capsys.readouterr().err.splitlines()
    assert notes == [
        "note: --reports-dir reports applies from this resume on.",
        "note: --trust-budget 25% applies from this resume on.",
    ]
    with pytest.raises(TunerError, match=r"^--objective pareto cannot change on --resume"):
        resumed("--objective", "pareto")  # the default, named: another search, refused


def test_every_flag_is_left_out_unless_given() -> None:
    from tuner.commands.search import given_fields

    plain = build_parser().parse_args(["search", "vit_space"])
    fields = {f.name: f.default for f in dataclasses.fields(SearchOptions)}
    assert set(vars(plain)) & set(fields) == {"space"}  # the others: the field's default applies
    assert given_fields(plain) == {"space"}
    assert options_from_args(plain) == SearchOptions(space="vit_space")
    for name, default in fields.items():  # each flag given (at its default) counts as given
        if default is None or name in ("space", "overrides", "resume"):
            continue
        flag = SearchOptions.flag(name)
        value = [] if isinstance(default, bool) else [str(default)]
        args = build_parser().parse_args(["search", "vit_space", "--name", "n", flag, *value])
        assert given_fields(args) == {"space", "name", name}, flag


def test_the_api_resumes_without_its_space_and_counts_a_keyword_given_at_its_default(tmp_path):
    import tuner
    from tuner.experiment import write_metadata
    from tuner.experiment.options import options_record
    from tuner.experiment.paths import ExperimentPaths

    paths = ExperimentPaths.of(str(tmp_path), "kept")
    started = SearchOptions(space="vit_space", name="kept", objective="accuracy")
    write_metadata(paths.local, {"options": options_record(started)})
    with pytest.raises(TunerError, match=r"^--objective pareto cannot change on --resume"):
        tuner.search("", resume=True, name="kept", storage=str(tmp_path), objective="pareto")


@pytest.mark.parametrize(
    ("budget", "limit"),
    [("off", None), ("90", 90.0), ("25%", 30.0 * 25 / 75), (" 50% ", 30.0)],
)
def test_the_trust_budget_is_seconds_or_a_share_of_the_whole_command(
    budget: str, limit: float | None
) -> None:
    # After 30 s of trials: 25 % of the whole command leaves them 10 s (10 / 40), 50 % 30 s.
    options = SearchOptions(space="smoke_space", trust_budget=budget)
    assert options.trust_limit_s(30.0) == (None if limit is None else pytest.approx(limit))


@pytest.mark.parametrize(
    ("saved", "said"),
    [
        (None, "holds no options of the search it began: 'odd' cannot be resumed; start a new"),
        ({"space": "vit_space", "num_samples": "x"}, "holds an option no search starts with "
         "(--num-samples 'x' must be a whole number); the experiment folder is corrupt,"),
    ],
    ids=["no options", "an option of the wrong kind"],
)  # fmt: skip
def test_a_resume_of_metadata_whose_options_no_search_wrote_names_the_file(
    saved: dict | None, said: str, tmp_path
) -> None:
    """Not the flags given now (the user gave no --num-samples): the file, and what to do."""
    from tuner.experiment import write_metadata
    from tuner.experiment.options import options_to_resume
    from tuner.experiment.paths import ExperimentPaths

    paths = ExperimentPaths.of(str(tmp_path), "odd")
    write_metadata(paths.local, {"name": "odd", **({"options": saved} if saved else {})})
    with pytest.raises(TunerError) as info:
        options_to_resume(paths.local, SearchOptions(space="", resume=True, name="odd"))
    assert str(info.value).startswith(f"{paths.local / 'tuner_experiment.json'} {said}")
