"""The machine's load from other work (tuner.measure.load), against a real CPU hog: what
``starved_by`` names and the report states (issue 48: four trials starved beside a hog all said
"budget", with no word of the load)."""

from __future__ import annotations

import subprocess
import sys
import time

from tuner.measure.load import LOADED_CORES, LoadMeter, load_text


def test_a_cpu_hog_reads_as_about_one_core_of_other_work() -> None:
    quiet = LoadMeter.start()
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = LoadMeter.start()
        time.sleep(2.0)
        with_hog = loaded.other_cores()
    finally:
        hog.kill()
        hog.wait()
    assert with_hog is not None and with_hog >= LOADED_CORES, with_hog  # the hog's core
    assert LoadMeter.start().other_cores() is None  # under a second: too short to say
    assert quiet.other_cores() is not None
    assert load_text(1.04).startswith("other processes kept 1.0 of ")
