"""Heartbeats of a warm rank pool's ranks through the group's own TCP store: each rank 1..N-1's
thread writes ``<count> <step>`` every ``BEAT_EVERY_S``; one silent for ``STALL_S`` is stopped,
frozen or cut off (a busy rank still beats). Not through Ray: Ray notices a stopped actor only
when its gRPC keepalive times out (412 s in issue 49's trial).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

__all__ = ["BEAT_EVERY_S", "STALL_S", "Beats", "note_step", "start_beating"]

logger = logging.getLogger(__name__)

BEAT_EVERY_S = 1.0
# A beat that has not come for this long is a stall. Well above a thread's longest wait for the
# GIL on a loaded machine (a beat is one store write), well below issue 49's "within 60 s".
STALL_S = 20.0
_KEY = "tuner/beat/{rank}"
_STEP = [0]  # this process's last reported step (RankRun._emit), sent with each beat


def note_step(step: int) -> None:
    _STEP[0] = int(step)


def start_beating(store: Any, rank: int) -> threading.Event:
    """Rank ``rank``'s heartbeat thread (its first beat written before this returns, so a reader
    never waits for the key); set the returned event to end it."""
    done = threading.Event()
    store.set(_KEY.format(rank=rank), f"0 {_STEP[0]}")
    thread = threading.Thread(target=_beat, args=(store, rank, done), daemon=True)
    thread.start()
    return done


def _beat(store: Any, rank: int, done: threading.Event) -> None:
    count = 0
    while not done.wait(BEAT_EVERY_S):
        count += 1
        try:
            store.set(_KEY.format(rank=rank), f"{count} {_STEP[0]}")
        except Exception as exc:  # the store's host (rank 0) ended the pool: nothing to tell
            logger.debug("rank %d stops beating: %s", rank, exc)
            return


@dataclasses.dataclass
class Beats:
    store: Any
    ranks: list[int]
    stall_s: float = STALL_S
    seen: dict[int, str] = dataclasses.field(default_factory=dict)
    changed: dict[int, float] = dataclasses.field(default_factory=dict)

    def read(self) -> None:
        now = time.monotonic()
        for rank in self.ranks:
            value = self.store.get(_KEY.format(rank=rank)).decode()
            if self.seen.get(rank) != value:
                self.seen[rank], self.changed[rank] = value, now
            self.changed.setdefault(rank, now)

    def silent_s(self, rank: int) -> float:
        return time.monotonic() - self.changed.get(rank, time.monotonic())

    def step(self, rank: int) -> int:
        return int(self.seen.get(rank, "0 0").split()[1])

    def stalled(self) -> list[int]:
        return [rank for rank in self.ranks if self.silent_s(rank) >= self.stall_s]

    def quietest(self) -> tuple[int, float]:
        rank = max(self.ranks, key=self.silent_s)
        return rank, self.silent_s(rank)
