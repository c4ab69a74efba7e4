"""The machine's load from other work: how many cores other processes kept busy while
something of ours ran (a trial, the re-measurement).

Measured, not guessed: the whole machine's busy CPU seconds (``psutil.cpu_times``: user,
system, nice, irq...) less those of our own process tree, over the wall time between two
samples. A CPU hog on one core reads about 1.0; a quiet machine about 0.0-0.1 (Ray's own
processes count as other work: they are small). The load average (``os.getloadavg``) would
count our own threads too, and smooth over a minute that may not be ours.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = ["LOADED_CORES", "LoadMeter", "load_text"]

# Other work keeping half a core busy on average is load a trial's speed feels (a 2-core CPU
# trial beside it loses up to a quarter of its cores): below that, "machine load" is not said.
LOADED_CORES = 0.5


def _busy_s() -> float:
    import psutil

    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def _own_s() -> float:
    """CPU seconds of this process and its live descendants (a data loader's workers)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for process in (me, *me.children(recursive=True)):
        try:
            used = process.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += used.user + used.system
    ended = me.cpu_times()  # children already reaped: counted in the parent's children_* times
    return total + ended.children_user + ended.children_system


@dataclass
class LoadMeter:
    """Samples taken at :meth:`start`; :meth:`other_cores` says the load since then."""

    wall: float = 0.0
    busy: float = 0.0
    own: float = 0.0

    @classmethod
    def start(cls) -> LoadMeter:
        return cls(time.monotonic(), _busy_s(), _own_s())

    def other_cores(self) -> float | None:
        """Cores other processes kept busy on average since :meth:`start` (None: under a
        second passed, too short to say)."""
        wall = time.monotonic() - self.wall
        if wall < 1.0:
            return None
        other = (_busy_s() - self.busy) - (_own_s() - self.own)
        return max(0.0, other / wall)


def load_text(cores: float | None) -> str:
    """``other processes kept 1.0 of 2 cores busy`` (the machine's core count)."""
    if cores is None:
        return "not measured"
    return f"other processes kept {cores:.1f} of {os.cpu_count() or '?'} cores busy"
