"""A trial's probe store and counters: the trials actor's store against a real actor (two
trials sharing one pool, one key, one claim), a worker group's store keyed apart and unbounded,
the null store, and the counters a checkpoint carries to a restart under their record keys."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import ray

from tuner import record
from tuner.config import TrainConfig
from tuner.speed import SpeedChoice
from tuner.speed.budget import predicted_run_s, run_cost
from tuner.speed.cache import Lookup
from tuner.speed.machine_cache import this_machine
from tuner.tune.ddp_trial import _GroupStore
from tuner.tune.trainable import TrialCounters
from tuner.tune.trials_actor import ActorStore, NullStore, connect_actor, start_actor
from tuner.workloads import MICRO_VIT

KEY = json.dumps({"scope": "shared", "model": "micro"})
LOOKUP = Lookup(KEY, this_machine(), None, threads=1, repeats=1)
GROUP_LOOKUP = Lookup(json.dumps({"scope": "config"}), this_machine(), None, 1, 1)
CONFIG = TrainConfig(**MICRO_VIT, img_size=16, batch_size=16, warmup_steps=1).to_dict()


def _counted() -> TrialCounters:
    return TrialCounters(
        started_unix_s=1.0e9, engine_time_s=12.5, train_time_s=9.0, first_step_unix_s=1.0e9 + 3,
        speed_source="cache", speed_cache_age_s=60.0, probe_time_s=1.5, probe_wait_s=0.5,
        probe_budget_s=4.0,
        speed=SpeedChoice(settings={"channels_last": True}, plain_images_per_second=900.0),
    )  # fmt: skip


def test_a_restart_gets_the_counters_its_checkpoint_carried() -> None:
    kept = _counted()
    meta = json.loads(json.dumps(kept.meta()))  # as the checkpoint's file holds them
    assert TrialCounters(started_unix_s=2.0e9).carried_over(meta) == kept
    assert set(kept.reported()) <= set(record.SEARCH_KEYS)  # declared once, there
    assert len(kept.reported()) == 9 and "speed" in meta  # nine counters, and the choice
    fresh = TrialCounters(started_unix_s=2.0e9)  # a checkpoint from before its speed choice
    assert fresh.carried_over({}) == fresh
    early = fresh.carried_over({record.ENGINE_TIME_S: 3.0, "speed": None})
    assert early.engine_time_s == 3.0 and early.speed is None and early.started_unix_s == 2.0e9


def test_without_a_cache_nothing_is_remembered_and_a_trial_spends_its_own_share() -> None:
    alone = ActorStore("", "t1")  # no cache namespace: no actor asked
    assert alone.get(LOOKUP) is None and alone.claim(KEY, 60.0)
    assert alone.draw(5.0) == 5.0 and alone.prior_run_s(CONFIG, 2) is None
    null = NullStore()
    assert null.get(LOOKUP) is None and null.claim(KEY, 60.0)
    assert null.draw(5.0) is None  # unbounded: a worker group's probes


@pytest.fixture(scope="module")
def namespace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("probe_store")
    started = not ray.is_initialized()  # another module's Ray serves as well
    if started:
        ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)
    try:
        actor = start_actor(
            root / "probe_cache.json", "probe_store", machine_dir=root / "machine",
            fresh=True, experiment="probe_store",
        )  # fmt: skip
        ray.get(actor.stats.remote(), timeout=300)  # up (a store's calls wait 30 s at most)
        yield "probe_store"  # while its handle lives: a named actor ends with its last handle
    finally:
        if started:
            ray.shutdown()


def _pool(namespace: str) -> dict[str, float]:
    return ray.get(connect_actor(namespace).stats.remote())["probe_budget"]


@pytest.mark.slow  # a Ray of its own (tests/tiers.py: FAST_CPU)
def test_two_trials_share_the_actor_s_verdicts_claims_and_pool(namespace: str) -> None:
    first, second = ActorStore(namespace, "a"), ActorStore(namespace, "b")
    assert first.get(LOOKUP) is None
    assert first.claim(KEY, 60.0) and not second.claim(KEY, 60.0)  # "a" probes it, "b" waits
    first.put(LOOKUP, {"settings": {"channels_last": True}})
    found = second.get(LOOKUP)
    assert found is not None and found.source == "cache"
    assert found.choice["settings"] == {"channels_last": True}
    assert first.draw(3.0) == 3.0 and second.draw(2.0) == 2.0  # each drew the whole pool
    first.settle(1.0, 2.0, 0.5)  # 1 s back, 2 s spent, 0.5 s earned once its length was known
    second.earn(4.0)  # "b" ended: its measured share replaces its 2 s
    assert _pool(namespace) == {"earned_s": 7.5, "spent_s": 2.0, "left_s": 3.0}
    assert first.prior_run_s(CONFIG, 2) is None
    cost = run_cost(CONFIG, 1.0, 0.16)
    first.observe(cost)
    assert first.prior_run_s(CONFIG, 2) == predicted_run_s([cost], CONFIG, 2) > 1.0
    first.tell("probing channels_last 1/2")
    deadline = time.monotonic() + 10
    while "a" not in (doing := ray.get(connect_actor(namespace).activity.remote())):
        assert time.monotonic() < deadline, "the told activity never arrived"
        time.sleep(0.1)
    assert doing["a"][0] == "probing channels_last 1/2"


@pytest.mark.slow
def test_a_worker_group_s_verdicts_are_keyed_apart_and_its_probes_unbounded(
    namespace: str,
) -> None:
    rank0 = ActorStore(namespace, "g")
    group = _GroupStore(rank0, world_size=1)
    group.put(GROUP_LOOKUP, {"settings": {"compile": True}})
    assert rank0.get(GROUP_LOOKUP) is None  # kept under the group's key, not a process's
    found = group.get(GROUP_LOOKUP)
    assert found is not None and found.choice["settings"] == {"compile": True}
    assert ActorStore(namespace, "other").claim(GROUP_LOOKUP.key, 60.0)  # another trial's
    before = _pool(namespace)
    assert group.draw(9.0) is None and group.claim(GROUP_LOOKUP.key, 60.0)  # no wait, no bound
    group.earn(5.0)
    group.settle(1.0, 2.0, 0.0)
    assert _pool(namespace) == before
