"""Connecting the search to Ray: a loopback-only local instance, or an existing cluster (the
security defaults and why: docs/cluster.md); a bad address or a refused token is one line.

:func:`watch` notices when the driver loses its raylet or the GCS: Ray's core worker then ends
the process itself (no Python exception) seconds later, so the driver must say so first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import AuthenticationError

from tuner.errors import TunerError
from tuner.tune import _ray_internals as ray_internals
from tuner.usercode import py_modules

__all__ = [
    "ClusterInfo",
    "Endpoint",
    "connect",
    "is_loopback_address",
    "node_cpus",
    "shutdown",
    "user_code_env",
    "watch",
]

logger = logging.getLogger(__name__)

LOCALHOST = "127.0.0.1"
LOOPBACK_HOSTS = frozenset({LOCALHOST, "::1", "localhost"})
CLIENT_PREFIX = "ray://"
CONNECT_TIMEOUT_S = 10
WATCH_PERIOD_S = 0.5
# How long an endpoint may not answer before it counts as lost. A raylet never comes back and
# Ray ends the driver about 10 s after losing it; a GCS may restart (GCS fault tolerance), and
# Ray gives up on it after 60 s.
RAYLET_GRACE_S = 1.5
GCS_GRACE_S = 10.0


@dataclass(frozen=True, kw_only=True)
class ClusterInfo:
    address: str  # the cluster's GCS address, host:port
    is_local: bool  # this connect started the Ray instance (and owns its shutdown)
    loopback_only: bool  # the address is 127.0.0.1 or ::1: unreachable from other hosts
    nodes: int  # alive nodes
    total_cpus: float  # over all alive nodes
    total_gpus: float
    auth_mode: str  # this driver's Ray authentication: "token" or "disabled"
    dashboard_url: str  # "" when the dashboard is off


def connect(
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    dashboard: bool = False,
    runtime_env: dict[str, Any] | None = None,
) -> ClusterInfo:
    """Start a local loopback-only Ray instance or connect to a cluster (``address``:
    ``host:port``, ``"auto"``, or ``None``: ``RAY_ADDRESS``, else local). Connected already (a
    notebook's ``ray.init()``): that connection, which the caller owns (``is_local`` false).

    Raises:
        TunerError: the address is malformed or unreachable, the cluster refused this
            driver's token, or local-only settings were given with an address.
    """
    if ray.is_initialized():
        return _cluster_info(is_local=False)
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None or address == "local":
        return _start_local(
            num_cpus=num_cpus, num_gpus=num_gpus, dashboard=dashboard, runtime_env=runtime_env
        )
    if num_cpus is not None or num_gpus is not None:
        raise TunerError(
            f"num_cpus/num_gpus apply to a local run, not to the cluster at {address}; "
            "set a node's resources with `ray start --num-cpus/--num-gpus` instead."
        )
    return _join(address, runtime_env=runtime_env)


def user_code_env(refs: Iterable[str]) -> dict[str, Any] | None:
    """Ray's ``py_modules`` runtime environment shipping the user's ``model``/``data`` modules
    to every worker on every node (None: nothing to ship)."""
    modules = py_modules(refs)
    return {"py_modules": modules} if modules else None


def node_cpus() -> list[float]:
    cpus = [node["Resources"].get("CPU", 0.0) for node in ray.nodes() if node.get("Alive")]
    return [c for c in cpus if c > 0] or [1.0]


def shutdown() -> None:
    if ray.is_initialized():
        ray.shutdown()


@dataclass(frozen=True)
class Endpoint:
    what: str  # what the user lost when it stops answering, e.g. "Ray's raylet on this node"
    host: str
    port: int
    grace_s: float  # how long it may not answer before it counts as lost


@contextlib.contextmanager
def watch(
    on_lost: Callable[[str], object], *, endpoints: list[Endpoint] | None = None
) -> Iterator[None]:
    """While the block runs, call ``on_lost(what)`` once, from a background thread, when one of
    ``endpoints`` (default: Ray's raylet and GCS) stops accepting connections."""
    stop = threading.Event()
    args = (_ray_endpoints() if endpoints is None else endpoints, on_lost, stop)
    threading.Thread(target=_watch, args=args, name="tuner-ray-watch", daemon=True).start()
    try:
        yield
    finally:
        stop.set()


def _ray_endpoints() -> list[Endpoint]:
    node = ray_internals.driver_node()
    host, port = node.node_ip_address, node.node_manager_port
    gcs = ray.get_runtime_context().gcs_address
    return [
        Endpoint(f"Ray's raylet on this node ({host}:{port})", host, int(port), RAYLET_GRACE_S),
        Endpoint(
            f"the connection to the Ray cluster (its GCS at {gcs})",
            _host_of(gcs),
            int(gcs.rsplit(":", 1)[1]),
            GCS_GRACE_S,
        ),
    ]


def _watch(
    endpoints: list[Endpoint], on_lost: Callable[[str], object], stop: threading.Event
) -> None:
    silent_since: dict[Endpoint, float] = {}
    while not stop.wait(WATCH_PERIOD_S):
        for endpoint in endpoints:
            if _answers(endpoint):
                silent_since.pop(endpoint, None)
                continue
            since = silent_since.setdefault(endpoint, time.monotonic())
            if time.monotonic() - since >= endpoint.grace_s and not stop.is_set():
                on_lost(endpoint.what)
                return


def _answers(endpoint: Endpoint) -> bool:
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=1.0):
            return True
    except OSError:
        return False


def is_loopback_address(address: str) -> bool:
    """Whether Ray at ``host:port`` listens on loopback only: Ray binds to loopback only for
    exactly 127.0.0.1 or ::1 (127.0.0.2 listens on all interfaces)."""
    return _host_of(address) in LOOPBACK_HOSTS


def _start_local(
    *,
    num_cpus: int | None,
    num_gpus: int | None,
    dashboard: bool,
    runtime_env: dict[str, Any] | None,
) -> ClusterInfo:
    if dashboard and ray_internals.dashboard_missing():
        raise TunerError(
            "The Ray dashboard needs Ray's optional packages: pip install 'ray[default]', "
            "or run without the dashboard."
        )
    # Ray's multi-node switch off (as on macOS and Windows) keeps 127.0.0.1 as the node address
    # (docs/cluster.md, "Security defaults").
    with ray_internals.single_node_init():
        _init(
            address="local",
            _node_ip_address=LOCALHOST,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            include_dashboard=dashboard,
            dashboard_host=LOCALHOST,
            configure_logging=True,  # keeps the ray logger's handlers (tuner.tune.ray_log)
            runtime_env=runtime_env,
        )
    info = _cluster_info(is_local=True)
    if not info.loopback_only and info.auth_mode != "token":
        ray.shutdown()  # listening on the network with no authentication: refuse to run
        raise TunerError(
            f"Local Ray bound to {info.address}, not loopback, with token authentication off; "
            "unset RAY_AUTH_MODE=disabled (token auth is Ray's local default) and retry."
        )
    if not info.loopback_only:
        logger.warning(
            "Ray bound to %s, not loopback: this Ray version ignores the loopback request; "
            "keep RAY_AUTH_MODE=token (Ray's default for local runs) on.",
            info.address,
        )
    return info


def _init(**options: Any) -> None:
    """``ray.init``; Ctrl-C or SIGTERM during Ray's start (a minute on a busy machine) ends what
    it started so far."""
    try:
        with ray_internals.init_keeping_sigterm():
            ray.init(**options)
    except BaseException:
        ray.shutdown()  # also when ray.init had not connected: the processes it started end
        raise


def _join(address: str, *, runtime_env: dict[str, Any] | None = None) -> ClusterInfo:
    if address.startswith(CLIENT_PREFIX):
        raise TunerError(
            f"Ray Client addresses ({address}) are not supported: the search's driver and its "
            "Optuna study must run inside the cluster; run `tuner search` on the head node or "
            "submit it with `ray job submit` (docs/cluster.md)."
        )
    gcs_address = _resolve(address)
    _check_reachable(gcs_address)
    _check_token(gcs_address)
    try:
        _init(address=gcs_address, runtime_env=runtime_env)  # Ray's logging kept: ray_log
    except Exception as exc:  # Ray raises several types for one cause; all mean "not joined".
        raise _unreachable(address, exc) from None
    info = _cluster_info(is_local=False)
    if not info.loopback_only and info.auth_mode != "token":
        logger.warning(
            "The Ray cluster at %s is reachable from other hosts and token authentication is "
            "off: anyone on the network can run code on it; set RAY_AUTH_MODE=token "
            "(docs/cluster.md).",
            info.address,
        )
    return info


def _resolve(address: str) -> str:
    try:
        resolved = ray_internals.canonical_gcs_address(address)
    except ConnectionError as exc:  # "auto" found no running cluster
        raise _unreachable(address, exc) from None
    except ValueError:
        raise TunerError(f"Ray address {address!r} is malformed; use host:port or auto.") from None
    if resolved is None:
        raise TunerError(f"Ray address {address!r} names no cluster; use host:port or auto.")
    return resolved


def _check_reachable(gcs_address: str) -> None:
    # Ray's own client retries for ~40 s on a dead address; a plain TCP connect fails at once.
    host, port = gcs_address.rsplit(":", 1)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except (OSError, ValueError) as exc:
        raise _unreachable(gcs_address, exc) from None


def _check_token(gcs_address: str) -> None:
    try:
        ray_internals.read_gcs_session_name(gcs_address, timeout_s=CONNECT_TIMEOUT_S)
    except AuthenticationError:
        raise TunerError(
            f"The Ray cluster at {gcs_address} refused this driver's authentication token; "
            "set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN or "
            "RAY_AUTH_TOKEN_PATH (docs/cluster.md)."
        ) from None
    except Exception as exc:  # timeouts and RPC errors: the GCS does not answer
        raise _unreachable(gcs_address, exc) from None


def _unreachable(address: str, exc: BaseException) -> TunerError:
    lines = str(exc).strip().splitlines()
    reason = lines[0][:200] if lines else type(exc).__name__
    return TunerError(
        f"Could not connect to the Ray cluster at {address} ({reason}); check that "
        "`ray start --head` runs there and that the address and port are right."
    )


def _cluster_info(*, is_local: bool) -> ClusterInfo:
    here = ray_internals.driver_node()  # this driver's node: its dashboard's address
    address = ray.get_runtime_context().gcs_address
    resources = ray.cluster_resources()
    return ClusterInfo(
        address=address,
        is_local=is_local,
        loopback_only=is_loopback_address(address),
        nodes=sum(1 for node in ray.nodes() if node.get("Alive")),
        total_cpus=float(resources.get("CPU", 0.0)),
        total_gpus=float(resources.get("GPU", 0.0)),
        auth_mode=ray_internals.auth_mode_name(),
        dashboard_url=(here.webui_url or "") if here is not None else "",
    )


def _host_of(address: str) -> str:
    address = address.removeprefix(CLIENT_PREFIX)
    if address.startswith("["):  # [::1]:6379
        return address[1:].split("]", 1)[0]
    if address.count(":") == 1:
        return address.rsplit(":", 1)[0]
    return address
