"""The warm ranks' environment (tuner.tune.rank_layout) against what Ray Train's own code sets
on its workers, run here on a simulated cluster (no Ray started): its rank mappings, its
``share_cuda_visible_devices`` and its nccl error handling (``ray.train.torch.config``)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest
import torch.distributed as dist
from ray.train._internal.backend_executor import BackendExecutor
from ray.train.torch import config as ray_torch_config

from tuner.tune.rank_layout import (
    LOOPBACK,
    NCCL_ERROR_HANDLING,
    RankPlace,
    nccl_error_handling,
    rank_env,
    store_host,
)

# 2 nodes x 4 GPUs, the ranks interleaved over the nodes (SPREAD) and each node's GPUs handed
# out in no order; 1 node x 8, its GPUs shuffled.
TWO_BY_FOUR = [
    RankPlace("node-a", "10.0.0.1", 100 + rank, (gpu,))
    if rank % 2 == 0
    else RankPlace("node-b", "10.0.0.2", 200 + rank, (gpu,))
    for rank, gpu in enumerate(["2", "3", "0", "1", "3", "0", "1", "2"])
]
ONE_BY_EIGHT = [
    RankPlace("node-a", "10.0.0.1", 100 + rank, (gpu,))
    for rank, gpu in enumerate(["5", "0", "7", "2", "1", "6", "3", "4"])
]


def _ray_train_env(places: list[RankPlace]) -> list[dict[str, str]]:
    """What Ray Train's BackendExecutor sets on workers at ``places`` (its own methods)."""
    workers = [
        SimpleNamespace(
            metadata=SimpleNamespace(
                node_id=p.node_id, node_ip=p.node_ip, pid=p.pid, resource_ids={"GPU": p.gpu_ids}
            )
        )
        for p in places
    ]
    envs: list[dict[str, str]] = [{} for _ in places]

    class Group:  # runs what Ray Train sends to each worker, on a copy of that worker's env
        def __init__(self) -> None:
            self.workers = workers

        def __len__(self) -> int:
            return len(workers)

        def execute_single_async(self, index: int, fn: Any) -> None:
            saved = dict(os.environ)
            try:
                fn()
                envs[index].update({k: v for k, v in os.environ.items() if saved.get(k) != v})
            finally:
                os.environ.clear()
                os.environ.update(saved)

    executor = SimpleNamespace(worker_group=Group())
    local_rank, local_world, node_rank = BackendExecutor._create_rank_world_size_mappings(executor)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ray.get", lambda refs: refs)
        BackendExecutor._share_resource_ids(executor, "GPU", "CUDA_VISIBLE_DEVICES")
    for rank, env in enumerate(envs):
        env |= {
            "RANK": str(rank),
            "WORLD_SIZE": str(len(places)),
            "LOCAL_RANK": str(local_rank[rank]),
            "LOCAL_WORLD_SIZE": str(local_world[rank]),
            "NODE_RANK": str(node_rank[rank]),
        }
    return envs


@pytest.mark.parametrize("places", [TWO_BY_FOUR, ONE_BY_EIGHT], ids=["2x4", "1x8"])
def test_each_rank_gets_what_ray_train_sets(places: list[RankPlace]) -> None:
    assert rank_env(places) == _ray_train_env(places)


def test_two_nodes_by_four_gpus_spelled_out() -> None:
    envs = rank_env(TWO_BY_FOUR)
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "0", "1", "1", "2", "2", "3", "3"]
    assert [e["NODE_RANK"] for e in envs] == ["0", "1"] * 4
    assert {e["LOCAL_WORLD_SIZE"] for e in envs} == {"4"}
    assert {e["CUDA_VISIBLE_DEVICES"] for e in envs} == {"0,1,2,3"}  # a node's 4, shared
    assert [e["RANK"] for e in envs] == [str(r) for r in range(8)]


def test_one_node_by_eight_gpus_spelled_out() -> None:
    envs = rank_env(ONE_BY_EIGHT)
    assert [e["LOCAL_RANK"] for e in envs] == [str(r) for r in range(8)]
    assert {(e["LOCAL_WORLD_SIZE"], e["NODE_RANK"]) for e in envs} == {("8", "0")}
    assert {e["CUDA_VISIBLE_DEVICES"] for e in envs} == {"0,1,2,3,4,5,6,7"}


def test_cpu_ranks_get_no_visible_devices() -> None:
    places = [RankPlace("node-a", "10.0.0.1", 1), RankPlace("node-a", "10.0.0.1", 2)]
    assert all("CUDA_VISIBLE_DEVICES" not in env for env in rank_env(places))


@pytest.mark.parametrize(
    "preset",
    [{}, {NCCL_ERROR_HANDLING: "0"}, {"TORCH_NCCL_BLOCKING_WAIT": "1"}],
    ids=["unset", "user's 0", "blocking wait"],
)
def test_nccl_error_handling_as_ray_train_sets_it(
    preset: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (NCCL_ERROR_HANDLING, "TORCH_NCCL_BLOCKING_WAIT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in preset.items():
        monkeypatch.setenv(name, value)
    ours = dict(preset)
    nccl_error_handling(ours)
    monkeypatch.setattr(dist, "init_process_group", lambda *args, **kwargs: None)
    ray_torch_config._setup_torch_process_group("nccl", 0, 2, "tcp://127.0.0.1:1")
    assert ours.get(NCCL_ERROR_HANDLING) == os.environ.get(NCCL_ERROR_HANDLING)
    assert ours.get(NCCL_ERROR_HANDLING) == preset.get(NCCL_ERROR_HANDLING, None if preset else "1")


def test_the_rendezvous_listens_on_loopback_on_one_node_else_on_the_node_address() -> None:
    assert store_host(ONE_BY_EIGHT) == LOOPBACK
    assert store_host(TWO_BY_FOUR) == "10.0.0.1"  # rank 0's node, which the others reach
