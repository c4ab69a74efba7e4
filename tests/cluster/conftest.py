"""Real multi-node Ray clusters on one machine: `ray start` processes with token auth.

Every cluster gets its own temp dir, HOME (so no test reads or writes ~/.ray/auth_token),
token and free ports, and is torn down by killing only the processes it started: other
people run Ray on the same machine, so never `ray stop`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 90
# Nodes on distinct loopback addresses, so trial metrics tell them apart (Ray keeps these
# as given; it only replaces 127.0.0.1 by the host's routable address).
HEAD_IP = "127.0.0.2"
WORKER_IPS = ("127.0.0.3", "127.0.0.4")


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: every socket stays bound until all are (ports asked for
    one at a time can come back the same, and two of a node's components then collide)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RayNode:
    """One `ray start` node: found again by the node manager port its raylet was given."""

    node_manager_port: int
    head: bool

    def raylet(self) -> psutil.Process | None:
        flag = f"--node_manager_port={self.node_manager_port}"
        for proc in psutil.process_iter(["name", "cmdline"]):
            if proc.info["name"] == "raylet" and flag in (proc.info["cmdline"] or []):
                return proc
        return None

    def kill(self) -> list[int]:
        """SIGKILL the raylet and everything it runs (workers, agents): a dead machine."""
        raylet = self.raylet()
        if raylet is None:
            return []
        victims = [raylet, *raylet.children(recursive=True)]
        for proc in victims:
            with _gone():
                proc.kill()
        psutil.wait_procs(victims, timeout=10)
        return [proc.pid for proc in victims]


@dataclass
class RayCluster:
    """A head plus workers started by `ray start`, sharing one temp dir, token and env."""

    root: Path
    env: dict[str, str]
    address: str = ""
    nodes: list[RayNode] = field(default_factory=list)

    def start_node(self, *, head: bool, num_cpus: int = 1, ip: str = "") -> RayNode:
        port, objects, agent, agent_grpc, metrics, runtime_env, gcs = free_ports(7)
        args = [RAY, "start", f"--num-cpus={num_cpus}", "--disable-usage-stats"]
        if ip:
            args.append(f"--node-ip-address={ip}")
        args += [
            f"--node-manager-port={port}",
            f"--object-manager-port={objects}",
            f"--dashboard-agent-listen-port={agent}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--metrics-export-port={metrics}",
            f"--runtime-env-agent-port={runtime_env}",
            f"--temp-dir={self.root / 'ray'}",
            "--object-store-memory=100000000",
        ]
        if head:
            args += ["--head", f"--port={gcs}", "--include-dashboard=false"]
        else:
            args.append(f"--address={self.address}")
        done = subprocess.run(
            args, env=self.env, capture_output=True, text=True, timeout=START_TIMEOUT_S
        )
        if done.returncode != 0:
            raise RuntimeError(f"ray start failed ({done.returncode}):\n{done.stderr[-3000:]}")
        if head:
            self.address = re.search(r"--address='([^']+)'", done.stdout + done.stderr)[1]
        node = RayNode(node_manager_port=port, head=head)
        self.nodes.append(node)
        return node

    def workers(self) -> list[RayNode]:
        return [node for node in self.nodes if not node.head]

    def driver_env(self, **extra: str) -> dict[str, str]:
        return {**self.env, "RAY_ADDRESS": self.address, **extra}

    def run_python(
        self, code: str, *, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code],
            env=self.driver_env() if env is None else env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
        )

    def alive_nodes(self) -> int:
        code = (
            "import json; from tuner.tune.cluster import connect, shutdown\n"
            "info = connect(); print(json.dumps(info.nodes)); shutdown()"
        )
        done = self.run_python(code)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def wait_for_nodes(self, count: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.alive_nodes() != count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster did not reach {count} alive nodes")
            time.sleep(1)

    def stop(self) -> None:
        kill_processes_under(self.root)


def isolated_env(root: Path, *, token: str | None) -> dict[str, str]:
    """The environment of every process of a test cluster: own HOME, token, no RAY_ADDRESS."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), RAY_USAGE_STATS_ENABLED="0")
    env.update(RAY_TMPDIR=str(root), PYTHONUNBUFFERED="1")  # a local ray.init lands under root
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["OMP_NUM_THREADS"] = "1"
    if token is None:
        env["RAY_AUTH_MODE"] = "disabled"
    else:
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    return env


def kill_processes_under(root: Path) -> None:
    """SIGKILL every process whose command line names ``root``, with its descendants."""
    tag = str(root)
    me = os.getpid()
    victims: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        with _gone():
            if proc.pid != me and any(tag in arg for arg in proc.info["cmdline"] or []):
                for p in [proc, *proc.children(recursive=True)]:
                    victims[p.pid] = p
    for proc in victims.values():
        with _gone():
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(list(victims.values()), timeout=10)


class _gone:
    """Ignore processes that exit while we look at them."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, psutil.Error)


@contextlib.contextmanager
def scratch_root() -> Iterator[Path]:
    """A temp dir whose Ray processes are all killed on exit."""
    # Short path: Ray's Unix socket paths must stay under ~107 characters.
    root = Path(tempfile.mkdtemp(prefix="tc", dir="/tmp"))
    try:
        yield root
    finally:
        kill_processes_under(root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def cluster_root() -> Iterator[Path]:
    with scratch_root() as root:
        yield root


@pytest.fixture(scope="module")
def token_cluster() -> Iterator[RayCluster]:
    """A head node (one CPU, token auth, on 127.0.0.2) shared by a module's tests."""
    with scratch_root() as root:
        cluster = RayCluster(root=root, env=isolated_env(root, token=_token()))
        cluster.start_node(head=True, ip=HEAD_IP)
        yield cluster


def _token() -> str:
    return secrets.token_hex(32)


# A driver that connects and prints its ClusterInfo as JSON (or the TunerError line, exit 2).
CONNECT_DRIVER = """
import dataclasses, json, sys
from tuner.errors import TunerError
from tuner.tune.cluster import connect, shutdown
try:
    info = connect(**json.loads(sys.argv[1]))
except TunerError as exc:
    print(f"TunerError: {exc}")
    sys.exit(2)
print(json.dumps(dataclasses.asdict(info)))
shutdown()
"""


def run_connect(
    env: dict[str, str], timeout: float = 120, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run :data:`CONNECT_DRIVER` in a fresh process (Ray's auth state is per process)."""
    return subprocess.run(
        [sys.executable, "-c", CONNECT_DRIVER, json.dumps(kwargs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])
