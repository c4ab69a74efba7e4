"""Every private Ray use of tuner, in one place: why Ray is pinned to its tested minor release
(pyproject.toml), and the one file to read again on a Ray upgrade.

Each function says why no public API serves. ``tests/tune/test_ray_internals.py`` calls each
against the installed Ray and fails with the Ray version named when an upgrade breaks one.
Ray Tune's ``OptunaSearch``, which :mod:`tuner.tune.searcher` subclasses, is read through its
protected members there (a subclass's own attributes); the same test checks that they exist.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import ray
from ray._private import ray_constants, services, worker
from ray._private.authentication.authentication_utils import get_authentication_mode_name
from ray._private.state import state
from ray._private.utils import get_dashboard_dependency_error
from ray._raylet import GcsClient, get_authentication_mode
from ray.core.generated import gcs_pb2

if TYPE_CHECKING:  # loaded on first use, below
    from ray.train.v2._internal.callbacks.datasets import DatasetsCallback
    from ray.train.v2._internal.callbacks.placement_group_callback import (
        PlacementGroupCleanerCallback,
    )
    from ray.train.v2._internal.constants import (
        ENABLE_PREEMPTION_WATCHER_ENV_VAR,
        HEALTH_CHECK_INTERVAL_S_ENV_VAR,
    )
    from ray.train.v2._internal.execution.callback import ControllerCallback

__all__ = [
    "ENABLE_PREEMPTION_WATCHER_ENV_VAR",
    "HEALTH_CHECK_INTERVAL_S_ENV_VAR",
    "PLACEMENT_GROUP_REMOVED",
    "ControllerCallback",
    "DatasetsCallback",
    "PlacementGroupCleanerCallback",
    "address_and_port",
    "auth_mode_name",
    "canonical_gcs_address",
    "dashboard_missing",
    "driver_node",
    "experiment_trials",
    "job_actors",
    "join_torch_group",
    "leave_torch_group",
    "no_autoscaler_requests",
    "placement_group_rows",
    "quiet_train_context_logger",
    "ray_version",
    "read_gcs_session_name",
    "single_node_init",
    "torch_framework",
    "torch_train_context",
]

# Ray Train V2's names, for tuner.tune.ddp_trial, imported on first use (PEP 562) so that the
# driver's cluster code does not load Ray Train. No public counterpart: the controller callback
# base class (tracebacks to the trial's log) and the placement-group cleaner (removed: a
# detached actor per trial that never ends without the dashboard package) are internal, and the
# two environment variables (the controller's poll period, the preemption watcher) are read
# only from the environment, under names Ray keeps in its internal constants. The datasets
# callback is only named, to leave it out of a trainer without datasets (tuner.tune.ddp_trial).
_TRAIN_V2 = {
    "ControllerCallback": "ray.train.v2._internal.execution.callback",
    "DatasetsCallback": "ray.train.v2._internal.callbacks.datasets",
    "PlacementGroupCleanerCallback": "ray.train.v2._internal.callbacks.placement_group_callback",
    "ENABLE_PREEMPTION_WATCHER_ENV_VAR": "ray.train.v2._internal.constants",
    "HEALTH_CHECK_INTERVAL_S_ENV_VAR": "ray.train.v2._internal.constants",
}
_TRAIN_CONTEXT = "ray.train.v2._internal.execution.context"
_TORCH_CONFIG = "ray.train.torch.config"  # imports torch: loaded only where torch runs


def __getattr__(name: str) -> Any:
    if name not in _TRAIN_V2:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_TRAIN_V2[name]), name)


PLACEMENT_GROUP_REMOVED = gcs_pb2.PlacementGroupTableData.REMOVED


def ray_version() -> str:
    return ray.__version__


def driver_node() -> Any | None:
    """This driver's node object (raylet address and port, dashboard URL), None before init.
    Public APIs give the node's id (runtime context) and, per node, its raylet port
    (``ray.nodes()``), but not the dashboard URL of an already-initialized driver."""
    return worker._global_node


def dashboard_missing() -> bool:
    """Whether the dashboard's optional packages are missing. Ray checks this only inside
    ``ray.init``, where a missing package is a warning, not an error tuner can say first."""
    return get_dashboard_dependency_error() is not None


@contextlib.contextmanager
def single_node_init() -> Iterator[None]:
    """Ray's multi-node switch off while a local Ray starts (as on macOS and Windows), which keeps
    127.0.0.1 as the node address (docs/cluster.md, "Security defaults"). Ray reads it from a
    module constant set from the environment at import; no ``ray.init`` argument sets it."""
    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def canonical_gcs_address(address: str) -> str | None:
    """``host:port`` of the cluster's GCS (``"auto"``: the one started on this machine), as
    ``ray.init`` resolves it; no public function resolves an address without connecting."""
    return services.canonicalize_bootstrap_address(address)


def read_gcs_session_name(gcs_address: str, *, timeout_s: float) -> Any:
    """One authenticated request to the GCS, before ``ray.init`` (which retries for ~40 s and
    reports a refused token as a timeout): Ray has no public client for it."""
    return GcsClient(address=gcs_address).internal_kv_get(
        b"session_name", ray_constants.KV_NAMESPACE_SESSION, timeout=timeout_s
    )


def auth_mode_name() -> str:
    """The cluster's authentication mode ("token", "disabled"); no public API says it."""
    return get_authentication_mode_name(get_authentication_mode())


def placement_group_rows() -> Iterator[Any]:
    """GCS's raw placement-group table, decoded: the public ``placement_group_table`` omits the
    creating actor and whether it died, which is how a leaked worker group is told apart."""
    for raw in state._connect_and_get_accessor().get_placement_group_table():
        yield gcs_pb2.PlacementGroupTableData.FromString(raw)


def job_actors() -> dict[str, Any]:
    """Every actor GCS knows, by id (job, class, state). ``ray.util.state.list_actors`` is the
    public one, but it needs the dashboard's State API, absent in a plain ``ray[tune]``."""
    return state.actor_table(None)


def quiet_train_context_logger() -> None:
    """Ray Train logs every report of every rank at INFO (the whole metrics dict) from a logger
    named after its file's path, outside "ray.train": neither that logger's level nor Ray
    Train's LoggingConfig reaches it, only its module's own object."""
    importlib.import_module(_TRAIN_CONTEXT).logger.setLevel(logging.WARNING)


def experiment_trials(results: Any) -> list[Any]:
    """The Tune ``Trial`` objects of a ``ResultGrid`` (status, trial id, folder of every
    trial): the public ``ResultGrid`` gives ``Result`` objects only, without a trial's status."""
    return list(results._experiment_analysis.trials)


# ---- a worker group's torch process group, without torch in Ray Train's controller ----------
# (tuner.tune.ddp_controller). Ray's ``_TorchBackend`` does the same from the controller's
# process, whose module imports torch at the top; its worker-side steps are private functions.


def address_and_port() -> tuple[str, int]:
    """On rank 0's worker: its address and a free port, the group's rendezvous."""
    return importlib.import_module("ray.train._internal.utils").get_address_and_port()


def join_torch_group(
    *, backend: str, address: str, port: int, world_rank: int, world_size: int, timeout_s: int
) -> None:
    """On each worker: Ray's own steps of ``TorchConfig(init_method="env")``."""
    config = importlib.import_module(_TORCH_CONFIG)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = address, str(port)
    config._set_torch_distributed_env_vars()
    config._setup_torch_process_group(
        backend=backend,
        world_rank=world_rank,
        world_size=world_size,
        init_method="env://",
        timeout_s=timeout_s,
    )


def leave_torch_group(*, destroy: bool) -> None:
    """On each worker, as the group ends (Ray's own step)."""
    importlib.import_module(_TORCH_CONFIG)._shutdown_torch(destroy_process_group=destroy)


def torch_train_context() -> Any:
    """The context manager Ray runs a torch worker's train function in (its CUDA device)."""
    return importlib.import_module(_TORCH_CONFIG).TorchConfigContextManager


def torch_framework() -> Any:
    """Ray Train's name for torch (its state export reads it off the backend config)."""
    return importlib.import_module("ray.train.v2._internal.util").TrainingFramework.TORCH


def no_autoscaler_requests(policy: Any) -> Any:
    """Ray Train's scaling policy without its requests to the autoscaling coordinator, a
    detached Ray Data actor the controller starts and waits for: on one machine there is no
    autoscaler to ask. The policy's own methods are replaced on the instance (it is pickled to
    the controller with them); its cancel is a no-op without a client."""
    policy.after_controller_start = _no_request
    policy._maybe_send_resource_request = _no_request
    return policy


def _no_request(*args: Any, **kwargs: Any) -> None:
    return None
