"""The example cluster configs in docs/cluster/ parse and turn token auth on everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "cluster"


def _containers(node: Any) -> list[dict[str, Any]]:
    """Every pod container in a KubeRay manifest (any depth)."""
    found = []
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            found += node["containers"]
        for value in node.values():
            found += _containers(value)
    elif isinstance(node, list):
        for value in node:
            found += _containers(value)
    return found


@pytest.mark.parametrize("name", ["kuberay-raycluster.yaml", "kuberay-rayjob.yaml"])
def test_every_kuberay_container_uses_token_auth(name: str) -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / name).read_text()))
    containers = _containers(docs)
    assert len(containers) >= 2
    for container in containers:
        env = {item["name"]: item for item in container["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "ray-auth-token"


def test_cluster_launcher_starts_every_node_with_token_auth() -> None:
    config = yaml.safe_load((EXAMPLES / "cluster-launcher-aws.yaml").read_text())
    assert config["head_node_type"] in config["available_node_types"]
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = [cmd for cmd in config[key] if "ray start" in cmd]
        assert starts and all("RAY_AUTH_MODE=token" in cmd for cmd in starts)
    assert "~/.ray/auth_token" in config["file_mounts"]
