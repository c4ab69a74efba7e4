"""The machine cache of speed probes: per fingerprint, aged, safe for concurrent writers; and the
experiment's cache reading and writing through it (``--fresh-probes`` skips the reading)."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import time
from pathlib import Path

import pytest

import tuner
from tuner.speed.cache import Lookup, ProbeCache, machine_cache_line
from tuner.speed.machine_cache import Entry, Machine, MachineCache, entry_key, this_machine
from tuner.usercache import CACHE_DIR_ENV, cache_dir

KEY = json.dumps({"model": "resnet18", "batch_size": 32, "device_name": "cpu"}, sort_keys=True)
CHOICE = {"settings": {"channels_last": True}, "first_step_unix_s": 1_700_000_000.0}


def _machine(**changes: object) -> Machine:
    base = Machine(
        cpu_model="EPYC",
        cpu_count=2,
        gpus=(),
        gpu_driver="",
        torch="2.5.0",
        cuda="",
        timm="1.0.0",
        tuner="0.1.0",
    )
    return dataclasses.replace(base, **changes)


def test_the_cache_folder_is_the_override_else_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "tuner"


def test_an_entry_is_remembered_with_when_it_was_measured(tmp_path: Path) -> None:
    cache = MachineCache(_machine(), tmp_path)
    assert cache.get("k") is None  # no file yet
    cache.put("k", Entry(CHOICE, measured_unix_s=time.time() - 3600, experiment="first"))
    entry = MachineCache(_machine(), tmp_path).get("k")
    assert entry is not None and entry.choice == CHOICE and entry.experiment == "first"
    assert 3590 < entry.age_s() < 3700
    saved = json.loads(cache.path.read_text())
    assert saved["machine"]["cpu_model"] == "EPYC"  # a person can tell whose file it is


@pytest.mark.parametrize(
    "change",
    [
        {"tuner": "0.2.0"},
        {"torch": "2.6.0"},
        {"timm": "1.0.1"},
        {"gpu_driver": "550.54"},
        {"gpus": ("NVIDIA H100",)},
        {"cpu_count": 16},
        {"cpu_model": "Xeon"},
    ],
)
def test_a_changed_fingerprint_misses(tmp_path: Path, change: dict[str, object]) -> None:
    MachineCache(_machine(), tmp_path).put("k", Entry(CHOICE, measured_unix_s=time.time()))
    assert MachineCache(_machine(**change), tmp_path).get("k") is None
    assert MachineCache(_machine(), tmp_path).get("k") is not None


def test_this_machine_follows_the_installed_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    before = this_machine()
    assert before.tuner == tuner.__version__ and before.cpu_count >= 1
    monkeypatch.setattr(tuner._version, "__version__", "99.0.0")  # an upgrade of tuner
    assert this_machine().tuner == "99.0.0" and this_machine().id != before.id


def test_the_memory_budget_and_the_trials_threads_are_part_of_the_key() -> None:
    assert entry_key(KEY, max_memory_bytes=None) != entry_key(KEY, max_memory_bytes=2**30)
    few, many = (entry_key(KEY, max_memory_bytes=None, threads=n) for n in (2, 16))
    assert few != many  # a verdict probed on 2 threads is no verdict for 16


@pytest.mark.parametrize(
    "damaged",
    ['{"format": 1, "entries": {"k": ', '{"format": 1, "entries": []}', "[1]"],
    ids=["cut short", "entries not a table", "not an object"],
)
def test_a_damaged_file_reads_as_empty_and_is_replaced(tmp_path: Path, damaged: str) -> None:
    cache = MachineCache(_machine(), tmp_path)
    cache.path.parent.mkdir(parents=True)
    cache.path.write_text(damaged)  # a writer of another tool died, or wrote something else
    assert cache.entries() == {}
    cache.put("k", Entry(CHOICE, measured_unix_s=1.0))
    assert set(MachineCache(_machine(), tmp_path).entries()) == {"k"}


def _write_many(folder: str, writer: int, count: int, start: float) -> None:
    while time.time() < start:  # both processes begin together
        time.sleep(0.001)
    cache = MachineCache(_machine(), Path(folder))
    for i in range(count):
        cache.put(f"{writer}-{i}", Entry({"settings": {}, "i": i}, measured_unix_s=time.time()))


def test_two_processes_writing_at_once_keep_every_entry(tmp_path: Path) -> None:
    count = 40
    spawn = multiprocessing.get_context("spawn")  # two real interpreters, as two searches
    start = time.time() + 3.0
    writers = [
        spawn.Process(target=_write_many, args=(str(tmp_path), w, count, start)) for w in (1, 2)
    ]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=120)
        assert process.exitcode == 0
    cache = MachineCache(_machine(), tmp_path)
    data = json.loads(cache.path.read_text())  # valid JSON: never half a file
    assert set(data["entries"]) == {f"{w}-{i}" for w in (1, 2) for i in range(count)}
    assert not list(cache.path.parent.glob("*.tmp"))  # no temporary file left behind


# ---- the experiment's cache through the machine cache (the actor's class, without Ray) ----


def _lookup(machine: Machine | None = None) -> Lookup:
    return Lookup(KEY, machine or _machine(), max_memory_bytes=None)


def test_a_new_experiment_reads_what_an_earlier_one_probed(tmp_path: Path) -> None:
    first = ProbeCache(str(tmp_path / "a" / "probe_cache.json"), str(tmp_path), experiment="a")
    assert first.get(_lookup()) is None
    first.put(_lookup(), CHOICE)
    assert first.get(_lookup()).source == "cache"  # type: ignore[union-attr]
    second = ProbeCache(str(tmp_path / "b" / "probe_cache.json"), str(tmp_path), experiment="b")
    found = second.get(_lookup())
    assert found is not None and found.source == "machine cache" and found.choice == CHOICE
    assert found.age_s is not None and found.age_s > 0
    again = second.get(_lookup())  # the next trial of b with that key: still an earlier search's
    assert again is not None and again.source == "machine cache"
    assert json.loads((tmp_path / "b" / "probe_cache.json").read_text()) == {KEY: CHOICE}
    third = ProbeCache(str(tmp_path / "c" / "probe_cache.json"), str(tmp_path))
    assert third.get(_lookup(_machine(tuner="0.2.0"))) is None  # a new version probes again


def test_fresh_probes_ignore_the_machine_cache_and_replace_it(tmp_path: Path) -> None:
    ProbeCache(str(tmp_path / "a.json"), str(tmp_path)).put(_lookup(), CHOICE)
    fresh = ProbeCache(str(tmp_path / "b.json"), str(tmp_path), fresh=True, experiment="b")
    assert fresh.get(_lookup()) is None
    newer = {**CHOICE, "first_step_unix_s": CHOICE["first_step_unix_s"] + 60}
    fresh.put(_lookup(), newer)
    entry = MachineCache(_machine(), tmp_path).get(_lookup().machine_key)
    assert entry is not None and entry.choice == newer and entry.experiment == "b"
    assert fresh.stats()["machine_cache"] == {
        "folder": str(tmp_path),
        "fresh": True,
        "reused": 0,
        "written": 1,
    }
    assert machine_cache_line(fresh.stats()) == (
        "Speed probes: 0 training config(s) reused from earlier searches on this machine, 1 "
        f"probed and remembered (--fresh-probes: earlier ones ignored) in {tmp_path}"
    )


def test_a_verdict_on_fewer_speed_repeats_is_probed_again_and_replaced(tmp_path: Path) -> None:
    once = {**CHOICE, "repeats": 1}
    ProbeCache(str(tmp_path / "a.json"), str(tmp_path)).put(_lookup(), once)
    asks_three = dataclasses.replace(_lookup(), repeats=3)
    later = ProbeCache(str(tmp_path / "b.json"), str(tmp_path), experiment="b")
    assert later.get(asks_three) is None  # one repeat is not the three this search asks for
    assert later.get(dataclasses.replace(_lookup(), repeats=1)) is not None  # as many: reused
    thrice = {**CHOICE, "repeats": 3}
    ProbeCache(str(tmp_path / "c.json"), str(tmp_path), experiment="c").put(asks_three, thrice)
    found = ProbeCache(str(tmp_path / "d.json"), str(tmp_path)).get(asks_three)
    assert found is not None and found.choice == thrice  # the better verdict replaced it


def test_without_a_machine_folder_only_the_experiment_remembers(tmp_path: Path) -> None:
    alone = ProbeCache(str(tmp_path / "a.json"), None)
    alone.put(_lookup(), CHOICE)
    assert not (tmp_path / "speed_probes").exists()
    assert machine_cache_line(alone.stats()).endswith("(no machine cache).")


def test_every_gpu_of_the_machine_and_its_driver_come_from_nvidia_smi(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tuner.speed.machine_cache import _nvidia_gpus

    smi = tmp_path / "nvidia-smi"  # prints what the real one prints for two H100s
    smi.write_text("#!/bin/sh\nprintf 'NVIDIA H100 80GB HBM3, 550.54.15\\n%.0s' 1 2\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _nvidia_gpus() == (("NVIDIA H100 80GB HBM3",) * 2, "550.54.15")
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert _nvidia_gpus() == ((), "")  # no NVIDIA driver: no GPU named, no driver
