"""`tuner search` on a real multi-node Ray cluster: placement, a lost node, a killed driver.

Each test starts `ray start` nodes (1 CPU each, token auth, distinct loopback addresses) and
runs the CLI in a subprocess as the driver, exactly as a user would.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from conftest import HEAD_IP, WORKER_IPS, RayCluster, isolated_env, scratch_root

from tuner.objectives import objective_metrics

pytestmark = [pytest.mark.slow, pytest.mark.machine]

SEARCH_TIMEOUT_S = 300
# The lost-node trials: 12,800 images (800 steps of 16, 200 of 64), a report every 1,280.
IMAGES, EVERY = 12_800, 1_280
# The driver's progress lines: "[  1/4     20s] ok          6de1abcb  2349.8 img/s ..."
PROGRESS_LINE = re.compile(r"^\[[^\]]*\]\s+(?P<event>\w+)\s+(?P<trial_id>\w+)\s")
# Fast node-death detection (Ray's default takes ~30 s to declare a killed raylet dead).
HEALTH_CHECK = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}


@contextlib.contextmanager
def _two_nodes() -> Iterator[RayCluster]:
    with scratch_root() as root:
        env = {**isolated_env(root, token=_token()), **HEALTH_CHECK}
        cluster = RayCluster(root=root, env=env)
        cluster.start_node(head=True, ip=HEAD_IP)
        cluster.start_node(head=False, ip=WORKER_IPS[0])
        yield cluster


@pytest.fixture(scope="module")
def shared_two_nodes() -> Iterator[RayCluster]:
    """Two nodes that the searches which leave the cluster whole share (each its own name)."""
    with _two_nodes() as cluster:
        yield cluster


@pytest.fixture
def two_nodes() -> Iterator[RayCluster]:
    """Two nodes of the test's own (it kills one)."""
    with _two_nodes() as cluster:
        yield cluster


def test_trials_run_on_every_node_and_all_results_arrive(shared_two_nodes: RayCluster) -> None:
    two_nodes = shared_two_nodes
    # Two 1-CPU nodes, two trials at a time of 1 CPU each: Ray must use both nodes.
    done = _search(two_nodes, "spread", "--num-samples", "2", "--concurrency", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    finals = [records[-1] for records in _trial_records(two_nodes, "spread").values()]
    assert len(finals) == 2
    assert {final["node"] for final in finals} == {HEAD_IP, WORKER_IPS[0]}
    assert all(final["status"] == "ok" and final["images_seen"] >= 480 for final in finals)


def test_a_data_parallel_trial_spreads_its_workers_over_both_nodes(
    shared_two_nodes: RayCluster,
) -> None:
    two_nodes = shared_two_nodes
    # Two 1-CPU nodes, one trial of 2 workers x 1 CPU: packed on one node it cannot be placed
    # (refused before any trial), spread its workers can only run one on each node.
    packed = _search(two_nodes, "packed", "--num-samples", "1", "--world-size", "2")
    assert packed.returncode == 2 and "--spread-workers" in packed.stderr
    done = _search(two_nodes, "ddp", "--num-samples", "1", "--world-size", "2",
                   "--spread-workers")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (records,) = _trial_records(two_nodes, "ddp").values()
    final = records[-1]
    assert final["status"] == "ok" and final["final"] is True and final["images_seen"] >= 480
    assert final["world_size"] == 2 and final["images_per_second"] > 0
    assert final["node"] in (HEAD_IP, WORKER_IPS[0])  # rank 0's node


def test_a_trial_on_a_killed_node_resumes_from_its_checkpoint(two_nodes: RayCluster) -> None:
    # Long enough trials (checkpoint every 1,280 images: at every evaluation) that the kill
    # lands mid-trial.
    driver = _start_search(
        two_nodes, "lost-node", "--num-samples", "2", "--concurrency", "2", "--set",
        f"images={IMAGES}", "--set", f"eval_every_images={EVERY}", "--checkpoint-every-s", "0",
    )  # fmt: skip
    try:
        victim_id = _wait_for_checkpointed_trial_on(two_nodes, "lost-node", WORKER_IPS[0])
        killed_pids = two_nodes.workers()[0].kill()
        assert killed_pids
        _, stderr = driver.communicate(timeout=SEARCH_TIMEOUT_S)
    finally:
        driver.kill()
    assert driver.returncode == 0, stderr[-3000:]

    trials = _trial_records(two_nodes, "lost-node")
    assert len(trials) == 2  # every trial accounted for
    assert all(records[-1]["status"] == "ok" and records[-1]["images_seen"] >= IMAGES
               for records in trials.values())  # fmt: skip
    victim = [r for r in trials[victim_id] if r["phase"] == "train"]
    on_lost = [r["images_seen"] for r in victim if r["node"] == WORKER_IPS[0]]
    on_head = [r["images_seen"] for r in victim if r["node"] == HEAD_IP]
    assert on_lost and on_head, "the trial should have run on the lost node, then the head"
    # Retried from its checkpoint: the first report after the retry continues past the last
    # report before the kill; a restart from step 0 would report 1,280 images again.
    assert on_head[0] > on_lost[-1] >= EVERY
    # At most the interval lost since the checkpoint (each report within a batch of its mark).
    assert on_head[0] - on_lost[-1] <= 2 * EVERY + 64
    assert _study_matches_ray(two_nodes.root / "exp" / "lost-node", trials)


def test_a_killed_driver_resumes_without_losing_or_repeating_trials(
    cluster_root: Path, nothing_lost: Any
) -> None:
    cluster = RayCluster(root=cluster_root, env=isolated_env(cluster_root, token=_token()))
    cluster.start_node(head=True, ip=HEAD_IP)
    name, samples = "killed-driver", 3
    args = ("--num-samples", str(samples), "--concurrency", "1", "--sampler", "random")
    driver = _start_search(cluster, name, *args)
    try:
        finished_before = _wait_for_progress(driver, finished=1)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    exp = cluster.root / "exp" / name
    before = {tid: recs for tid, recs in _trial_records(cluster, name).items()}
    finished = sum(bool(records[-1].get("final")) for records in before.values())
    assert set(finished_before) <= set(before)
    assert len(before) < samples  # the search really was cut short

    done = _search(cluster, name, "--resume")
    assert done.returncode == 0, done.stderr[-3000:]
    after = _trial_records(cluster, name)
    assert len(after) == samples  # nothing lost, nothing run twice
    assert all(records[-1]["status"] == "ok" for records in after.values())
    for trial_id in finished_before:  # finished trials were not trained again
        _assert_not_retrained(before[trial_id], after[trial_id])
    assert json.loads((exp / "tuner_experiment.json").read_text())["state"] == "finished"
    assert _study_matches_ray(exp, after)
    nothing_lost(exp, done.stdout, cluster.root / "report")
    # The console says what the resume did, and names the study trials it closed as orphans.
    resumed = next(line for line in done.stdout.splitlines() if line.startswith("Resumed: "))
    assert resumed.startswith(
        f"Resumed: {finished} trial(s) had finished before, {samples - finished} finished"
    )
    assert _orphans_named(resumed) == _orphans_in_study(exp)


def _orphans_named(line: str) -> list[int]:
    match = re.search(r"Optuna trial\(s\) ([\d, ]+) were running", line)
    return [int(n) for n in match[1].split(", ")] if match else []


def _orphans_in_study(exp: Path) -> list[int]:
    study = optuna.load_study(study_name=exp.name, storage=f"sqlite:///{exp / 'study.db'}")
    return [t.number for t in study.trials if t.user_attrs.get("orphaned")]


def _token() -> str:
    import secrets

    return secrets.token_hex(32)


def _search_args(cluster: RayCluster, name: str, *extra: str) -> list[str]:
    base = [sys.executable, "-m", "tuner", "search"]
    if "--resume" not in extra:  # a resumed search reads its options from the experiment
        base += ["smoke_space", "--no-early-stopping", "--effects-repeats", "0",
                 "--speed-repeats", "1"]  # fmt: skip
    storage = str(cluster.root / "exp")
    fixed = ["--name", name, "--storage", storage, "--no-report", "--remeasure-top", "0",
             "--effects-repeats", "0"]  # fmt: skip
    return [*base, *fixed, "--cpus-per-trial", "1", *extra]


def _search(cluster: RayCluster, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _search_args(cluster, name, *extra),
        env=cluster.driver_env(),
        capture_output=True,
        text=True,
        timeout=SEARCH_TIMEOUT_S,
        cwd=cluster.root,
    )


def _start_search(cluster: RayCluster, name: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _search_args(cluster, name, *extra),
        env=cluster.driver_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cluster.root,
    )


def _trial_records(cluster: RayCluster, name: str) -> dict[str, list[dict]]:
    """Every trial's reports, from Ray's result.json (one JSON object a line)."""
    records = {}
    for result in sorted((cluster.root / "exp" / name).glob("*/result.json")):
        lines = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        if lines:
            records[lines[0]["trial_id"]] = lines
    return records


def _wait_for_checkpointed_trial_on(cluster: RayCluster, name: str, node: str) -> str:
    """The id of a trial that has reported (and checkpointed) 2 evaluations on ``node``."""
    deadline = time.monotonic() + SEARCH_TIMEOUT_S
    while time.monotonic() < deadline:
        for trial_id, records in _safe_records(cluster, name).items():
            seen = [
                r["images_seen"] for r in records if r["node"] == node and r["phase"] == "train"
            ]
            if len(seen) >= 2 and max(seen) < IMAGES:
                return trial_id
        time.sleep(0.2)
    raise TimeoutError(f"no trial reported twice on {node}")


def _safe_records(cluster: RayCluster, name: str) -> dict[str, list[dict]]:
    try:
        return _trial_records(cluster, name)
    except (json.JSONDecodeError, OSError):  # a line being written
        return {}


def _wait_for_progress(driver: subprocess.Popen[str], *, finished: int) -> list[str]:
    """Read the driver's progress lines until ``finished`` trials ended; their short ids."""
    assert driver.stdout is not None
    done: list[str] = []
    deadline = time.monotonic() + SEARCH_TIMEOUT_S
    for line in driver.stdout:
        match = PROGRESS_LINE.match(line)
        if match and match["event"] not in ("start", "running"):  # ended, by kind
            done.append(match["trial_id"])
        if len(done) >= finished or time.monotonic() > deadline:
            break
    assert len(done) >= finished, "the driver ended before enough trials finished"
    return done


def _assert_not_retrained(before: list[dict], after: list[dict]) -> None:
    """Ray may restore a trial that finished after its last snapshot; the trainable then only
    re-reports its final checkpointed metrics, so any extra record repeats the final one."""
    assert after[: len(before)] == before
    keys = ("steps", "images_per_second", "val_accuracy", "node")
    for extra in after[len(before) :]:
        assert {k: extra[k] for k in keys} == {k: before[-1][k] for k in keys}


def _study_matches_ray(exp: Path, trials: dict[str, list[dict]]) -> bool:
    """Optuna's completed trials are exactly Ray's trials, with Ray's final objectives."""
    study = optuna.load_study(study_name=exp.name, storage=f"sqlite:///{exp / 'study.db'}")
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    by_ray_id = {t.user_attrs["ray_trial_id"]: t for t in complete}
    assert len(by_ray_id) == len(complete), "two Optuna trials for one Ray trial"
    assert set(by_ray_id) == set(trials)
    for trial_id, records in trials.items():
        final = records[-1]
        expected = [final[metric] for metric in objective_metrics("pareto")]
        assert by_ray_id[trial_id].values == pytest.approx(expected)
    return True
