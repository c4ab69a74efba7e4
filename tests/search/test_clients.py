"""One trial is told the same to every client (issue 18): one real search, every client read back.

One search of ``spaces/clients_space.py`` through the CLI (five trials in a fixed order, one of
each kind: ok, stopped early by ParetoASHA, over the memory budget, diverged, errored inside the
engine), tracked with MLflow (a real SQLite store) and W&B (offline, no account, no network).
Each trial's kind is then read from every client with the client's own reader and must be the
same everywhere: the experiment's trials table, the Optuna study, Ray's ``ExperimentAnalysis``
(and ``ResultGrid``), TensorBoard's event files, the MLflow runs, the W&B offline files and the
console's per-trial lines.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from search_cli import search_command

from tuner.experiment import load_experiment, read_trials_csv, write_trials_csv
from tuner.record import ERROR, KIND, KINDS, STEP, classify, optuna_state

SPACE = Path(__file__).parent / "spaces" / "clients_space.py"
NAME = "clients"
MAX_FAILURES = 1  # Ray retries the errored trial once: the retry must raise at once
EXPECTED = {"ok": "ok", "weak": "stopped early", "over": "over budget", "blowup": "diverged",
            "bad": "errored"}  # fmt: skip
_LINE = re.compile(rf"^\[\s*\d+/\S+\s+\d+s(?:, eta \w+)?\] ({'|'.join(KINDS)})\s+(\w+)  ")


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The finished search: its folder, console, MLflow URI and each trial's variant."""
    root = tmp_path_factory.mktemp("clients")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    command = search_command(
        str(SPACE), "--no-report", "--max-memory", "220MiB",
        "--max-failures", str(MAX_FAILURES), "--speed-repeats", "0", "--probe-steps", "3",
        "--remeasure-top", "0", "--effects-repeats", "0", "--mlflow", uri, "--wandb", "tuner-test",
        name=NAME, storage=root / "experiments",
    )  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WANDB_")},
           "WANDB_MODE": "offline"}  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, cwd=root, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    experiment = root / "experiments" / NAME
    variants = {
        json.loads((d / "result.json").read_text().splitlines()[0])["trial_id"]: json.loads(
            (d / "params.json").read_text()
        )["variant"]
        for d in _trial_dirs(experiment)
    }
    assert sorted(variants.values()) == sorted(EXPECTED)
    return {"experiment": experiment, "uri": uri, "variants": variants, **vars(done)}


def _trial_dirs(experiment: Path) -> list[Path]:
    return sorted(p.parent for p in experiment.glob("*/result.json"))


def _table_kinds(search: dict[str, Any]) -> dict[str, str]:
    """Each trial's kind in the experiment's trials.csv (written and read back as the report
    does): what every other client must say."""
    csv = search["experiment"].parent / "trials.csv"
    write_trials_csv(load_experiment(search["experiment"]).trials, csv)
    trials = read_trials_csv(csv).set_index("trial_id")
    return trials[KIND].to_dict()


def _expected(search: dict[str, Any]) -> dict[str, str]:
    if "kinds" not in search:
        search["kinds"] = _table_kinds(search)
    return search["kinds"]


def test_the_console_names_each_kind_in_the_records_words(search: dict[str, Any]) -> None:
    lines = [_LINE.match(line) for line in search["stdout"].splitlines()]
    kinds = {m.group(2): m.group(1) for m in lines if m}
    assert kinds == _expected(search)
    starts = [line for line in search["stdout"].splitlines() if "] start  " in line]
    assert len(starts) == len(EXPECTED)  # Ray's retry of the errored trial is no new start
    wandb_lines = [line for line in (search["stdout"] + search["stderr"]).splitlines()
                   if line.lower().startswith("wandb")]  # fmt: skip
    assert wandb_lines == []
    # The summary at the end counts the same kinds, each once, in the record's order.
    counts = {kind: list(_expected(search).values()).count(kind) for kind in KINDS}
    words = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    assert f"Search finished: {len(EXPECTED)} trials ({words})" in search["stdout"]


def test_the_trials_table_tells_the_kind_each_trial_was_made_to_be(search: dict[str, Any]) -> None:
    by_variant = {search["variants"][tid]: kind for tid, kind in _expected(search).items()}
    assert by_variant == EXPECTED


def test_the_optuna_study_tells_each_kind_and_its_state(search: dict[str, Any]) -> None:
    study = optuna.load_study(
        study_name=NAME, storage=f"sqlite:///{search['experiment'] / 'study.db'}"
    )
    by_ray_id = {t.user_attrs["ray_trial_id"]: t for t in study.trials}
    assert {tid: t.user_attrs[KIND] for tid, t in by_ray_id.items()} == _expected(search)
    for trial in by_ray_id.values():
        assert trial.state == optuna.trial.TrialState[optuna_state(trial.user_attrs[KIND])]
        if trial.user_attrs[KIND] in ("errored", "diverged"):
            assert trial.user_attrs[ERROR]  # why it failed, where optuna-dashboard shows it


def test_ray_ends_the_errored_trial_as_an_error_without_training_it_again(
    search: dict[str, Any],
) -> None:
    from ray.tune import ExperimentAnalysis, ResultGrid

    analysis = ExperimentAnalysis(str(search["experiment"]))
    frame = analysis.dataframe().set_index("trial_id")
    statuses = {trial.trial_id: trial.status for trial in analysis.trials}
    kinds = {
        tid: classify(frame.loc[tid].to_dict(), ended=True, crashed=statuses[tid] == "ERROR")
        for tid in statuses
    }
    assert kinds == _expected(search)
    (bad,) = [tid for tid, kind in kinds.items() if kind == "errored"]
    assert {tid for tid, s in statuses.items() if s == "ERROR"} == {bad}
    grid = ResultGrid(analysis)
    assert len(grid.errors) == 1 and "num_classes=5" in str(grid.errors[0])
    # Tried 1 + MAX_FAILURES times, trained once: the retry raised from the final checkpoint
    # without reporting (one report in result.json).
    trial_dir = next(d for d in _trial_dirs(search["experiment"]) if d.name.startswith(f"t_{bad}"))
    assert (trial_dir / "error.txt").read_text().count("Failure #") == 1 + MAX_FAILURES
    assert len((trial_dir / "result.json").read_text().splitlines()) == 1


def test_tensorboard_tells_each_kind_at_the_trials_last_step(search: dict[str, Any]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    kinds = {}
    for trial_dir in _trial_dirs(search["experiment"]):
        events = EventAccumulator(str(trial_dir), size_guidance={"tensors": 0})
        events.Reload()
        (text,) = events.Tensors(f"ray/tune/{KIND}/text_summary")  # tensorboardX names it
        trial_id = trial_dir.name.split("_")[1]
        kinds[trial_id] = text.tensor_proto.string_val[0].decode()
        steps = [p.step for p in events.Scalars(f"ray/tune/{STEP}")]
        assert steps == sorted(set(steps)) and text.step == steps[-1]  # each step once
    assert kinds == _expected(search)


def test_mlflow_tells_each_kind_as_a_tag_and_a_status(search: dict[str, Any]) -> None:
    import mlflow

    client = mlflow.MlflowClient(search["uri"])
    (experiment,) = [e for e in client.search_experiments() if e.name == NAME]
    runs = client.search_runs([experiment.experiment_id])
    trials = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    kinds = {r.data.tags["trial_name"].rsplit("_", 1)[-1]: r.data.tags[KIND] for r in trials}
    assert kinds == _expected(search)
    for run in trials:
        failed = optuna_state(run.data.tags[KIND]) == "FAIL"
        assert run.info.status == ("FAILED" if failed else "FINISHED")
        assert bool(run.data.tags.get(ERROR)) == (run.data.tags[KIND] in ("errored", "diverged"))
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    ok = next(tid for tid, kind in kinds.items() if kind == "ok")
    assert parent.data.tags["recommended.trial_id"] == ok
    assert parent.data.params["recommended.batch_size"] == "32"
    assert parent.data.metrics["recommended.images_per_second"] > 0
    assert parent.info.status == "FINISHED"


def test_wandb_offline_files_are_complete_by_training_step_with_each_kind(
    search: dict[str, Any],
) -> None:
    runs = {}
    for path in sorted(search["experiment"].glob("wandb/offline-run-*/run-*.wandb")):
        records = list(_wandb_records(path))
        kinds = [r for r in records if r.WhichOneof("record_type") == "exit"]
        assert kinds, f"{path} has no exit record: incomplete"
        run = [r.run for r in records if r.WhichOneof("record_type") == "run"][-1]
        steps = [_history(r)["_step"] for r in records if r.WhichOneof("record_type") == "history"]
        tags = [t.removeprefix("kind: ") for t in run.tags if t.startswith("kind: ")]
        runs[run.run_id] = (tags, steps, kinds[-1].exit.exit_code)
    assert {tid: tags for tid, (tags, _, _) in runs.items()} == {
        tid: [kind] for tid, kind in _expected(search).items()
    }
    for trial_dir in _trial_dirs(search["experiment"]):
        trial_id = trial_dir.name.split("_")[1]
        reports = [
            json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()
        ]
        training_steps = list(dict.fromkeys(report[STEP] for report in reports))
        _, steps, exit_code = runs[trial_id]
        assert steps == training_steps  # the training steps, each once
        assert exit_code == (1 if optuna_state(_expected(search)[trial_id]) == "FAIL" else 0)


def _history(record: Any) -> dict[str, Any]:
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in record.history.item}  # fmt: skip


def _wandb_records(path: Path) -> Iterator[Any]:
    """The records of a ``.wandb`` file. wandb 0.31 ships no Python reader of its own (the
    datastore module went with the Go core), so this reads its documented layout: a 7-byte
    header (``:W&B``, magic, version) and LevelDB log blocks of 32 KiB holding chunks
    (4-byte CRC, 2-byte length, 1-byte type: full, first, middle, last) of ``Record`` protos."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    position, chunks = 7, b""
    while position + 7 <= len(data):
        left = 32768 - position % 32768
        if left < 7:  # a block's tail too short for a header is padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        chunks += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # full or last: a whole record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            chunks = b""
            yield record
