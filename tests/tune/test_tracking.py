"""TensorBoard by training step, MLflow on request and short trial folders, on a real search.

One real search of ``smoke_space`` (2 trials, 480 images each, evaluated every 240) through the CLI,
with ``--mlflow`` pointing at a SQLite store in a temporary folder when mlflow is installed
(``pip install -e '.[test]'`` installs it). Everything is read back with the tools' own readers:
TensorBoard's ``EventAccumulator`` and ``mlflow.search_runs`` / ``MlflowClient``.
"""

from __future__ import annotations

import importlib.util
import json
import math
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ray.tune.experiment import Trial
from ray.tune.logger import TBXLoggerCallback
from ray.tune.utils.callback import _create_default_callbacks
from search_cli import search_command

from tuner.commands import main
from tuner.errors import TunerError
from tuner.tune import SearchOptions
from tuner.tune.tracking import StepTBXLoggerCallback, trial_dirname
from tuner.tune.tune_setup import logger_callbacks

HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None
NEEDS_MLFLOW = pytest.mark.skipif(
    not HAS_MLFLOW, reason="mlflow is not installed (pip install -e '.[test]' installs it)"
)
NAME = "track"
# What Ray's TuneController passes to every callback's setup (the experiment's public spec).
RAY_SETUP = {"stop": {}, "num_samples": 2, "total_num_samples": 2}
_LOGGERS = {"wandb_project": None, "experiment": "e", "experiment_dir": Path("unused")}


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A finished 2-trial search with its report; MLflow-tracked when mlflow is installed."""
    root = tmp_path_factory.mktemp("tracking")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    command = search_command(
        "smoke_space", "--reports-dir", str(root / "reports"),
        "--num-samples", "2", "--remeasure-top", "0", "--effects-repeats", "0",
        *(["--mlflow", uri] if HAS_MLFLOW else []), name=NAME, storage=root / "experiments",
    )  # fmt: skip
    # In the temporary folder: a SQLite store keeps MLflow's artifacts in ./mlruns.
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, cwd=root)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return {"experiment": root / "experiments" / NAME, "uri": uri, **vars(done)}


def _trial_dirs(search: dict[str, Any]) -> list[Path]:
    dirs = sorted(p.parent for p in search["experiment"].glob("*/result.json"))
    assert len(dirs) == 2
    return dirs


def _steps_and_reports(trial_dir: Path) -> tuple[list[int], list[dict[str, Any]]]:
    """The trial's training steps, each once, and its reports (the first one at each step)."""
    lines = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
    first = {}
    for line in lines:
        first.setdefault(line["step"], line)
    return list(first), list(first.values())


@pytest.mark.slow  # the module's real search: 50-70 s on 2 CPUs
def test_tensorboard_plots_every_trial_by_training_step(search: dict[str, Any]) -> None:
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="tensorboard is not installed (pip install -e '.[test]' installs it)",
    )
    for trial_dir in _trial_dirs(search):
        steps, reports = _steps_and_reports(trial_dir)
        params = json.loads((trial_dir / "params.json").read_text())
        # Evaluated at the first step past 240 and 480 images, whatever the trial's batch size.
        every, batch = params["eval_every_images"], params["batch_size"]
        assert [every, params["images"]] == [240, 480]
        assert steps == [math.ceil(every / batch), math.ceil(2 * every / batch)]
        events = event_accumulator.EventAccumulator(str(trial_dir))
        events.Reload()
        for metric in ("images_per_second", "val_accuracy"):
            points = events.Scalars(f"ray/tune/{metric}")
            assert [p.step for p in points] == steps  # one point per step, no duplicate
            expected = [report[metric] for report in reports]
            assert [p.value for p in points] == pytest.approx(expected, rel=1e-6)
        scalars = events.Tags()["scalars"]
        assert "ray/tune/images_seen" in scalars
        assert not any(s.endswith(("/training_iteration", "/final", "/done")) for s in scalars)


@pytest.mark.slow  # the module's real search (the fast tier audits every client's search)
def test_the_auditor_finds_every_claim_of_the_tracked_search_supported(
    search: dict[str, Any],
) -> None:
    """Issue 39: the search's report, its console, TensorBoard and (when installed) MLflow."""
    from tuner.report.audit import audit

    report = search["experiment"].parent.parent / "reports" / NAME
    found = audit(search["experiment"], report_dir=report, console=search["stdout"])
    assert found.ok, "\n".join(found.lines())


@pytest.mark.slow
def test_trial_folders_are_short_and_name_the_trial(search: dict[str, Any]) -> None:
    for trial_dir in _trial_dirs(search):
        params = json.loads((trial_dir / "params.json").read_text())
        trial_id = json.loads((trial_dir / "result.json").read_text().splitlines()[0])["trial_id"]
        assert trial_dir.name.startswith(f"t_{trial_id}_")
        assert f"_bs{params['batch_size']}" in trial_dir.name and params["norm"] in trial_dir.name
        assert len(trial_dir.name) <= 40 and re.fullmatch(r"[A-Za-z0-9._-]+", trial_dir.name)


@pytest.mark.slow
@NEEDS_MLFLOW
def test_mlflow_has_one_run_per_trial_with_params_and_metrics_by_step(
    search: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", search["uri"])
    runs = mlflow.search_runs(experiment_names=[NAME])
    trials = runs[runs["tags.mlflow.parentRunId"].notna()]
    (parent_id,) = runs.loc[runs["tags.mlflow.parentRunId"].isna(), "run_id"]
    assert len(trials) == 2 and (trials["tags.mlflow.parentRunId"] == parent_id).all()
    client = mlflow.MlflowClient(search["uri"])
    for trial_dir in _trial_dirs(search):
        steps, reports = _steps_and_reports(trial_dir)
        trial_id = reports[0]["trial_id"]
        matching = trials[trials["tags.trial_name"].str.endswith(trial_id)]
        assert len(matching) == 1
        run = matching.iloc[0]
        params = json.loads((trial_dir / "params.json").read_text())
        assert run["params.batch_size"] == str(params["batch_size"])
        assert run["params.norm"] == params["norm"]
        assert run["tags.space"] == "smoke_space" and run["tags.experiment"] == NAME
        for metric in ("images_per_second", "val_accuracy", "images_seen"):
            history = client.get_metric_history(run["run_id"], metric)
            assert [m.step for m in history] == steps
            assert [m.value for m in history] == pytest.approx([r[metric] for r in reports])
    artifacts = {a.path for a in client.list_artifacts(parent_id)}
    assert {"trials.csv", "trials.parquet", "report.html"} <= artifacts
    assert client.get_run(parent_id).info.status == "FINISHED"
    assert f"experiment '{NAME}', run {parent_id}" in search["stdout"]
    assert "MLflow logging stopped" not in search["stderr"]


def test_mlflow_without_the_package_is_one_line_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what an environment without it imports
    code = main(
        ["search", "smoke_space", "--storage", str(tmp_path), "--name", "x", "--mlflow",
         f"sqlite:///{tmp_path / 'mlflow.db'}"]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'train-tuner[mlflow]'" in err
    assert not any(tmp_path.iterdir())  # nothing ran, nothing was written


@pytest.mark.parametrize(
    ("project", "hidden", "message"),
    [
        # what an environment without it sees
        ("my-search", True, "pip install 'train-tuner[wandb]'"),
        ("team/project", False, "must be a W&B project name"),
    ],
)
def test_a_wandb_that_cannot_work_is_one_line_before_any_trial(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    project: str,
    hidden: bool,
    message: str,
) -> None:
    if hidden:
        monkeypatch.setitem(sys.modules, "wandb", None)
    code = main(["search", "smoke_space", "--storage", str(tmp_path), "--wandb", project])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not any(tmp_path.iterdir())


@pytest.fixture
def broken_store(tmp_path: Path) -> str:
    """A real SQLite tracking URI that cannot be opened: its folder is a regular file."""
    (tmp_path / "a-file").write_text("")
    return f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}"


@NEEDS_MLFLOW
def test_an_unreachable_mlflow_store_is_one_line_before_any_trial(
    tmp_path: Path, broken_store: str, capsys: pytest.CaptureFixture
) -> None:
    storage = tmp_path / "experiments"
    code = main(["search", "smoke_space", "--storage", str(storage), "--mlflow", broken_store])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the tracking store cannot be reached" in err
    assert not storage.exists()


@NEEDS_MLFLOW
def test_mlflow_failing_during_a_search_is_one_warning_and_stops_nothing(
    broken_store: str, capsys: pytest.CaptureFixture
) -> None:
    from tuner.tune.mlflow_logger import StepMLflowLoggerCallback

    logger = StepMLflowLoggerCallback(broken_store, experiment_name="e", tags={})
    trial = Trial("run_trial", config={"batch_size": 8}, trial_id="abc", stub=True)
    logger.setup(**RAY_SETUP)  # Ray calls these; none of them may raise into Tune's loop
    logger.log_trial_start(trial)
    logger.log_trial_result(1, trial, {"step": 6, "images_per_second": 1.0})
    logger.log_trial_end(trial)
    err = capsys.readouterr().err
    assert err.count("warning: MLflow logging stopped") == 1 and err.count("\n") == 1


def test_wandb_failing_during_a_search_is_one_warning_and_stops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    wandb_logger = pytest.importorskip("tuner.tune.wandb_logger")
    monkeypatch.setenv("WANDB_MODE", "no-such-mode")  # wandb.init raises on it
    logger = wandb_logger.WandbOfflineCallback(project="p", folder=tmp_path, tags={})
    trial = Trial("run_trial", config={"batch_size": 8}, trial_id="abc", stub=True)
    logger.log_trial_start(trial)  # Ray calls these; none of them may raise into Tune's loop
    logger.log_trial_result(1, trial, {"step": 6, "images_per_second": 1.0})
    logger.log_trial_end(trial)
    err = capsys.readouterr().err
    assert err.count("warning: W&B logging stopped") == 1 and err.count("\n") == 1


@NEEDS_MLFLOW
def test_logging_the_report_to_a_failing_mlflow_is_one_warning(
    tmp_path: Path, broken_store: str, capsys: pytest.CaptureFixture
) -> None:
    from tuner.answer import decide
    from tuner.experiment import METADATA_FILE, load_experiment
    from tuner.search_result import SearchResult
    from tuner.tune.driver import _log_to_mlflow

    metadata = {"name": "e", "space": "smoke_space", "options": {"mlflow": broken_store}}
    (tmp_path / METADATA_FILE).write_text(json.dumps(metadata))
    experiment = load_experiment(tmp_path)
    outcome = SearchResult(experiment, decide(experiment))
    _log_to_mlflow(outcome, None)  # after the search and its report: must not raise
    out = capsys.readouterr().out
    assert out.startswith("warning: logging the report to MLflow failed") and out.count("\n") == 1


@NEEDS_MLFLOW
def test_a_resumed_search_goes_on_in_the_same_mlflow_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    from tuner.tune.mlflow_logger import StepMLflowLoggerCallback

    monkeypatch.chdir(tmp_path)  # a SQLite store keeps its artifacts in ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    before = StepMLflowLoggerCallback(uri, experiment_name="e", tags={})
    trial = Trial("run_trial", config={"batch_size": 8}, trial_id="abc", stub=True)
    before.setup(**RAY_SETUP)
    before.log_trial_start(trial)
    before.log_trial_result(1, trial, {"step": 6, "images_per_second": 1.0})
    state = pickle.loads(pickle.dumps(before.get_state()))  # Ray's experiment checkpoint

    after = StepMLflowLoggerCallback(uri, experiment_name="e", tags={})
    after.set_state(state)  # Ray's order on --resume: the state, then setup
    after.setup(**RAY_SETUP)
    restarted = Trial("run_trial", config={"batch_size": 8}, trial_id="abc", stub=True)
    after.log_trial_start(restarted)
    after.log_trial_result(1, restarted, {"step": 6, "images_per_second": 1.0})  # seen already
    after.log_trial_result(2, restarted, {"step": 12, "images_per_second": 2.0})
    after.log_trial_end(restarted)

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    runs = mlflow.search_runs(experiment_names=["e"])
    trials = runs[runs["tags.mlflow.parentRunId"].notna()]
    assert len(runs) == 2 and len(trials) == 1  # one parent, one trial run: the same as before
    history = mlflow.MlflowClient(uri).get_metric_history(
        trials["run_id"].iloc[0], "images_per_second"
    )
    assert [(m.step, m.value) for m in history] == [(6, 1.0), (12, 2.0)]


def test_an_empty_mlflow_uri_is_refused() -> None:
    with pytest.raises(TunerError, match="tracking URI"):
        SearchOptions(space="smoke_space", mlflow=" ")


def test_our_tensorboard_logger_replaces_rays_default() -> None:
    callbacks = _create_default_callbacks(logger_callbacks(**_LOGGERS, mlflow_uri=None, space="s"))
    tbx = [c for c in callbacks if isinstance(c, TBXLoggerCallback)]
    assert len(tbx) == 1 and isinstance(tbx[0], StepTBXLoggerCallback)


@NEEDS_MLFLOW
def test_mlflow_logger_only_with_a_uri() -> None:
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    plain = logger_callbacks(**_LOGGERS, mlflow_uri=None, space="spaces/my_space.py")
    tracked = logger_callbacks(**_LOGGERS, mlflow_uri="sqlite:///m.db", space="my_space.py")
    assert not any(isinstance(c, MLflowLoggerCallback) for c in plain)
    (mlflow_logger,) = [c for c in tracked if isinstance(c, MLflowLoggerCallback)]
    assert mlflow_logger.tags == {"space": "my_space", "experiment": "e"}
    assert mlflow_logger.experiment_name == "e" and mlflow_logger.tracking_uri == "sqlite:///m.db"


@pytest.mark.parametrize(
    ("config", "tag", "expected"),
    [
        (
            {"batch_size": 64, "norm": "group", "gn_groups": 4},
            "3_batch_size=64",
            "t_abc_3_bs64_group4",
        ),
        ({"batch_size": 16, "norm": "batch", "amp": "bf16"}, "12_x", "t_abc_12_bs16_batch_bf16"),
        ({"batch_size": 8, "norm": "native", "amp": "off", "lr": 0.1}, "1_x", "t_abc_1_bs8"),
        ({"norm": "a/b c"}, None, "t_abc_a-b-c"),  # never a path, never a space
    ],
)
def test_trial_dirname(config: dict[str, Any], tag: str | None, expected: str) -> None:
    trial = Trial("run_trial", config=config, trial_id="abc", experiment_tag=tag, stub=True)
    assert trial_dirname(trial) == expected
    assert pickle.loads(pickle.dumps(trial_dirname)) is trial_dirname  # Ray pickles it


@pytest.mark.parametrize(
    ("last", "crashed", "kind"),
    [
        ({"status": "ok", "final": True, "memory_violation": -0.5}, False, "ok"),
        ({"status": "ok", "final": False, "memory_violation": -0.5}, False, "stopped early"),
        ({"status": "ok", "final": True, "memory_violation": 0.2}, False, "over budget"),
        ({"status": "diverged", "final": True, "error": "nan loss"}, False, "diverged"),
        ({"status": "error", "final": True, "error": "boom"}, True, "errored"),
    ],
)
def test_the_console_line_names_the_kind_in_the_records_words(
    last: dict[str, Any], crashed: bool, kind: str
) -> None:
    import io

    from tuner.tune.progress import ProgressPrinter

    out = io.StringIO()
    printer = ProgressPrinter(total=1, stream=out)
    trial = Trial("run_trial", config={"batch_size": 8}, trial_id="abc", stub=True)
    printer.on_trial_start(0, [], trial)
    printer.on_trial_start(0, [], trial)  # Ray restarts a failed trial: no second start line
    trial.run_metadata.last_result = last
    (printer.on_trial_error if crashed else printer.on_trial_complete)(0, [], trial)
    start, end = out.getvalue().splitlines()
    assert "start  abc" in start and re.search(rf"\] {kind} +abc  ", end)


@pytest.mark.parametrize(
    ("kind", "status"),
    [("ok", "STATUS_SUCCESS"), ("errored", "STATUS_FAILURE"), ("incomplete", "STATUS_UNKNOWN")],
)
def test_the_hparams_status_follows_the_kind(kind: str, status: str) -> None:
    # tensorboardX writes STATUS_SUCCESS for every session; TensorBoard's own proto reads ours.
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
    from tensorboardX.summary import hparams

    from tuner.record import hparams_status
    from tuner.tune.tracking import _set_status

    end = hparams(hparam_dict={"lr": 0.1}, metric_dict={"val_accuracy": 0.5})[2]
    _set_status(end, hparams_status(kind))
    content = end.value[0].metadata.plugin_data.content
    read = plugin_data_pb2.HParamsPluginData.FromString(content).session_end_info.status
    assert api_pb2.Status.Name(read) == status


def test_a_trial_the_search_end_cut_is_incomplete_unless_its_last_report_was_final() -> None:
    from tuner.tune.tracking import cut_at_end, trial_outcome

    def trial(trial_id: str, last: dict[str, Any]) -> Trial:
        made = Trial("run_trial", config={"batch_size": 8}, trial_id=trial_id, stub=True)
        made.run_metadata.last_result = last
        return made

    running = trial("a", {"status": "ok", "final": False, "memory_violation": -0.5})
    done = trial("b", {"status": "ok", "final": True, "memory_violation": -0.5})
    assert trial_outcome(running, failed=False) == ("stopped early", "")  # Ray's view
    assert trial_outcome(running, failed=False, cut=True) == ("incomplete", "")
    assert trial_outcome(done, failed=False, cut=True) == ("ok", "")
    never = trial("c", {})  # asked, never started: not cut, not run
    cut = cut_at_end([running, done, never], started={"a", "b"}, ended={"x"})
    assert cut == [running]


@NEEDS_MLFLOW
def test_a_trial_cut_before_its_first_report_is_ended_in_every_tracker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39: the search's time budget cut a trial before its first report, and the trackers
    never ended it (MLflow RUNNING, W&B exit 0 without a kind, TensorBoard no HParams status).
    Each logger, as Ray's controller drives it: the trial starts, the experiment ends."""
    from ray.train._internal.storage import StorageContext
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    from tuner.report._audit_clients import wandb_records
    from tuner.tune.mlflow_logger import StepMLflowLoggerCallback
    from tuner.tune.wandb_logger import WandbOfflineCallback

    # Ray's driver staging folder lives in its session folder: here, without a cluster.
    monkeypatch.setattr(StorageContext, "_get_session_path", lambda _: str(tmp_path / "session"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    storage = StorageContext(storage_path=str(tmp_path), experiment_dir_name="exp")
    trial = Trial("run_trial", config={"batch_size": 8}, trial_id="cut00001", stub=True,
                  storage=storage, evaluated_params={"batch_size": 8})  # fmt: skip
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    loggers = [
        StepTBXLoggerCallback(),
        StepMLflowLoggerCallback(uri, experiment_name="exp", tags={"space": "s"}),
        WandbOfflineCallback(project="p", folder=tmp_path / "exp", tags={"experiment": "exp"}),
    ]
    for logger in loggers:
        logger.setup(**RAY_SETUP)
        logger.on_trial_start(0, [trial], trial)
    for logger in loggers:  # no report: the search's end
        logger.on_experiment_end([trial])

    events = EventAccumulator(trial.path, size_guidance={"tensors": 0})
    events.Reload()
    (kind,) = events.Tensors("ray/tune/kind/text_summary")
    assert kind.tensor_proto.string_val[0].decode() == "incomplete"
    content = events.PluginTagToContent("hparams")["_hparams_/session_end_info"]
    end = plugin_data_pb2.HParamsPluginData.FromString(content).session_end_info
    assert api_pb2.Status.Name(end.status) == "STATUS_UNKNOWN"

    import mlflow

    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("exp").experiment_id])
    (run,) = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert (run.info.status, run.data.tags.get("kind")) == ("KILLED", "incomplete")

    (path,) = (tmp_path / "exp").glob("wandb/offline-run-*/run-*.wandb")
    records = list(wandb_records(path))
    exits = [r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"]
    tags = [r.run.tags for r in records if r.WhichOneof("record_type") == "run"][-1]
    assert exits == [1] and "kind: incomplete" in tags


# A trial's time-to-target figures as the answer gives them (tuner.tune.target_clients.figures_of):
# one trial reached the target, the other never did (its figures None, so never logged).
_FIGURES = {
    "ttt00001": {"target_accuracy": 0.61, "images_to_target": 3200.0,
                 "images_to_target_low": 1600.0, "train_time_to_target_s": 2.5,
                 "estimated_time_to_target_s": 2.25, "estimated_time_to_target_s_low": 1.11,
                 "estimated_time_to_target_s_high": 2.26, "time_to_target_source": "re-measured"},
    "ttt00002": {"target_accuracy": 0.61, "images_to_target": None, "images_to_target_low": None,
                 "train_time_to_target_s": None, "estimated_time_to_target_s": None,
                 "estimated_time_to_target_s_low": None, "estimated_time_to_target_s_high": None,
                 "time_to_target_source": None},
}  # fmt: skip


@NEEDS_MLFLOW
def test_every_trials_time_to_target_reaches_mlflow_and_wandb_under_the_same_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47: the time to target is known only after the answer, when the trials' runs have
    ended; each trial's own MLflow run (a real SQLite store) and W&B run (offline) get it, under
    the trials table's names, and the W&B run still ends with its kind."""
    from ray.train._internal.storage import StorageContext

    from tuner.time_to_target import TARGET_COLUMNS
    from tuner.tune.mlflow_logger import StepMLflowLoggerCallback
    from tuner.tune.mlflow_logger import log_time_to_target as to_mlflow
    from tuner.tune.wandb_logger import WandbOfflineCallback
    from tuner.tune.wandb_logger import log_time_to_target as to_wandb

    monkeypatch.setattr(StorageContext, "_get_session_path", lambda _: str(tmp_path / "session"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    storage = StorageContext(storage_path=str(tmp_path), experiment_dir_name="exp")
    trials = [
        Trial("run_trial", config={"batch_size": 8}, trial_id=tid, stub=True, storage=storage,
              evaluated_params={"batch_size": 8})
        for tid in _FIGURES
    ]  # fmt: skip
    uri, folder, tags = (
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        tmp_path / "exp",
        {"experiment": "exp"},
    )
    loggers = [
        StepMLflowLoggerCallback(uri, experiment_name="exp", tags={"space": "s"}),
        WandbOfflineCallback(project="p", folder=folder, tags=tags),
    ]
    for logger in loggers:
        logger.setup(**RAY_SETUP)
        for trial in trials:
            logger.on_trial_start(0, trials, trial)
        logger.on_experiment_end(trials)  # every run ended: cut by the search's end

    assert to_mlflow(uri, "exp", _FIGURES) == 2
    runs = {t.trial_id: (trial_dirname(t), "incomplete") for t in trials}
    assert to_wandb(project="p", folder=folder, tags=tags, trials=_FIGURES, runs=runs) == 2

    in_mlflow = _mlflow_trial_runs(uri, TARGET_COLUMNS)
    in_wandb, exits, kinds = _wandb_runs(folder)
    for tid, values in _FIGURES.items():
        logged = {k: v for k, v in values.items() if v is not None}
        assert {k: in_mlflow[tid][k] for k in TARGET_COLUMNS if k in in_mlflow[tid]} == logged
        assert {k: in_wandb[tid][k] for k in TARGET_COLUMNS if k in in_wandb[tid]} == logged
        assert kinds[tid] == ["kind: incomplete"] * 2  # the run's last file still says its kind
        assert len(set(exits[tid])) == 1  # and ends as its first did


def _mlflow_trial_runs(uri: str, tags: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each trial's MLflow run (the parent's children) of experiment "exp": its metrics and
    the ``tags`` it holds, by trial id."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    found = client.search_runs([client.get_experiment_by_name("exp").experiment_id])
    by_trial = {r.data.tags["trial_name"].rsplit("_", 1)[-1]: r for r in found
                if "mlflow.parentRunId" in r.data.tags}  # fmt: skip
    return {
        tid: {**run.data.metrics, **{k: v for k, v in run.data.tags.items() if k in tags}}
        for tid, run in by_trial.items()
    }


def _wandb_runs(
    folder: Path,
) -> tuple[dict[str, dict[str, Any]], dict[str, list[int]], dict[str, list[str]]]:
    """Each offline W&B run's files under ``folder``, by run id: its summary, the exit code of
    each file, and the kind tag each file ended with."""
    from tuner.report._audit_clients import wandb_records

    in_wandb: dict[str, dict[str, Any]] = {}
    exits: dict[str, list[int]] = {}
    kinds: dict[str, list[str]] = {}
    for path in sorted(folder.glob("wandb/offline-run-*/run-*.wandb")):
        records = list(wandb_records(path))
        (run,) = {r.run.run_id for r in records if r.WhichOneof("record_type") == "run"}
        for r in records:
            if r.WhichOneof("record_type") == "summary":
                in_wandb.setdefault(run, {}).update(
                    {i.key: json.loads(i.value_json) for i in r.summary.update}
                )
            elif r.WhichOneof("record_type") == "exit":
                exits.setdefault(run, []).append(r.exit.exit_code)
        tags_of = [list(r.run.tags) for r in records if r.WhichOneof("record_type") == "run"]
        kinds.setdefault(run, []).append(next(t for t in tags_of[-1] if t.startswith("kind: ")))
    return in_wandb, exits, kinds
