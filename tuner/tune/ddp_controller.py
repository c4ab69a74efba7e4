"""What a data-parallel trial hands Ray Train's controller: kept free of torch and tuner's engine.

Ray Train's controller is an actor of its own that unpickles its callbacks and the trainer's
backend config before it starts any worker; each names the module it is defined in, which the
controller then imports. With :class:`ray.train.torch.TorchConfig` and callbacks defined next to
the worker's code (:mod:`tuner.tune.ddp_trial`) it imported torch, timm and the engine first:
on 2 busy cores some 6 s of every worker group's start, in series before the workers were even
asked for. The classes here import only Ray, and the torch parts run on the workers.

Two more things a trial never needs are left out on one machine (bench/data_parallel_overhead.py
measures the start): Ray Data's ``DatasetManager`` actor (its own process, started for every
group, datasets or none; tuner's data stays the engine's) and the request to Ray's autoscaling
coordinator, a detached Ray Data actor whose process the first group's controller waited for.
The backend tells the trial's console line where the start is: joining the process group,
then loading the trial's code (the driver said "starting N workers"; rank 0 says when it runs).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import ray
from ray.train.backend import Backend, BackendConfig

from tuner.tune import _ray_internals as ray_internals
from tuner.tune._ray_internals import ControllerCallback
from tuner.tune.probe_actor import tell

__all__ = ["GroupBackendConfig", "OneLine", "TracebacksToTrialLog"]

_SHUTDOWN_TIMEOUT_S = 30.0  # Ray's own default for a process group's shutdown


@dataclasses.dataclass
class GroupBackendConfig(BackendConfig):
    """Ray's ``TorchConfig`` (``init_method="env"``) for gloo or nccl, defined without torch."""

    backend: str = "gloo"
    timeout_s: int = 1800
    cache_namespace: str = ""  # the probe cache, which keeps the console's running lines
    trial_id: str = ""  # whose line says what the group's start is at ("": none)

    @property
    def backend_cls(self) -> type[Backend]:
        return _GroupBackend

    @property
    def train_func_context(self) -> Any:
        return ray_internals.torch_train_context()  # read in the trial's driver, run on workers

    @property
    def framework(self) -> Any:
        return ray_internals.torch_framework()  # Ray Train's state export names the framework


class _GroupBackend(Backend):
    """``_TorchBackend``'s start and end of the process group, ordered from the controller;
    every torch call runs on the workers (:func:`_ray_internals.join_torch_group`)."""

    share_cuda_visible_devices: bool = True  # as Ray's torch backend: one node's GPUs shared

    def on_start(self, worker_group: Any, backend_config: GroupBackendConfig) -> None:
        """The workers' processes are up (a restarted group's too): join their process group,
        then each loads the trial's code (torch, timm, the engine) before rank 0 runs."""
        workers, config = len(worker_group), backend_config
        _tell(config, f"{workers} workers started, joining their {config.backend} group")
        address, port = worker_group.execute_single(0, ray_internals.address_and_port)
        joins = [
            worker_group.execute_single_async(
                rank,
                ray_internals.join_torch_group,
                backend=backend_config.backend,
                address=address,
                port=port,
                world_rank=rank,
                world_size=len(worker_group),
                timeout_s=backend_config.timeout_s,
            )
            for rank in range(len(worker_group))
        ]
        ray.get(joins)
        _tell(config, f"{workers} workers joined, loading the trial's code")

    def on_shutdown(self, worker_group: Any, backend_config: GroupBackendConfig) -> None:
        ends = worker_group.execute_async(
            ray_internals.leave_torch_group, destroy=len(worker_group) > 1
        )
        try:
            ray.get(ends, timeout=_SHUTDOWN_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            logging.getLogger(__name__).warning("the workers' process group did not end in time")


def _tell(config: GroupBackendConfig, what: str) -> None:
    tell(config.cache_namespace, config.trial_id, what)


class TracebacksToTrialLog(ControllerCallback):
    """In the controller's process: a Ray Train record with a traceback (a killed worker's,
    some 25 lines) goes whole to the trial's ``ray_train.log`` and to the console as its one
    first line, which names that file. The console keeps one line per event."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def after_controller_start(self, train_run_context: Any) -> None:
        logger = logging.getLogger("ray.train")
        to_file = logging.FileHandler(self.log)
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        to_file.setLevel(logging.WARNING)
        logger.handlers = [
            OneLine(h, self.log) if type(h).__name__ == "PlainRayHandler" else h
            for h in logger.handlers
        ] + [to_file]


class OneLine(logging.Handler):
    """A console handler that gets a record's first line, without its traceback."""

    def __init__(self, console: logging.Handler, log: Path) -> None:
        super().__init__(console.level)
        self.console, self.log = console, log

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.exc_text:
            first = record.getMessage().splitlines()[0] if record.getMessage() else ""
            line = f"{first} (Ray's traceback: {self.log})"
            fields = {**record.__dict__, "msg": line, "args": None, "exc_info": None}
            record = logging.makeLogRecord({**fields, "exc_text": None})
        self.console.handle(record)
