"""Every private Ray use of tuner, one function each saying why no public API serves: the one
file to read again on a Ray upgrade (``tests/tune/test_ray_internals.py`` calls each against
the installed Ray and names the Ray version that broke one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TextIO, TypeVar

from ray._private import ray_constants, services, worker
from ray._private.authentication.authentication_utils import get_authentication_mode_name
from ray._private.utils import get_dashboard_dependency_error
from ray._raylet import GcsClient, get_authentication_mode

from tuner.errors import Terminated

Fitted = TypeVar("Fitted")

__all__ = [
    "DRIVER_PRINT_THREADS",
    "TUNE_SIGINT_HANDLER",
    "auth_mode_name",
    "canonical_gcs_address",
    "dashboard_missing",
    "driver_node",
    "driver_prints_to",
    "experiment_trials",
    "fit_keeping_handlers",
    "init_keeping_sigterm",
    "is_tune_stop",
    "rank_mappings",
    "read_gcs_session_name",
    "single_node_init",
]


def driver_node() -> Any | None:
    """This driver's node (raylet address and port, dashboard URL), None before init: no public
    API gives the dashboard URL of an already-initialized driver."""
    return worker._global_node


def dashboard_missing() -> bool:
    """Whether the dashboard's packages are missing: Ray says it only inside ``ray.init``."""
    return get_dashboard_dependency_error() is not None


@contextlib.contextmanager
def single_node_init() -> Iterator[None]:
    """Ray's multi-node switch off while a local Ray starts, which keeps 127.0.0.1 as the node
    address (docs/cluster.md): a module constant read at import; no ``ray.init`` argument."""
    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def canonical_gcs_address(address: str) -> str | None:
    """``host:port`` of the GCS (``"auto"``: this machine's), as ``ray.init`` resolves it; no
    public function resolves an address without connecting."""
    return services.canonicalize_bootstrap_address(address)


def read_gcs_session_name(gcs_address: str, *, timeout_s: float) -> Any:
    """One authenticated request before ``ray.init`` (which retries ~40 s and reports a refused
    token as a timeout): Ray has no public client for it."""
    return GcsClient(address=gcs_address).internal_kv_get(
        b"session_name", ray_constants.KV_NAMESPACE_SESSION, timeout=timeout_s
    )


def auth_mode_name() -> str:
    """The cluster's authentication mode ("token", "disabled"); no public API says it."""
    return get_authentication_mode_name(get_authentication_mode())


def experiment_trials(results: Any) -> list[Any]:
    """A ``ResultGrid``'s Tune ``Trial`` objects: its public ``Result`` objects lack the status."""
    return list(results._experiment_analysis.trials)


# The driver's threads that print what Ray's processes send it (``ray._private.worker.connect``
# names them): the raylet's error messages ("A worker died ...") and, with ``log_to_driver``,
# the workers' output. ``log_to_driver=False`` would keep the workers' lines off the driver, but
# also out of the experiment's ray.log; nothing public routes the raylet's error messages,
# which ``print`` to ``sys.stdout`` (``listen_error_messages``), and no logger carries either.
DRIVER_PRINT_THREADS = frozenset({"ray_listen_error_messages", "ray_print_logs"})


@contextlib.contextmanager
def driver_prints_to(log: TextIO) -> Iterator[None]:
    """Within the block, what Ray's driver threads print goes to ``log``, every other thread's to
    the console: they print to whatever ``sys.stdout``/``sys.stderr`` is, so both are swapped."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _ByThread(sys.stdout, log), _ByThread(sys.stderr, log)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class _ByThread:
    def __init__(self, console: TextIO, log: TextIO) -> None:
        self._console = console
        self._log = log

    def write(self, text: str) -> int:
        if threading.current_thread().name in DRIVER_PRINT_THREADS:
            self._log.write(text)
            self._log.flush()
            return len(text)
        return self._console.write(text)

    def flush(self) -> None:
        self._console.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding: the console's
        return getattr(self._console, name)


# The SIGINT handler Tune installs for a running fit (nested in ``ray.tune.tune``).
TUNE_SIGINT_HANDLER = "signal_interrupt_tune_run"


def fit_keeping_handlers(fit: Callable[[], Fitted]) -> tuple[Fitted, bool]:
    """``Tuner.fit()`` and whether Ctrl-C stopped it, the SIGINT and SIGUSR1 handlers put back:
    Tune installs its own for the fit and leaves them after a normal end, and says a Ctrl-C
    only in its log."""
    if threading.current_thread() is not threading.main_thread():
        return fit(), False  # Tune catches no signals outside the main thread
    watched = [signal.SIGINT, *([signal.SIGUSR1] if hasattr(signal, "SIGUSR1") else [])]
    before = {signum: signal.getsignal(signum) for signum in watched}
    try:
        fitted = fit()
        caught = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") == "0"
        tunes = getattr(signal.getsignal(signal.SIGINT), "__name__", "") == TUNE_SIGINT_HANDLER
        return fitted, caught and not tunes
    finally:
        for signum, handler in before.items():  # None: set outside Python, put back as default
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


@contextlib.contextmanager
def init_keeping_sigterm() -> Iterator[None]:
    """Around ``ray.init``, which sets a SIGTERM handler (``sys.exit``) and leaves it: that exit
    raised as :class:`~tuner.errors.Terminated`, the handler before it put back."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    except SystemExit as exc:
        if exc.code != signal.SIGTERM:
            raise
        raise Terminated from None
    finally:
        if main and before is not None:
            signal.signal(signal.SIGTERM, before)


def rank_mappings(
    places: list[tuple[str, str, int]],
) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``NODE_RANK`` maps for workers at ``places``
    (node id, node IP, pid), by Ray Train's own private method, so that a warm rank pool sets
    what Ray Train would."""
    from types import SimpleNamespace

    from ray.train._internal.backend_executor import BackendExecutor

    workers = [
        SimpleNamespace(metadata=SimpleNamespace(node_id=node, node_ip=ip, pid=pid))
        for node, ip, pid in places
    ]
    group = _Workers(workers)
    return BackendExecutor._create_rank_world_size_mappings(SimpleNamespace(worker_group=group))


class _Workers:
    def __init__(self, workers: list[Any]) -> None:
        self.workers = workers

    def __len__(self) -> int:
        return len(self.workers)


def is_tune_stop(exc: BaseException) -> bool:
    """Whether ``exc``, from ``tune.report``, is Tune stopping the trial: Ray 2.60 ends the
    training thread with ``sys.exit(0)`` there; no public API says a trial was stopped."""
    return isinstance(exc, SystemExit) and exc.code in (0, None)
