"""One owner of a search's start and stop (tuner/tune/driver.py): the only places in tuner/ that
install a signal handler or catch Ctrl-C / SIGTERM are the driver and the Ray adapter (and the
command line's exit code), read from the source with ast; the driver's one handler takes
SIGTERM as Ctrl-C, hands it to Tune's own handler inside a fit, and leaves the process's
handlers as it found them. The end-to-end stops: tests/tune/test_sigterm.py, test_driver.py,
test_resume.py, test_usage_errors.py."""

from __future__ import annotations

import ast
import os
import signal
import time
from pathlib import Path

import pytest

import tuner
from tuner.api import SearchOptions
from tuner.errors import Terminated, TunerError
from tuner.tune.driver import SearchDriver

ROOT = Path(__file__).resolve().parents[2] / "tuner"
# The exceptions a Ctrl-C or SIGTERM arrives as (SystemExit: ray.init's own SIGTERM exit).
STOPS = {"KeyboardInterrupt", "Terminated", "SystemExit"}
# Each file that may handle them, and why.
OWNERS = {
    "tune/driver.py": "the one owner: the handler, and what a stop says and writes per phase",
    "tune/_ray_internals.py": "Tune's SIGINT handler and ray.init's SIGTERM exit, put back",
    "commands/__init__.py": "the exit code of every command (130, 143), as for TunerError",
}


def _handles(tree: ast.AST) -> list[str]:
    """Where ``tree`` installs a signal handler, catches a stop or raises Terminated."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "signal.signal":
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ExceptHandler) and node.type is not None:
            names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.type) if isinstance(n, ast.Attribute)}
            if names & STOPS:
                found.append(f"{node.lineno}: except {ast.unparse(node.type)}")
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if ast.unparse(raised).split(".")[-1] in STOPS - {"SystemExit"}:  # not an exit
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def handling_files(root: Path = ROOT) -> dict[str, list[str]]:
    """Each file under ``root`` that handles Ctrl-C or SIGTERM, with the lines that do."""
    places = {}
    for path in sorted(root.rglob("*.py")):
        found = _handles(ast.parse(path.read_text(), filename=str(path)))
        if found:
            places[path.relative_to(root).as_posix()] = found
    return places


def test_only_the_driver_and_the_adapter_handle_ctrl_c_and_sigterm() -> None:
    places = handling_files()
    assert set(places) == set(OWNERS), "\n".join(f"{f}: {lines}" for f, lines in places.items())
    installs = {f for f, lines in places.items() if any("signal.signal(" in x for x in lines)}
    assert installs == {"tune/driver.py", "tune/_ray_internals.py"}, places


def test_the_scan_sees_each_way_of_handling_a_stop() -> None:
    planted = """
import signal
def a():
    signal.signal(signal.SIGTERM, print)
def b():
    try:
        pass
    except (OSError, KeyboardInterrupt):
        pass
def c(exc):
    raise errors.Terminated from exc
def d():
    try:
        pass
    except ValueError:
        pass
"""
    assert [line.split(":")[0] for line in _handles(ast.parse(planted))] == ["4", "8", "11"]


def _handlers() -> dict[int, object]:
    return {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (9, 19)}


def test_sigterm_is_ctrl_c_in_the_driver_and_the_handlers_come_back(tmp_path: Path) -> None:
    from ray.tune import tune

    from tuner.tune import _ray_internals as ray_internals

    before = _handlers()
    driver = SearchDriver(SearchOptions(space="smoke_space", storage=str(tmp_path)))
    with pytest.raises(Terminated), driver._handler():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs at the next bytecode
    assert driver.signals == [signal.SIGTERM] and _handlers() == before
    with driver._handler():  # inside Tuner.fit: Tune's own handler takes it, nothing raised

        def fit() -> object:  # Tune's handlers as Tuner.fit installs them, then a SIGTERM
            stopped = tune._setup_signal_catching()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)
            return stopped

        stopped, interrupted = ray_internals.fit_keeping_handlers(fit)
        assert stopped.is_set() and interrupted  # the trials stop and save; said as Ctrl-C
        assert signal.getsignal(signal.SIGINT) == driver._on_signal
    assert driver.signals == [signal.SIGTERM] * 2 and _handlers() == before


def test_a_search_from_python_leaves_the_signal_handlers_as_it_found_them(tmp_path: Path) -> None:
    """A search refused inside its lock (its checks) puts the caller's handlers back; a whole
    search does too (tests/tune/test_user_code_search.py)."""

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("not during the search")

    previous = {s: signal.signal(s, mine) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        before = _handlers()
        with pytest.raises(TunerError, match="Unknown search space"):  # in the lock's checks
            tuner.search("no_such_space_anywhere", storage=str(tmp_path))
        assert _handlers() == before
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
