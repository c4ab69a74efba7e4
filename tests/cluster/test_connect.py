"""connect(): a loopback-only local Ray, joining token clusters, and one-line errors."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, RayCluster, isolated_env, last_json, run_connect

from tuner.tune.cluster import is_loopback_address

pytestmark = pytest.mark.machine  # local Ray instances and token clusters

# Starts a local instance through connect(), then lists what the Ray processes it started
# (its descendants: GCS, raylet, workers, agents) listen on.
LISTENING_DRIVER = """
import json, sys
import psutil, ray
from tuner.tune.cluster import connect, shutdown
info = connect(num_cpus=1, dashboard=json.loads(sys.argv[1]))
ray.get(ray.remote(lambda: 1).remote())  # a worker process too
pids = {p.pid for p in psutil.Process().children(recursive=True)} | {psutil.Process().pid}
listening = sorted({
    (c.laddr.ip, psutil.Process(c.pid).name())
    for c in psutil.net_connections(kind="inet")
    if c.status == psutil.CONN_LISTEN and c.pid in pids
})
print(json.dumps({"info": info.__dict__, "listening": listening}))
shutdown()
"""
LOOPBACK_IPS = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def _dashboard_available() -> bool:
    from ray._private.utils import get_dashboard_dependency_error

    return get_dashboard_dependency_error() is None


def _run_local(root: Path, *, dashboard: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LISTENING_DRIVER, json.dumps(dashboard)],
        env=isolated_env(root, token=secrets.token_hex(32)),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_dashboard_without_its_packages_is_a_one_line_error(cluster_root: Path) -> None:
    if _dashboard_available():
        pytest.skip("ray[default] is installed here; the loopback test covers the dashboard")
    done = run_connect(isolated_env(cluster_root, token=secrets.token_hex(32)), dashboard=True)
    assert done.returncode == 2
    assert done.stdout.startswith("TunerError: The Ray dashboard needs")


@pytest.mark.parametrize("dashboard", [False, True])
def test_local_ray_listens_on_loopback_only(cluster_root: Path, dashboard: bool) -> None:
    if dashboard and not _dashboard_available():
        pytest.skip("the Ray dashboard needs ray[default], not installed here")
    done = _run_local(cluster_root, dashboard=dashboard)
    assert done.returncode == 0, done.stderr[-3000:]
    out = last_json(done.stdout)
    names = {name for _, name in out["listening"]}
    assert {"gcs_server", "raylet"} <= names  # we did see Ray's servers
    exposed = [(ip, name) for ip, name in out["listening"] if ip not in LOOPBACK_IPS]
    assert exposed == [], f"Ray listens beyond loopback: {exposed}"
    assert out["info"]["is_local"] and out["info"]["loopback_only"]
    assert out["info"]["address"].startswith("127.0.0.1:")
    assert out["info"]["total_cpus"] == 1.0
    if dashboard:
        assert out["info"]["dashboard_url"].startswith("127.0.0.1:")
    else:
        assert out["info"]["dashboard_url"] == ""


def test_joins_a_token_cluster_with_the_token(token_cluster: RayCluster) -> None:
    done = run_connect(token_cluster.driver_env())
    assert done.returncode == 0, done.stderr[-3000:]
    info = last_json(done.stdout)
    assert info["address"] == token_cluster.address
    assert not info["is_local"]
    assert info["auth_mode"] == "token"
    assert (info["nodes"], info["total_cpus"]) == (1, 1.0)
    assert "reachable from other hosts" not in done.stderr


@pytest.mark.parametrize("token", ["missing", "wrong"])
def test_token_cluster_refuses_a_driver_without_its_token(
    token_cluster: RayCluster, token: str
) -> None:
    env = token_cluster.driver_env()
    if token == "missing":
        del env["RAY_AUTH_TOKEN"]
        env["RAY_AUTH_MODE"] = "disabled"
    else:
        env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    done = run_connect(env)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stdout.count("\n") == 1  # one line for people
    # tuner's own one-request check answered (cluster._check_token), before ray.init and its
    # ~20 s retry loop; no clock: load moves it
    assert "refused this driver's authentication token" in done.stdout


@pytest.mark.slow  # a second node's start: 35 s (tests/tiers.py: FAST_CPU)
def test_token_cluster_refuses_a_worker_node_without_the_token(
    token_cluster: RayCluster,
) -> None:
    env = {**token_cluster.env, "RAY_AUTH_MODE": "disabled"}
    del env["RAY_AUTH_TOKEN"]
    stranger = RayCluster(root=token_cluster.root, env=env, address=token_cluster.address)
    with pytest.raises(RuntimeError, match="Authentication token is missing or incorrect"):
        stranger.start_node(head=False)
    assert token_cluster.alive_nodes() == 1


@pytest.mark.slow  # a cluster of its own (tests/tiers.py: FAST_CPU)
def test_warns_when_an_open_cluster_is_reachable_from_other_hosts(cluster_root: Path) -> None:
    cluster = RayCluster(root=cluster_root, env=isolated_env(cluster_root, token=None))
    cluster.start_node(head=True, ip="127.0.0.2")  # not 127.0.0.1: Ray listens on all interfaces
    done = run_connect(cluster.driver_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert last_json(done.stdout)["auth_mode"] == "disabled"
    warnings = [line for line in done.stderr.splitlines() if "reachable from other hosts" in line]
    assert len(warnings) == 1 and "RAY_AUTH_MODE=token" in warnings[0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"address": "127.0.0.1:9"}, "Could not connect to the Ray cluster at"),
        ({"address": "ray://127.0.0.1:10001"}, "Ray Client addresses"),
        ({"address": "not an address"}, "malformed"),
        ({"address": "127.0.0.1:9", "num_cpus": 2}, "apply to a local run"),
    ],
)
def test_bad_addresses_are_one_line_errors(
    cluster_root: Path, kwargs: dict[str, object], message: str
) -> None:
    start = time.monotonic()
    done = run_connect(isolated_env(cluster_root, token=secrets.token_hex(32)), **kwargs)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stdout.startswith("TunerError: ") and done.stdout.count("\n") == 1
    assert message in done.stdout
    assert time.monotonic() - start < 30


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:6379", True),
        ("[::1]:6379", True),
        ("localhost:6379", True),
        ("127.0.0.2:6379", False),
        ("10.0.0.5:6379", False),
        ("head.example.com:6379", False),
    ],
)
def test_is_loopback_address(address: str, loopback: bool) -> None:
    assert is_loopback_address(address) is loopback
