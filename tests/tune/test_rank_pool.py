"""The warm rank pool on a real local Ray, this test's process as rank 0 (as a trial's process
is): its ranks' environment, where its rendezvous listens, and a rank lost between two trials
found before the next trial starts (a new pool), so that trial loses no attempt."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import psutil
import pytest
import ray
import torch.distributed as dist

from tuner.tune import rank_pool

pytestmark = [pytest.mark.slow, pytest.mark.machine, pytest.mark.timeout(300)]


@pytest.fixture
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        yield
    finally:
        rank_pool.discard_pool()
        ray.shutdown()


def _pool(told: list[str]) -> tuple[rank_pool.RankPool, bool]:
    return rank_pool.warm_pool(2, backend="gloo", bundle={"CPU": 1.0}, tell=told.append)


def _gone(pid: int, within_s: float = 30.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_ranks_see_ray_trains_variables_and_the_store_listens_on_loopback(
    local_ray: None,
) -> None:
    pool, warm = _pool([])
    assert not warm and dist.get_world_size() == 2
    envs = pool.environments()
    assert [e["RANK"] for e in envs] == ["0", "1"]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1"]  # was 0 on every rank
    assert {(e["LOCAL_WORLD_SIZE"], e["NODE_RANK"], e["WORLD_SIZE"]) for e in envs} == {
        ("2", "0", "2")
    }
    port = pool.port
    listening = [
        c.laddr.ip
        for c in psutil.Process().net_connections("inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]
    assert listening and set(listening) <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
    again, warm = _pool([])
    assert warm and again is pool  # checked, and reused


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["kill -9", "SIGSTOP"])
def test_a_rank_lost_between_trials_is_replaced_before_the_next(
    local_ray: None, how: signal.Signals
) -> None:
    told: list[str] = []
    pool, _ = _pool(told)
    (pid,) = pool.pids()
    os.kill(pid, how)
    if how == signal.SIGKILL:
        assert _gone(pid)
    started = time.monotonic()
    again, warm = _pool(told)
    assert not warm and again is not pool
    assert time.monotonic() - started < rank_pool._HEALTH_S + 60
    assert again.pids() != [pid]
    assert any(t.startswith("warm rank 1 (node ") and "is gone" in t for t in told), told
    assert _gone(pid), "the lost rank's process is left behind"
    assert [e["RANK"] for e in again.environments()] == ["0", "1"]
