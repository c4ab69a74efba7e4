"""Ray's own lines stay off the console (issue 40): what Ray's driver threads print and what its
C++ core writes to file descriptor 2 go to ray.log in the experiment folder, named once;
``--verbose`` leaves them on the console. Each case runs in its own process, whose real stdout
and stderr the test reads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tuner.experiment import RAY_LOG_FILE

# What Ray prints, from where it prints it: a C++ line on descriptor 2, the raylet's "worker
# died" paragraph from the driver thread that prints the errors Ray sends it, and Tune's
# warning after a slow tracker callback, from its logger on the main thread.
_SCRIPT = textwrap.dedent(
    """
    import logging, os, sys, threading
    from pathlib import Path
    import ray.tune  # Ray's loggers, with their console handlers (ray.init keeps them: cluster.py)
    from tuner.tune.ray_log import ray_lines_to_file

    def ray_thread():
        print("(raylet) A worker died or was killed while executing a task.")

    with ray_lines_to_file(Path(sys.argv[1]), verbose=sys.argv[2] == "verbose"):
        print("[1/2 trial line] ok")
        print("error: one line of ours", file=sys.stderr)
        os.write(2, b"[mutex.cc : 452] RAW: Lock blocking 0x1234\\n")
        thread = threading.Thread(target=ray_thread, name="ray_listen_error_messages")
        thread.start()
        thread.join()
        logging.getLogger("ray.tune.utils.util").warning(
            "The `process_trial_result` operation took 0.999 s, which may be a performance "
            "bottleneck."
        )
        logging.getLogger("ray._private.authentication.authentication_token_setup").warning(
            "Token authentication is enabled for this Ray cluster."
        )
        logging.getLogger("tuner.tune.cluster").warning("a line of ours, through the last resort")
    logging.getLogger("ray.tune").warning("Ray after the search")
    print("after the search")
    print("error: after", file=sys.stderr)
    """
)
RAY_LINES = ("[mutex.cc : 452] RAW: Lock blocking", "(raylet) A worker died",
             "may be a performance bottleneck", "Token authentication is enabled")  # fmt: skip


@pytest.mark.parametrize("verbose", [False, True])
def test_ray_s_own_lines_go_to_the_log_file_unless_verbose(tmp_path: Path, verbose: bool) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path), "verbose" if verbose else "quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    console = done.stdout + done.stderr
    for ours in ("[1/2 trial line] ok", "after the search"):
        assert ours in done.stdout
    assert "error: one line of ours" in done.stderr and "error: after" in done.stderr
    assert "a line of ours, through the last resort" in done.stderr
    assert "Ray after the search" in done.stderr  # Ray's loggers are put back after the block
    log = tmp_path / RAY_LOG_FILE
    if verbose:
        assert all(line in console for line in RAY_LINES), console
        assert not log.exists()
    else:
        assert not any(line in console for line in RAY_LINES), console
        assert all(line in log.read_text() for line in RAY_LINES)
        assert done.stdout.count(str(log)) == 1  # named once
