"""A search's limits, which a resume can move (tuner.experiment.limits): the checks of a new
``--num-samples`` and ``--search-time-budget-s`` on an experiment folder with a real Optuna study,
the clock over the runs of a search, and the objects Ray pickles that read them (the searcher,
the search generator, the time budget's stopper, the progress printer), pickled and restored as
Ray does, without a cluster. The end-to-end resumes: tests/tune/test_resume.py."""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
import pytest

from tuner.errors import TunerError
from tuner.experiment import (
    STUDY_TRIAL_ID_ATTR,
    load_experiment,
    read_metadata,
    update_metadata,
    write_metadata,
)
from tuner.experiment.limits import (
    CLOCK,
    NUM_SAMPLES,
    TIME_BUDGET,
    limit_note,
    read_limits,
    settle_clock,
    start_clock,
    stop_clock,
)
from tuner.experiment.options import SearchOptions, options_record
from tuner.objectives import objective_metrics
from tuner.record import REPORTED_UNIX_S, TRIAL_ID, TRIAL_STARTED_UNIX_S, TRIAL_TIME_S
from tuner.spaces import SpaceSampler
from tuner.tune.samplers import make_sampler

if TYPE_CHECKING:  # imports Ray
    from tuner.tune.searcher import ConstrainedOptunaSearch

NAME = "exp"
SPACE = str(Path(__file__).parent / "spaces" / "resume_space.py")


def _folder(
    tmp_path: Path,
    *,
    started: int = 2,
    num_samples: int = 2,
    budget: float | None = None,
    used_s: float = 0.0,
    clock: bool = True,
) -> Path:
    """An experiment folder as a search leaves it: the metadata with its limits, and a study
    whose ``started`` trials name their Ray trial (plus one warm-started trial, which does not)."""
    folder = tmp_path / NAME
    folder.mkdir()
    study = optuna.create_study(
        study_name=NAME, storage=f"sqlite:///{folder / 'study.db'}", directions=["maximize"]
    )
    study.add_trial(optuna.trial.create_trial(value=1.0))  # warm-started: no Ray trial
    for number in range(started):
        trial = study.ask()
        trial.set_user_attr(STUDY_TRIAL_ID_ATTR, f"ray{number}")
        study.tell(trial, 1.0)
    options = SearchOptions(space=SPACE, name=NAME, num_samples=max(num_samples, 0) or None)
    metadata = {"name": NAME, NUM_SAMPLES: num_samples, TIME_BUDGET: budget}
    metadata["options"] = options_record(options)
    if clock:
        metadata[CLOCK] = {"used_s": used_s, "since_unix_s": None}
    write_metadata(folder, metadata)
    return folder


def _own(**changes: object) -> SearchOptions:
    return SearchOptions(**{"space": SPACE, "name": NAME, **changes})  # type: ignore[arg-type]


def test_more_samples_apply_and_the_note_says_how_many_started(tmp_path: Path) -> None:
    folder = _folder(tmp_path, started=2)
    note = limit_note(NUM_SAMPLES, 3, folder=folder, own=_own(num_samples=2))
    assert note == (
        "--num-samples 3 applies from this resume on: exp runs up to 3 trials in all (2 started "
        "before; they are kept, not run again)."
    )


def test_fewer_samples_than_started_are_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, started=2)
    with pytest.raises(TunerError, match=r"^--num-samples 1 is below the 2 trials exp has started"):
        limit_note(NUM_SAMPLES, 1, folder=folder, own=_own(num_samples=2))


def test_a_grid_search_takes_no_more_samples_than_its_grid(tmp_path: Path) -> None:
    folder = _folder(tmp_path, started=2)
    grid = _own(space="tiny_grid_space", sampler="grid", num_samples=2)
    assert limit_note(NUM_SAMPLES, 18, folder=folder, own=grid).startswith("--num-samples 18 ")
    with pytest.raises(TunerError, match=r"more than the 18 configurations of the grid exp"):
        limit_note(NUM_SAMPLES, 19, folder=folder, own=grid)


@pytest.mark.parametrize(("name", "value"), [(NUM_SAMPLES, 5), (TIME_BUDGET, 60.0)])
def test_an_older_tuner_s_experiment_keeps_its_limits(
    name: str, value: float, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, clock=False)
    flag = "--" + name.replace("_", "-")
    with pytest.raises(TunerError, match=rf"^{flag} {value:g} cannot change on --resume of exp"):
        limit_note(name, value, folder=folder, own=_own(num_samples=2))


def test_a_later_budget_counts_every_run_and_one_used_up_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, budget=20.0, used_s=15.2)
    note = limit_note(TIME_BUDGET, 25.0, folder=folder, own=_own())
    assert note.endswith("runs its trials for up to 25 s in all, every run together (15 s used, "
                         "10 s left).")  # fmt: skip
    with pytest.raises(TunerError, match=r"not more than the 15 s .* give more than 16\.$"):
        limit_note(TIME_BUDGET, 15.0, folder=folder, own=_own())


def test_the_clock_adds_each_run_and_a_killed_run_counts_to_its_last_write(
    tmp_path: Path,
) -> None:
    folder = _folder(tmp_path, budget=100.0, used_s=10.0)
    start_clock(folder)
    clock = read_metadata(folder)[CLOCK]
    update_metadata(folder, **{CLOCK: {**clock, "since_unix_s": clock["since_unix_s"] - 5}})
    stop_clock(folder)
    limits = read_limits(folder)
    assert limits is not None and limits.since_unix_s is None
    assert 15.0 <= limits.used_s < 16.0  # 10 s before, 5 s this run

    killed_at = time.time() - 100  # a run began 100 s ago; its trial last wrote 30 s later
    update_metadata(folder, **{CLOCK: {"used_s": 15.0, "since_unix_s": killed_at}})
    result = folder / "t_ray1_2" / "result.json"
    result.parent.mkdir()
    result.write_text("{}\n")
    os.utime(result, (killed_at + 30, killed_at + 30))
    os.utime(folder / "study.db", (killed_at + 20, killed_at + 20))
    assert "(45 s used, 55 s left)" in limit_note(TIME_BUDGET, 100.0, folder=folder, own=_own())
    settle_clock(folder)
    clock = read_metadata(folder)[CLOCK]
    assert clock == {
        "used_s": pytest.approx(45.0),
        "since_unix_s": None,
        "stopped_unix_s": pytest.approx(killed_at + 30),  # its last write: down from there
    }


def test_a_trial_s_time_leaves_out_the_time_the_driver_was_down(tmp_path: Path) -> None:
    """A trial that ran across an interruption and a resume: its ``trial_time_s`` counts the
    runs only, not the 100 s between them (issue 40); the clock keeps that gap."""
    folder = _folder(tmp_path)
    start_clock(folder)
    stop_clock(folder)
    stopped = time.time() - 100.0  # as if the first run had stopped 100 s ago
    clock = read_metadata(folder)[CLOCK]
    update_metadata(folder, **{CLOCK: {**clock, "stopped_unix_s": stopped}})
    start_clock(folder)  # the resume
    clock = read_metadata(folder)[CLOCK]
    resumed = clock["since_unix_s"]
    assert clock["down_unix_s"] == [[stopped, resumed]] and resumed - stopped >= 100.0
    trial = folder / "t_ray0_1"
    trial.mkdir()
    (trial / "params.json").write_text("{}")
    reports = [  # 10 s before the stop, 30 s after the resume
        {TRIAL_ID: "ray0", TRIAL_STARTED_UNIX_S: stopped - 10.0, REPORTED_UNIX_S: stopped},
        {TRIAL_ID: "ray0", TRIAL_STARTED_UNIX_S: stopped - 10.0, REPORTED_UNIX_S: resumed + 30.0},
    ]
    (trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in reports))
    row = load_experiment(folder).trials.set_index(TRIAL_ID).loc["ray0"]
    assert row[TRIAL_TIME_S] == pytest.approx(40.0)  # 10 s before the stop, 30 s after


@pytest.mark.parametrize(
    ("num_samples", "budget", "started", "used_s", "ended"),
    [
        (3, None, 2, 0.0, False),
        (3, None, 3, 0.0, True),
        (-1, None, 99, 0.0, False),  # neither limit: never (the CLI always sets one)
        (-1, 10.0, 99, 9.0, False),
        (-1, 10.0, 0, 10.0, True),
        (5, 10.0, 1, 10.0, True),  # whichever comes first
    ],
)
def test_a_search_ends_at_whichever_limit_comes_first(
    tmp_path: Path, num_samples: int, budget: float | None, started: int, used_s: float, ended: bool
) -> None:
    folder = _folder(tmp_path, num_samples=num_samples, budget=budget, used_s=used_s)
    limits = read_limits(folder)
    assert limits is not None
    assert limits.ended(started=started, now_unix_s=time.time()) is ended


def _searcher(folder: Path) -> ConstrainedOptunaSearch:
    from tuner.tune.searcher import ConstrainedOptunaSearch

    return ConstrainedOptunaSearch(
        experiment_dir=folder,
        space=SpaceSampler("smoke_space", False),
        metric=objective_metrics("pareto"),
        mode=["max", "max"],
        sampler=make_sampler("random", seed=0, budget=None, concurrency=1, grid=None),
        study_name="searched",
        storage=optuna.storages.RDBStorage(f"sqlite:///{folder / 'searched.db'}"),
    )


def test_the_searcher_finishes_at_the_metadata_s_count_and_a_raised_one_restored(
    tmp_path: Path,
) -> None:
    from ray.tune.search import Searcher

    folder = _folder(tmp_path, started=0, num_samples=2)
    searcher = _searcher(folder)
    assert [searcher.suggest(f"t{i}") is not None for i in range(2)] == [True, True]
    assert searcher.suggest("t2") == Searcher.FINISHED
    searcher.save(str(tmp_path / "searcher.pkl"))  # as Ray saves it with the experiment

    update_metadata(folder, **{NUM_SAMPLES: 3})  # a resume raised the count
    restored = _searcher(folder)
    restored.restore(str(tmp_path / "searcher.pkl"))
    assert isinstance(restored.suggest("t3"), dict)  # the third trial
    assert restored.suggest("t4") == Searcher.FINISHED


def test_a_restored_generator_asks_again_and_forgets_trials_the_search_end_cut(
    tmp_path: Path,
) -> None:
    from ray.tune.search import ConcurrencyLimiter, Searcher

    from tuner.tune.search_end import ResumableSearchGenerator

    folder = _folder(tmp_path, started=0, num_samples=1)
    ended = ResumableSearchGenerator(ConcurrencyLimiter(_searcher(folder), max_concurrent=1))
    ended.set_state({**ended.get_state(), "total_samples": sys.maxsize})  # Tune's num_samples=-1
    ended.searcher.suggest("cut")  # a trial the time budget will cut
    ended.set_finished()  # Tune's end: the budget stops the trial, the searcher is not told
    assert ended.is_finished() and ended.searcher.live_trials == set()
    ended.save_to_dir(str(tmp_path), session_str="first")

    update_metadata(folder, **{NUM_SAMPLES: 2})
    resumed = ResumableSearchGenerator(ConcurrencyLimiter(_searcher(folder), max_concurrent=1))
    resumed.restore_from_dir(str(tmp_path))
    assert not resumed.is_finished()
    assert isinstance(resumed.searcher.suggest("next"), dict)  # not blocked by the cut trial
    resumed.on_trial_complete("next")
    assert resumed.searcher.suggest("after") == Searcher.FINISHED
    assert resumed.get_state()["total_samples"] == sys.maxsize  # Tune's own count: none


def test_the_time_budget_is_read_again_when_ray_restores_its_stopper(tmp_path: Path) -> None:
    from tuner.tune.search_end import SearchTimeBudget

    folder = _folder(tmp_path, budget=10.0, used_s=4.0)
    update_metadata(folder, **{CLOCK: {"used_s": 4.0, "since_unix_s": time.time() - 7}})
    stopper = SearchTimeBudget(folder)
    assert stopper.stop_all() and not stopper("trial", {})  # 11 s of 10: the search ends
    update_metadata(folder, **{TIME_BUDGET: 30.0})  # a resume's later budget
    assert stopper.stop_all()  # read once per run, not at every step
    assert not pickle.loads(pickle.dumps(stopper)).stop_all()  # restored: 11 s of 30


def test_the_progress_counts_to_the_metadata_s_count_each_run(tmp_path: Path) -> None:
    from tuner.tune.progress import ProgressPrinter

    folder = _folder(tmp_path, num_samples=2)
    printer = ProgressPrinter(total=2, experiment_dir=folder)
    update_metadata(folder, **{NUM_SAMPLES: 5})
    restored = pickle.loads(pickle.dumps(printer))  # Ray's copy in tuner.pkl
    restored.setup()  # Tune sets each run's callbacks up
    assert (printer.total, restored.total) == (2, 5)
    update_metadata(folder, **{NUM_SAMPLES: -1, TIME_BUDGET: 60.0})
    restored.setup()
    assert restored.total is None  # until the time budget: no count to show


def test_design_trials_an_end_closed_as_not_run_are_queued_once_again(tmp_path: Path) -> None:
    from tuner.tune.searcher import close_orphans, requeue_not_run

    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name=NAME, storage=url, directions=["maximize"])
    for row in ({"batch_size": 8}, {"batch_size": 16}, {"batch_size": 32}):
        study.enqueue_trial(row)
    ran = study.ask()  # the first row ran
    study.tell(ran, 1.0)
    close_orphans(NAME, url, ray_ids=set())  # the search's end: two rows never asked
    assert requeue_not_run(NAME, url) == 2
    assert requeue_not_run(NAME, url) == 0  # queued already
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [t.system_attrs["fixed_params"] for t in waiting] == [
        {"batch_size": 16},
        {"batch_size": 32},
    ]
    close_orphans(NAME, url, ray_ids=set())  # not reached again: closed again, queued once
    assert requeue_not_run(NAME, url) == 2


def test_an_interrupt_closes_the_study_and_a_resume_goes_on_with_its_trials(
    tmp_path: Path,
) -> None:
    """After Ctrl-C or SIGTERM nothing in the study stays RUNNING or WAITING: the running trial
    reads incomplete (FAIL), as trials.csv does, the queued one not run. A resume queues the
    latter again, and the restored Ray trial's end is told on a new Optuna trial of the same
    parameters (issue 40)."""
    from tuner.tune.searcher import close_interrupted, requeue_not_run

    folder = _folder(tmp_path, started=0, num_samples=3)
    searcher = _searcher(folder)
    url = f"sqlite:///{folder / 'searched.db'}"
    searcher.suggest("t0")  # asked: RUNNING, its Ray trial stopped and saved by the interrupt
    study = optuna.load_study(study_name="searched", storage=url)
    study.enqueue_trial({"lr_per_256": 1e-3}, skip_if_exists=False)  # a design row, queued
    searcher.save(str(tmp_path / "searcher.pkl"))  # as Tune saves it at the interrupt
    close_interrupted("searched", url)
    states = [t.state.name for t in study.get_trials()]
    assert states == ["FAIL", "FAIL"], states
    interrupted = study.get_trials()[0]
    assert interrupted.user_attrs["kind"] == "incomplete"

    assert requeue_not_run("searched", url, interrupted_only=True) == 1  # the resume
    restored = _searcher(folder)
    restored.restore(str(tmp_path / "searcher.pkl"))
    result = {"images_per_second": 10.0, "val_accuracy": 0.5, "final": True, "status": "ok"}
    result |= {"feasible": True, "memory_violation": -1.0}
    restored.on_trial_result("t0", result)
    restored.on_trial_complete("t0", result)
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["FAIL", "FAIL", "WAITING", "COMPLETE"]
    went_on = trials[-1]
    assert went_on.params == interrupted.params and went_on.values == [10.0, 0.5]
    assert went_on.user_attrs["ray_trial_id"] == "t0" and went_on.user_attrs["kind"] == "ok"
