"""Data-parallel trials with real Ray: 2 gloo ranks per trial on the local CPU (the trial's own
process is rank 0, a pooled ``RankWorker`` actor rank 1: tuner.tune.rank_pool).

One search (module fixture) over ``spaces/ddp_space.py`` with ``--world-size 2``, three
trials in a known order: ``strong`` (one of its 2 workers is killed after its first checkpoint),
``weak`` (2 workers, stopped early by ParetoASHA), ``strong2`` (one worker, from the space's
``world_size`` parameter; it starts after the early stop). A search's first start of a rank
worker costs 10-30 s on 2 busy cores (and the killed one's retry starts another), so
everything, the report's "Scaling" section included, is asserted on this search; the warm
reuse after an early stop has its own search (``spaces/ddp_reuse_space.py``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tuner.answer import decide
from tuner.errors import TunerError
from tuner.experiment import PROBE_CACHE_FILE, load_experiment
from tuner.report import write_report
from tuner.report._scaling import scaling_section
from tuner.report.document import Table
from tuner.search_result import SearchResult
from tuner.spaces import get_space
from tuner.tune import SearchDriver, SearchOptions, cluster
from tuner.tune.phases import read_phases
from tuner.tune.plan import make_plan
from tuner.tune.trainable import META_FILE as TRIAL_META

SPACE = Path(__file__).parent / "spaces" / "ddp_space.py"
REUSE_SPACE = Path(__file__).parent / "spaces" / "ddp_reuse_space.py"

# The module's one search runs inside the first slow test: room for it on a loaded machine.
pytestmark = [pytest.mark.timeout(1100), pytest.mark.machine]


class WorkerKiller:
    """Kills the ``strong`` trial's rank-1 worker (a ``RankWorker`` of this process's Ray) once
    the trial's first checkpoint is in its folder (rank 0 wrote it through Tune, which takes the
    report before the attempt's error), and before its final report."""

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
            if self._checkpointed():
                for proc in psutil.Process().children(recursive=True):
                    try:
                        title = " ".join(proc.cmdline())
                    except psutil.Error:
                        continue
                    if title.startswith("ray::RankWorker"):
                        proc.kill()
                        self.killed_at = time.time()
                        return
            time.sleep(0.02)

    def _checkpointed(self) -> bool:
        """Whether the strong trial's folder holds a checkpoint, none of them final."""
        for params in self.experiment.glob("*/params.json"):
            try:
                if json.loads(params.read_text()).get("variant") != "strong":
                    continue
                metas = [
                    json.loads(meta.read_text())
                    for meta in params.parent.glob(f"checkpoint_*/{TRIAL_META}")
                ]
            except (OSError, ValueError):  # not there yet, or read half written
                return False
            return bool(metas) and not any("final_report" in meta for meta in metas)
        return False


class ActivityWatcher:
    """What the trials told the console's running line (the trials actor's ``activity``), each
    distinct line in the order seen, polled while the search runs in this process."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.seen: list[str] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        import ray

        from tuner.tune.trials_actor import connect_actor

        while not self.done.is_set():
            doing = {}
            try:  # not before the search's Ray is up: a call would start a Ray of its own
                if ray.is_initialized():
                    asked = connect_actor(self.namespace).activity.remote()
                    doing = ray.get(asked, timeout=5)
            except Exception:  # no trials actor yet, or Ray going down
                doing = {}
            for what, _ in doing.values():
                if not self.seen or self.seen[-1] != what:
                    self.seen.append(what)
            time.sleep(0.05)

    def stop(self) -> list[str]:
        self.done.set()
        self.thread.join()
        return self.seen


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SearchResult, Any]]:
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


def _watched(options: SearchOptions) -> tuple[SearchResult, dict[str, Any]]:
    """The search, and what Ray held when it was over, before Ray stopped: the placement
    groups, any placement-group cleaner actor and the class of every actor it ran."""
    tables: list[dict[str, Any]] = []
    cleaners: list[dict[str, Any]] = []
    classes: set[str] = set()
    workers: list[dict[str, Any]] = []
    real_shutdown = cluster.shutdown

    def shutdown() -> None:
        import ray
        from ray._private.state import state

        tables.append(ray.util.placement_group_table())
        actors = state.actor_table(None).values()
        cleaners.extend(a for a in actors if a["ActorClassName"] == "PlacementGroupCleaner")
        classes.update(a["ActorClassName"] for a in actors)  # dead ones too
        workers.extend(a for a in actors if a["ActorClassName"] == "RankWorker")
        real_shutdown()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cluster, "shutdown", shutdown)
        outcome = SearchDriver(dataclasses.replace(options, no_report=True)).run()
    held = {"placement_groups": tables[0] if tables else None, "cleaners": cleaners}
    return outcome, {**held, "actor_classes": classes, "rank_workers": workers}


@pytest.mark.slow  # 100 CPU-seconds (tests/tiers.py: FAST_CPU)
def test_one_worker_group_trains_its_trial_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """The fast tier's data-parallel search (the module's search is the long tier's): one
    trial on 2 real gloo ranks (a pooled rank worker beside the trial's process), at a few steps."""
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
        overrides={"images": 256, "eval_every_images": 128},  # 8 steps of 2 x 16, reports at 4
    )
    console = ActivityWatcher("tuner-ddp-one")  # the experiment's cache namespace
    try:
        outcome, seen = _watched(options)
    finally:
        told = console.stop()
    assert outcome.state == "finished"
    # The running line said what the starting group was doing, in order.
    assert "starting 2 workers" in told, told
    up = [i for i, what in enumerate(told) if re.fullmatch(r"2 workers up after \d+ s", what)]
    assert up and told.index("starting 2 workers") < up[0], told
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
    assert phases[0]["warm"] is False  # the search's first trial started its ranks
    assert 0 < phases[0]["seconds"] < lines[-1]["time_total_s"]  # the trial's driver's time
    # Its speed_choice rests on the probe cache's keys of a 2-worker group (issue 48's record).
    [speed] = [p for p in phases if p["part"] == "speed"]
    cache = json.loads((outcome.experiment_dir / PROBE_CACHE_FILE).read_text())
    assert speed["keys"] and all(k in cache for k in speed["keys"]), (speed["keys"], list(cache))
    assert all(json.loads(k)["workers"] == 2 for k in speed["keys"])
    assert {g["state"] for g in seen["placement_groups"].values()} == {"REMOVED"}
    assert not seen["cleaners"]
    # One machine: no preemption watcher (its start printed a core_worker error line).
    assert "RankWorker" in seen["actor_classes"]
    assert "PreemptionWatcher" not in seen["actor_classes"]
    # Nor Ray Data's actors: a dataset manager (no datasets) and the autoscaling coordinator.
    assert not {"DatasetManager", "_AutoscalingCoordinatorActor"} & seen["actor_classes"]


def _reports(outcome: SearchResult) -> dict[str, list[dict[str, Any]]]:
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
    # The failed attempt's error (Tune's error file) names the rank that died.
    folders = {
        json.loads(params.read_text())["variant"]: params.parent
        for params in outcome.experiment_dir.glob("*/params.json")
    }
    error = (folders["strong"] / "error.txt").read_text()
    assert "RankFailed: rank 1 died" in error, error[-2000:]


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


@pytest.mark.slow
def test_an_early_stopped_trial_leaves_its_warm_ranks_to_the_next(tmp_path: Path) -> None:
    """``weak`` is stopped mid-trial (ParetoASHA, at its first rung): its rank 1 ends at the
    same report as rank 0, and ``again`` runs on the same warm ranks (one rank-1 process for
    the whole search: no process started, no group joined after the first trial)."""
    options = SearchOptions(
        space=str(REUSE_SPACE),
        name="ddp-reuse",
        storage=str(tmp_path / "experiments"),
        seed=4,  # the start-up design's order: strong, weak, again
        world_size=2,
        cpus_per_trial=1,
        probe_steps=2,
        speed_repeats=1,
        remeasure_top=0,
        effects_repeats=0,
    )
    outcome, seen = _watched(options)
    assert outcome.state == "finished"
    reports = _reports(outcome)
    assert reports["strong"][-1]["final"] is True and reports["strong"][-1]["status"] == "ok"
    assert reports["weak"][-1]["final"] is False  # stopped at its first rung
    assert reports["again"][-1]["step"] > 0 and reports["again"][-1]["status"] == "ok"
    warm = {}
    for params in outcome.experiment_dir.glob("*/params.json"):
        starts = [p for p in read_phases(params.parent) if p["part"] == "group_start"]
        warm[json.loads(params.read_text())["variant"]] = [p["warm"] for p in starts]
    assert warm == {"strong": [False], "weak": [True], "again": [True]}
    assert len(seen["rank_workers"]) == 1, seen["rank_workers"]
    assert {g["state"] for g in seen["placement_groups"].values()} == {"REMOVED"}
