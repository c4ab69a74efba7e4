"""The environment Ray Train's ``TorchConfig`` sets on its workers, set on the warm ranks
(:mod:`tuner.tune.rank_pool`) instead: the rank variables (by Ray Train's own mapping), a node's
ranks sharing ``CUDA_VISIBLE_DEVICES`` (so that NCCL can use P2P/NVLink; ``LOCAL_RANK`` picks
each rank's own), nccl's async error handling unless the user chose (a failed collective ends
the process instead of hanging it), and the rendezvous on loopback when every rank is on one
node.
"""

from __future__ import annotations

import dataclasses
import os
from collections import defaultdict
from collections.abc import MutableMapping

from tuner.tune import _ray_internals

__all__ = [
    "LAYOUT_VARIABLES",
    "LOOPBACK",
    "NCCL_ERROR_HANDLING",
    "RankPlace",
    "nccl_error_handling",
    "rank_env",
    "store_host",
]

NCCL_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
_NCCL_BLOCKING_WAIT = "TORCH_NCCL_BLOCKING_WAIT"
LOOPBACK = "127.0.0.1"
# What a rank's environment says of its place (each rank records them: the phase log's
# group_start, bench/gpu_suite's data-parallel stage).
LAYOUT_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "CUDA_VISIBLE_DEVICES",
    NCCL_ERROR_HANDLING, _NCCL_BLOCKING_WAIT,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class RankPlace:
    node_id: str
    node_ip: str
    pid: int
    gpu_ids: tuple[str, ...] = ()


def rank_env(places: list[RankPlace]) -> list[dict[str, str]]:
    triples = [(p.node_id, p.node_ip, p.pid) for p in places]
    local_rank, local_world_size, node_rank = _ray_internals.rank_mappings(triples)
    shared = _shared_gpus(places)
    envs = []
    for rank, place in enumerate(places):
        env = {
            "RANK": str(rank),
            "WORLD_SIZE": str(len(places)),
            "LOCAL_RANK": str(local_rank[rank]),
            "LOCAL_WORLD_SIZE": str(local_world_size[rank]),
            "NODE_RANK": str(node_rank[rank]),
        }
        if shared.get(place.node_id):
            env["CUDA_VISIBLE_DEVICES"] = shared[place.node_id]
        envs.append(env)
    return envs


def _shared_gpus(places: list[RankPlace]) -> dict[str, str]:
    """Per node, every GPU id its ranks hold, joined as Ray Train joins them."""
    ids: dict[str, set[str]] = defaultdict(set)
    for place in places:
        ids[place.node_id].update(place.gpu_ids)
    return {node: ",".join(sorted(gpus)) for node, gpus in ids.items() if gpus}


def store_host(places: list[RankPlace]) -> str:
    """Loopback when every rank is on rank 0's node (the store has no authentication), else
    rank 0's node address."""
    if all(place.node_id == places[0].node_id for place in places):
        return LOOPBACK
    return places[0].node_ip


def nccl_error_handling(environ: MutableMapping[str, str] | None = None) -> None:
    environ = os.environ if environ is None else environ
    if NCCL_ERROR_HANDLING not in environ and _NCCL_BLOCKING_WAIT not in environ:
        environ[NCCL_ERROR_HANDLING] = "1"
