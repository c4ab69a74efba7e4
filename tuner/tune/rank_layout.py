"""Where a data-parallel trial's ranks run, and the environment each rank gets from that: what
Ray Train's ``TorchConfig`` backend sets on its workers, set on the warm ranks
(:mod:`tuner.tune.rank_pool`) instead.

- ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``NODE_RANK``: from the
  placement, by Ray Train's own function (:func:`tuner.tune._ray_internals.rank_mappings`).
- ``CUDA_VISIBLE_DEVICES``: a node's ranks share every GPU Ray gave any of them (Ray Train's
  ``share_cuda_visible_devices``), so that NCCL can use P2P/NVLink between their processes;
  ``LOCAL_RANK`` then picks each rank's own (:meth:`tuner.engine.distributed.World.local_cuda`).
- ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` on nccl unless the user set it (or
  ``TORCH_NCCL_BLOCKING_WAIT``): a failed collective ends the process instead of hanging it.
- The rendezvous (rank 0's TCP store) listens on loopback when every rank is on rank 0's
  node, else on rank 0's node address, the interface the cluster's nodes reach each other on.
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
    """Where one rank's process runs: its Ray node, that node's address, its process id and
    the GPU ids Ray gave it (``ray.get_runtime_context().get_accelerator_ids()``)."""

    node_id: str
    node_ip: str
    pid: int
    gpu_ids: tuple[str, ...] = ()


def rank_env(places: list[RankPlace]) -> list[dict[str, str]]:
    """Each rank's environment variables (rank order) for ranks at ``places``."""
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
    """Per node, every GPU id its ranks hold, sorted and comma-joined (as Ray Train's
    ``BackendExecutor._share_resource_ids`` joins them)."""
    ids: dict[str, set[str]] = defaultdict(set)
    for place in places:
        ids[place.node_id].update(place.gpu_ids)
    return {node: ",".join(sorted(gpus)) for node, gpus in ids.items() if gpus}


def store_host(places: list[RankPlace]) -> str:
    """Where rank 0's rendezvous listens: loopback when every rank is on rank 0's node (no
    other machine needs it; the store has no authentication), else rank 0's node address."""
    if all(place.node_id == places[0].node_id for place in places):
        return LOOPBACK
    return places[0].node_ip


def nccl_error_handling(environ: MutableMapping[str, str] | None = None) -> None:
    """``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` unless the user chose (Ray Train's
    ``_setup_torch_process_group``): set in each rank's process before it joins an nccl group."""
    environ = os.environ if environ is None else environ
    if NCCL_ERROR_HANDLING not in environ and _NCCL_BLOCKING_WAIT not in environ:
        environ[NCCL_ERROR_HANDLING] = "1"
