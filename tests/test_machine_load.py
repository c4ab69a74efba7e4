"""The machine's load from other work (tuner.measure.load), against a real CPU hog: what
``starved_by`` names and the report states (issue 48: four trials starved beside a hog all said
"budget", with no word of the load; and a trial counted its sibling trials of the same search
as other work)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from tuner.measure.load import LOADED_CORES, RAYLET, LoadMeter, load_text

HOG = [sys.executable, "-c", "while True: pass"]


@contextmanager
def _outside_hog() -> Iterator[int]:
    """A CPU hog that is no process of ours: started by a shell that exits at once, so it is
    nobody's child here (a child of ours would be our own work)."""
    shell = f"{' '.join(HOG[:2])} '{HOG[2]}' >/dev/null 2>&1 & echo $!"
    pid = int(subprocess.run(["sh", "-c", shell], capture_output=True, text=True).stdout)
    try:
        assert pid not in {p.pid for p in psutil.Process().children(recursive=True)}
        yield pid
    finally:
        psutil.Process(pid).kill()


def test_a_cpu_hog_reads_as_about_one_core_of_other_work() -> None:
    quiet = LoadMeter.start()
    with _outside_hog():
        loaded = LoadMeter.start()
        time.sleep(2.0)
        with_hog = loaded.other_cores()
    assert with_hog is not None and with_hog >= LOADED_CORES, with_hog  # the hog's core
    assert LoadMeter.start().other_cores() is None  # under a second: too short to say
    assert quiet.other_cores() is not None
    assert load_text(1.04).startswith("other processes kept 1.0 of ")


# A trial's process (a Ray worker, the raylet's child): the load it measures beside a sibling
# trial (the raylet's other child, a hog), with the search's tree as its own (the default) and
# with its own process tree alone, over the same seconds; and the hog's own CPU meanwhile.
_TRIAL = """
import json, os, sys, time
import psutil
from tuner.measure.load import LoadMeter
sibling = psutil.Process(int(sys.argv[1]))
before = sum(sibling.cpu_times()[:2])
search, alone = LoadMeter.start(), LoadMeter.start(root=os.getpid())
time.sleep(1.5)
wall = time.monotonic() - search.wall
said = {"search": search.other_cores(), "alone": alone.other_cores()}
sibling_cores = (sum(sibling.cpu_times()[:2]) - before) / wall
print(json.dumps({**said, "root": search.root, "sibling": sibling_cores, "parent": os.getppid()}))
"""
# The node's Ray (a process named raylet, as Ray's is): a sibling trial, then the trial.
_RAYLET = """
import subprocess, sys
python, trial = sys.argv[1], sys.argv[2]
sibling = subprocess.Popen([python, "-c", "while True: pass"])
try:
    done = subprocess.run([python, "-c", trial, str(sibling.pid)], capture_output=True, text=True)
    print(done.stdout, end="")
    sys.stderr.write(done.stderr)
finally:
    sibling.kill()
"""


def _trial_under_ray(tmp_path: Path, *, driver: list[str]) -> dict:
    """Run :data:`_TRIAL` as a trial: ``driver`` starts the node's raylet, its sibling trial
    and it (``[]``: this test's Python process is the driver)."""
    raylet = tmp_path / RAYLET
    raylet.symlink_to(sys.executable)  # a process named raylet (the name is the file's)
    command = [str(raylet), "-c", _RAYLET, sys.executable, _TRIAL]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([*driver, *command], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_sibling_trial_of_the_same_search_is_not_other_work(tmp_path: Path) -> None:
    """Issue 48: starved_by's load counted the trials of the same search beside a trial as
    other work (other = the machine less the trial's own process tree). The search's tree is
    its driver's: a sibling trial's CPU is the search's own."""
    said = _trial_under_ray(tmp_path, driver=[])
    assert said["root"] == os.getpid()  # the driver: the raylet's parent, a Python process
    assert said["sibling"] > 0.05, said  # the sibling trial ran meanwhile
    # counted as other work by the trial's tree alone, not by the search's (same seconds)
    assert said["alone"] - said["search"] >= 0.8 * said["sibling"], said


def test_a_raylet_no_driver_of_ours_started_is_the_search_s_root(tmp_path: Path) -> None:
    """A node ``ray start`` started: the raylet's parent is no Python driver (here a shell),
    so the raylet's tree is the search's on this node."""
    said = _trial_under_ray(tmp_path, driver=["sh", "-c", '"$0" "$@"; :'])
    assert said["root"] == said["parent"] != os.getpid()  # the raylet
    assert said["alone"] - said["search"] >= 0.8 * said["sibling"] > 0, said
