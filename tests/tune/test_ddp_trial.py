"""Data-parallel trials with real Ray Train: 2 gloo workers per trial on the local CPU.

One search (module fixture) over ``spaces/ddp_space.py`` with ``--world-size 2``, three
trials in a known order: ``strong`` (one of its 2 workers is killed after its first checkpoint),
``weak`` (2 workers, stopped early by ParetoASHA), ``strong2`` (one worker, from the space's
``world_size`` parameter; it starts after the early stop). Each worker group costs 20-30 s to start
on 2 cores, so everything, the report's "Scaling" section included, is asserted on this search.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tuner.answer import decide
from tuner.errors import TunerError
from tuner.experiment import load_experiment
from tuner.report import write_report
from tuner.report._scaling import scaling_section
from tuner.report.document import Table
from tuner.spaces import get_space
from tuner.tune import SearchOptions, SearchOutcome, cluster, run_search
from tuner.tune.ddp_controller import OneLine
from tuner.tune.ddp_trial import RAY_TRAIN_LOG
from tuner.tune.phases import read_phases
from tuner.tune.plan import make_plan

SPACE = Path(__file__).parent / "spaces" / "ddp_space.py"

# The module's one search runs inside the first slow test: room for it on a loaded machine.
pytestmark = [pytest.mark.timeout(1100), pytest.mark.machine]


class WorkerKiller:
    """Kills one Ray Train worker of this process's Ray once Ray Train registered the ``strong``
    trial's first checkpoint (its controller's checkpoint snapshot lists it: a checkpoint merely
    written to the folder is not yet Ray Train's, and a kill then restarts from step 0), and
    before its final report. Not Tune's result.json: Tune may write a trial's lines seconds
    after its workers made them (on a quiet machine, after the trial ended)."""

    def __init__(self, experiment: Path) -> None:
        self.experiment = experiment
        self.killed_at: float | None = None
        self.failed: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self._watch()
        except BaseException as error:  # the test names it instead of "no worker was killed"
            self.failed = error
            raise

    def _watch(self) -> None:
        while not self.done.is_set():
            if self._registered():
                for proc in psutil.Process().children(recursive=True):
                    try:
                        title = " ".join(proc.cmdline())
                    except psutil.Error:
                        continue
                    if title.startswith("ray::RayTrainWorker"):
                        proc.kill()
                        self.killed_at = time.time()
                        return
            time.sleep(0.02)

    def _registered(self) -> bool:
        """Whether the strong trial's snapshot lists a checkpoint, none of them final."""
        for params in self.experiment.glob("*/params.json"):
            snapshot = params.parent / "train" / "checkpoint_manager_snapshot.json"
            try:
                if json.loads(params.read_text()).get("variant") != "strong":
                    continue
                results = json.loads(snapshot.read_text())["checkpoint_results"]
            except (OSError, ValueError, KeyError):  # not there yet, or read half written
                return False
            return bool(results) and not any(r["metrics"].get("final") for r in results)
        return False


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SearchOutcome, Any]]:
    root = tmp_path_factory.mktemp("ddp")
    options = SearchOptions(
        space=str(SPACE),
        name="ddp",
        storage=str(root / "experiments"),
        seed=4,  # the start-up design's order: strong, weak, strong2
        world_size=2,
        cpus_per_trial=1,
        probe_steps=2,
        speed_repeats=1,
        remeasure_top=0,
        effects_repeats=0,
    )
    killer = WorkerKiller(root / "experiments" / "ddp")
    killer.thread.start()
    try:
        outcome, seen = _watched(options)
    finally:
        killer.done.set()
    yield outcome, {"killer": killer, **seen}


def _watched(options: SearchOptions) -> tuple[SearchOutcome, dict[str, Any]]:
    """The search, and what Ray held when it was over, before Ray stopped: the placement
    groups, any placement-group cleaner actor and the class of every actor it ran."""
    tables: list[dict[str, Any]] = []
    cleaners: list[dict[str, Any]] = []
    classes: set[str] = set()
    real_shutdown = cluster.shutdown

    def shutdown() -> None:
        import ray
        from ray._private.state import state

        tables.append(ray.util.placement_group_table())
        actors = state.actor_table(None).values()
        cleaners.extend(a for a in actors if a["ActorClassName"] == "PlacementGroupCleaner")
        classes.update(a["ActorClassName"] for a in actors)  # dead ones too
        real_shutdown()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cluster, "shutdown", shutdown)
        outcome = run_search(options)
    held = {"placement_groups": tables[0] if tables else None, "cleaners": cleaners}
    return outcome, {**held, "actor_classes": classes}


@pytest.mark.slow  # 100 CPU-seconds (tests/tiers.py: FAST_CPU)
def test_one_worker_group_trains_its_trial_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """The fast tier's data-parallel search (the module's search is the long tier's): one
    trial on a real Ray Train worker group of 2 gloo workers, at a few steps."""
    options = SearchOptions(
        space=str(SPACE),
        name="ddp-one",
        storage=str(tmp_path / "experiments"),
        num_samples=1,
        seed=4,  # the start-up design's first trial: strong (its steps set shorter here)
        world_size=2,
        cpus_per_trial=1,
        probe_steps=2,
        speed_repeats=1,
        remeasure_top=0,
        effects_repeats=0,
        overrides={"steps": 8, "eval_every_steps": 4},
    )
    outcome, seen = _watched(options)
    assert outcome.state == "finished"
    lines = _reports(outcome)["strong"]
    assert [line["step"] for line in lines if line["phase"] == "train"][-1] == 8
    for line in lines:
        assert line["world_size"] == 2 and line["global_batch_size"] == 2 * 16
        assert line["images_per_second"] > 0
    assert lines[-1]["final"] is True and lines[-1]["status"] == "ok"
    # Rank 0 measured the group's start-up: from the driver's ask to its own run's start.
    trial_dir = next(outcome.experiment_dir.glob("*/result.json")).parent
    phases = read_phases(trial_dir)
    assert phases[0]["part"] == "group_start" and phases[0]["workers"] == 2
    assert 0 < phases[0]["seconds"] < lines[-1]["time_total_s"]  # the trial's driver's time
    assert {g["state"] for g in seen["placement_groups"].values()} == {"REMOVED"}
    assert not seen["cleaners"]
    # One machine: no preemption watcher (its start printed a core_worker error line).
    assert "RayTrainWorker" in seen["actor_classes"]
    assert "PreemptionWatcher" not in seen["actor_classes"]
    # Nor Ray Data's actors: a dataset manager (no datasets) and the autoscaling coordinator.
    assert not {"DatasetManager", "_AutoscalingCoordinatorActor"} & seen["actor_classes"]


def _reports(outcome: SearchOutcome) -> dict[str, list[dict[str, Any]]]:
    by_variant = {}
    for result in outcome.experiment_dir.glob("*/result.json"):
        lines = [json.loads(line) for line in result.read_text().splitlines()]
        params = json.loads((result.parent / "params.json").read_text())
        by_variant[params["variant"]] = lines
    return by_variant


@pytest.mark.slow
def test_every_trial_records_its_world_size_and_global_throughput(searched) -> None:
    outcome, _ = searched
    assert outcome.state == "finished"
    reports = _reports(outcome)
    assert set(reports) == {"strong", "weak", "strong2"}
    sizes = {"strong": 2, "weak": 2, "strong2": 1}  # --world-size 2; the space's 1
    for variant, lines in reports.items():
        assert lines, variant
        for line in lines:
            assert line["world_size"] == sizes[variant], variant
            batch = {"strong2": 64, "weak": 4}.get(variant, 16)  # spaces/ddp_space.py
            assert line["global_batch_size"] == batch * sizes[variant], variant
            assert line["images_per_second"] > 0, variant
    for variant in ("strong", "strong2"):
        final = reports[variant][-1]
        assert final["final"] is True and final["status"] == "ok", variant
        assert final["speed_source"] in ("probed", "cache", "machine cache")


@pytest.mark.slow
def test_an_early_stopped_trial_leaves_no_placement_group(searched) -> None:
    outcome, seen = searched
    reports = _reports(outcome)
    assert reports["weak"][-1]["final"] is False  # stopped by ParetoASHA at its first rung
    assert reports["strong2"][-1]["final"] is True  # its workers started after the stop
    groups = seen["placement_groups"]
    assert groups, "the search's placement groups were seen before Ray stopped"
    assert {g["state"] for g in groups.values()} == {"REMOVED"}
    assert not seen["cleaners"]  # no detached watcher outlives a trial either (none started)


@pytest.mark.slow
def test_a_killed_worker_resumes_its_trial_from_the_checkpoint(searched) -> None:
    outcome, seen = searched
    killed_at = seen["killer"].killed_at
    assert seen["killer"].failed is None, seen["killer"].failed
    assert killed_at is not None, "a worker was killed"
    lines = _reports(outcome)["strong"]
    before = [line["step"] for line in lines if line["reported_unix_s"] < killed_at]
    after = [line["step"] for line in lines if line["reported_unix_s"] > killed_at]
    assert before and after
    # Continued from a checkpoint, not from step 0 (on a loaded machine Tune may record several
    # reports before the kill lands: the restart then continues from the latest).
    assert min(after) > min(before)
    assert lines[-1]["final"] is True and lines[-1]["status"] == "ok"
    # Ray Train's traceback of the dead worker went whole to the trial's log, not the console.
    folders = {
        json.loads(params.read_text())["variant"]: params.parent
        for params in outcome.experiment_dir.glob("*/params.json")
    }
    log = (folders["strong"] / RAY_TRAIN_LOG).read_text()
    assert "Traceback (most recent call last)" in log and "ActorDiedError" in log


def test_ray_train_s_console_gets_a_traceback_s_first_line_naming_the_trial_log(
    tmp_path: Path,
) -> None:
    console_lines: list[str] = []

    class Console(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            console_lines.append(logging.Formatter().format(record))

    log = tmp_path / RAY_TRAIN_LOG
    logger = logging.getLogger("ray.train.test_one_line")
    logger.propagate = False
    logger.handlers = [OneLine(Console(), log)]
    try:
        raise RuntimeError("a worker died\nits details")
    except RuntimeError:
        logger.warning("Graceful shutdown of backend failed.", exc_info=True)
    logger.warning("a plain warning")
    assert console_lines == [
        f"Graceful shutdown of backend failed. (Ray's traceback: {log})",
        "a plain warning",
    ]


@pytest.mark.parametrize(
    ("workers", "spread", "node_cpus", "concurrency"),
    [(2, False, [2.0], 1), (2, False, [4.0, 4.0], 4), (2, False, [1.0, 1.0], None),
     (2, True, [1.0, 1.0], 1), (3, True, [2.0, 2.0, 2.0], 2)],
)  # fmt: skip
def test_concurrency_counts_whole_worker_groups(
    workers: int, spread: bool, node_cpus: list[float], concurrency: int | None
) -> None:
    options = SearchOptions(
        space=str(SPACE), world_size=workers, spread_workers=spread, cpus_per_trial=1
    )
    space = get_space(options.space)
    if concurrency is None:  # packed 2 workers need one node with 2 CPUs
        with pytest.raises(TunerError, match="--spread-workers"):
            make_plan(options, space, node_cpus=node_cpus, total_gpus=0)
        return
    plan = make_plan(options, space, node_cpus=node_cpus, total_gpus=0)
    assert (plan.concurrency, plan.world_size) == (concurrency, workers)


@pytest.mark.slow
def test_the_report_shows_scaling_by_world_size(searched, tmp_path: Path) -> None:
    outcome, _ = searched
    experiment = load_experiment(outcome.experiment_dir)
    section = scaling_section(experiment, recommended=decide(experiment).recommended)
    assert section is not None and section.title == "Scaling"
    tables = [block for block in section.blocks if isinstance(block, Table)]
    speed, accuracy = tables[0].frame, tables[-1].frame
    assert speed["world size"].tolist() == [1, 2]  # the weak trial stopped early: not pooled
    assert speed["scaling efficiency"].iloc[0].startswith("1.00")
    assert accuracy[["global batch", "world size"]].values.tolist() == [[64, 1], [32, 2]]
    write_report(experiment, out_dir=tmp_path / "report")
    assert "Scaling" in (tmp_path / "report" / "report.md").read_text()


def test_ray_train_s_controller_starts_without_torch_or_a_dataset_actor(tmp_path: Path) -> None:
    """What a trial hands Ray Train's controller (its callbacks, backend config and scaling
    policy, pickled as Ray pickles them) loads in a fresh process without torch or tuner's
    engine: their imports delayed every worker group's start by seconds. No datasets callback
    (a ``DatasetManager`` actor per group) and, on one machine, no autoscaler request."""
    import subprocess
    import sys

    import ray.cloudpickle
    import ray.train

    from tuner.tune._ray_internals import DatasetsCallback
    from tuner.tune.ddp_trial import _trainer, _TrialPlace
    from tuner.tune.trainable import TrialContext

    context = TrialContext(None, 2, 1, "cpu", (), 0, "")
    place = _TrialPlace("t1", str(tmp_path), str(tmp_path), None, tmp_path / "log", True)
    scaling = ray.train.ScalingConfig(num_workers=2, resources_per_worker={"CPU": 1})
    trainer = _trainer(
        {},
        place,
        context=context,
        scaling=scaling,
        max_failures=0,
        forward=ray.train.UserCallback(),
    )
    callbacks = trainer._create_default_callbacks()
    assert not [c for c in callbacks if isinstance(c, DatasetsCallback)]
    handed = ray.cloudpickle.dumps((callbacks, trainer.backend_config))
    (tmp_path / "handed.pkl").write_bytes(handed)
    check = (
        "import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read()); "
        "print(sorted(m for m in ('torch', 'timm', 'tuner.tune.trainable') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", check, str(tmp_path / "handed.pkl")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
