"""Speed probes remembered per machine across experiments (the file format:
docs/architecture.md): one JSON file per machine fingerprint (:class:`Machine`), so a changed
machine or software misses and probes again. Writers hold ``filelock``'s lock (``flock``: freed
when the process dies), merge their entry and replace the file atomically: readers see a whole
file, no writer drops another's entry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from tuner.record import MAX_MEMORY_BYTES
from tuner.usercache import cache_dir

__all__ = [
    "Entry",
    "Machine",
    "MachineCache",
    "entry_key",
    "replace_json",
    "this_machine",
]

_SUBDIR = "speed_probes"
_FORMAT = 1


@dataclass(frozen=True)
class Machine:
    """What decides a speed probe besides the training config: hardware and software."""

    cpu_model: str
    cpu_count: int
    gpus: tuple[str, ...]  # every GPU of the machine, by model name
    gpu_driver: str  # "" without an NVIDIA driver
    torch: str
    cuda: str  # the CUDA runtime torch was built with ("" for a CPU build)
    timm: str
    tuner: str

    @property
    def id(self) -> str:
        """A short digest of every field: the name of the machine's cache file."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def this_machine() -> Machine:
    """The fingerprint of the machine this process runs on (the hardware is read once)."""
    import timm
    import torch

    from tuner import _version

    cpu_model, cpu_count, gpus, gpu_driver = _hardware()
    return Machine(
        cpu_model=cpu_model,
        cpu_count=cpu_count,
        gpus=gpus,
        gpu_driver=gpu_driver,
        torch=torch.__version__,
        cuda=torch.version.cuda or "",
        timm=timm.__version__,
        tuner=_version.__version__,
    )


@functools.cache
def _hardware() -> tuple[str, int, tuple[str, ...], str]:
    import torch

    gpus, driver = _nvidia_gpus()
    if not gpus and torch.cuda.is_available():  # a GPU without nvidia-smi (ROCm, a container)
        gpus = tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    return _cpu_model(), os.cpu_count() or 1, gpus, driver


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _nvidia_gpus() -> tuple[tuple[str, ...], str]:
    """Every NVIDIA GPU and the driver version: nvidia-smi, as a trial's torch sees only its
    own GPUs and not the driver."""
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return (), ""
    rows = [[part.strip() for part in line.split(",")] for line in out.splitlines() if line]
    return tuple(row[0] for row in rows), (rows[0][-1] if rows else "")


def entry_key(speed_key: str, *, max_memory_bytes: int | None, threads: int | None = None) -> str:
    """An entry's key: the speed key, the memory budget (it decides what is kept) and the
    trial's CPU threads (what a loader worker costs): constant in an experiment, not across."""
    key = {"config": json.loads(speed_key), MAX_MEMORY_BYTES: max_memory_bytes}
    if threads is not None:
        key["threads"] = threads
    return json.dumps(key, sort_keys=True)


@dataclass(frozen=True)
class Entry:
    """One remembered speed choice."""

    choice: dict[str, Any]  # SpeedChoice.to_dict()
    measured_unix_s: float  # when its probes ran
    experiment: str = ""  # the experiment that measured it

    def age_s(self) -> float:
        return max(0.0, time.time() - self.measured_unix_s)


class MachineCache:
    """The speed choices measured on one machine, in ``<cache dir>/speed_probes/<id>.json``."""

    def __init__(self, machine: Machine, folder: Path | None = None) -> None:
        self.machine = machine
        self.path = (folder or cache_dir()) / _SUBDIR / f"{machine.id}.json"

    def get(self, key: str) -> Entry | None:
        return self.entries().get(key)

    def entries(self) -> dict[str, Entry]:
        return {key: Entry(**value) for key, value in self._read().items()}

    def put(self, key: str, entry: Entry) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(self.path.with_suffix(".lock")):
            entries = {**self._read(), key: dataclasses.asdict(entry)}
            machine = dataclasses.asdict(self.machine)
            replace_json(self.path, {"format": _FORMAT, "machine": machine, "entries": entries})

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
            entries = data["entries"] if data.get("format") == _FORMAT else {}
            return {k: v for k, v in entries.items() if _valid(v)}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):  # damaged: forget it
            return {}


def replace_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` atomically: readers see the old file or the new, whole."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as file:
            json.dump(data, file, indent=1, sort_keys=True)
            file.flush()
            os.fsync(file.fileno())  # the rename must not outlive the data (power loss)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _valid(value: Any) -> bool:
    fields = {f.name for f in dataclasses.fields(Entry)}
    return (
        isinstance(value, dict)
        and set(value) <= fields
        and isinstance(value.get("choice"), dict)
        and isinstance(value.get("measured_unix_s"), int | float)
    )
