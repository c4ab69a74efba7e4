"""The user's own module on a 2-node loopback cluster: a module only the driver can import (the
nodes' PYTHONPATH is the repository alone) reaches the other node with the job (Ray's runtime
environment, py_modules), where a data-parallel trial's second worker builds its model."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys

import pytest
from conftest import HEAD_IP, REPO, WORKER_IPS, RayCluster, isolated_env, scratch_root

pytestmark = [pytest.mark.slow, pytest.mark.machine]

EXAMPLE = REPO / "examples" / "own_space.py"
MODULE = "own_space_mod"
# One task pinned to each alive node, each saying whether it cannot import the module itself.
CANNOT_IMPORT = f"""
import importlib.util, json, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init()
nodes = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
absent = ray.remote(num_cpus=1)(lambda: importlib.util.find_spec({MODULE!r}) is None)
pinned = [NodeAffinitySchedulingStrategy(node, soft=False) for node in nodes]
print(json.dumps(ray.get([absent.options(scheduling_strategy=p).remote() for p in pinned])))
"""


def test_a_module_only_the_driver_has_trains_on_both_nodes() -> None:
    with scratch_root() as root:
        cluster = RayCluster(root=root, env=isolated_env(root, token=secrets.token_hex(32)))
        cluster.start_node(head=True, ip=HEAD_IP)
        cluster.start_node(head=False, ip=WORKER_IPS[0])
        code = root / "usercode"
        code.mkdir()
        shutil.copy(EXAMPLE, code / f"{MODULE}.py")
        # The control: on its own, no node imports the module.
        control = cluster.run_python(CANNOT_IMPORT)
        assert control.returncode == 0, control.stderr[-3000:]
        assert json.loads(control.stdout.strip().splitlines()[-1]) == [True, True]
        env = cluster.driver_env(PYTHONPATH=f"{REPO}{os.pathsep}{code}")
        command = [
            sys.executable, "-m", "tuner", "search", MODULE, "--world-size", "2",
            "--spread-workers", "--num-samples", "1", "--cpus-per-trial", "1",
            "--name", "own", "--storage", str(root / "exp"), "--no-report",
            "--remeasure-top", "0", "--effects-repeats", "0", "--speed-repeats", "1",
        ]  # fmt: skip
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=400, cwd=root
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        (result,) = (root / "exp" / "own").glob("*/result.json")
        final = json.loads(result.read_text().splitlines()[-1])
        assert final["status"] == "ok" and final["final"] is True and final["world_size"] == 2
        assert final["config"]["model"] == f"{MODULE}:build_model"
        assert final["node"] in (HEAD_IP, WORKER_IPS[0])  # rank 0's; rank 1 is on the other
