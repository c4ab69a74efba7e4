"""The machine's load from other work: the cores other processes kept busy while something of
ours ran, measured as the machine's busy CPU seconds (``psutil.cpu_times``) less those of the
search's own process tree (:func:`search_root`: its other trials, probe cache and Ray are
planned work, not load), over the wall time. A hog on one core reads about 1.0. The load
average would count our own threads too, and smooth over a minute that may not be ours.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["LOADED_CORES", "LoadMeter", "load_text", "search_root"]

# Other work keeping half a core busy on average is load a trial's speed feels (a 2-core CPU
# trial beside it loses up to a quarter of its cores): below that, "machine load" is not said.
LOADED_CORES = 0.5


def _busy_s() -> float:
    import psutil

    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def _tree_s(root: int) -> float:
    """CPU seconds of ``root`` and its descendants, the reaped ones' included."""
    import psutil

    try:
        top = psutil.Process(root)
        tree = [top, *top.children(recursive=True)]
    except psutil.Error:  # ended meanwhile: nothing of it left to count
        return 0.0
    total = 0.0
    for process in tree:
        try:
            used = process.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += used.user + used.system + used.children_user + used.children_system
    return total


# Ray's process on each node: every Ray worker's (a trial's) parent.
RAYLET = "raylet"


def search_root() -> int:
    """The PID whose tree is this search's work: the driver that started this node's Ray (the
    raylet's Python parent), else the raylet (``ray start``); outside Ray, this process."""
    import psutil

    me = psutil.Process()
    try:
        parents = me.parents()
    except psutil.Error:
        return me.pid
    for i, process in enumerate(parents):
        with contextlib.suppress(psutil.Error):
            if process.name() == RAYLET:
                above = parents[i + 1] if i + 1 < len(parents) else None
                return above.pid if above is not None and _is_python(above) else process.pid
    return me.pid


def _is_python(process: Any) -> bool:
    import psutil

    try:
        return "python" in os.path.basename(process.exe()).lower()
    except psutil.Error:  # init, another user's: not a driver of ours
        return False


@dataclass
class LoadMeter:
    """Samples taken at :meth:`start`; :meth:`other_cores` says the load since then."""

    wall: float = 0.0
    busy: float = 0.0
    own: float = 0.0
    root: int = 0  # the process whose tree is ours (search_root)

    @classmethod
    def start(cls, root: int | None = None) -> LoadMeter:
        root = search_root() if root is None else root
        return cls(time.monotonic(), _busy_s(), _tree_s(root), root)

    def other_cores(self) -> float | None:
        """Cores other processes kept busy since :meth:`start` (None under a second)."""
        wall = time.monotonic() - self.wall
        if wall < 1.0:
            return None
        other = (_busy_s() - self.busy) - (_tree_s(self.root) - self.own)
        return max(0.0, other / wall)


def load_text(cores: float | None) -> str:
    """``other processes kept 1.0 of 2 cores busy`` (the machine's core count)."""
    if cores is None:
        return "not measured"
    return f"other processes kept {cores:.1f} of {os.cpu_count() or '?'} cores busy"
