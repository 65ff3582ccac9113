"""Usage on the real control plane: what `--gpus`, `--port auto` and `nodes -o json` see agrees
with what `kubectl describe node` reports for the same nodes and pods.

The pods are created bound to their nodes (`spec.nodeName`), as the API server takes
them from a scheduler; there is no kubelet, so they stay Pending, which counts, until
a test reports another phase through pods/status.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import tf_config_of, write
from tests.support.control_plane import ControlPlane

GPU = "nvidia.com/gpu"

GPU_TEMPLATE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


def pod(name: str, node: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": containers, **spec},
    }


def box(name: str, **resources: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": resources}


def gpus(n: int) -> dict[str, str]:
    return {GPU: str(n)}


def described_gpu_requests(kubeconfig: Path, node: str) -> int:
    """The nvidia.com/gpu requests of `kubectl describe node`'s "Allocated resources"."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    text = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "describe", "node", node],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    allocated = text.split("Allocated resources:", 1)[1]
    found = re.search(rf"^\s+{re.escape(GPU)}\s+(\d+)\s", allocated, re.MULTILINE)
    return int(found[1]) if found else 0


NODES = ("g1", "g2", "g3", "g4")


@pytest.fixture
def busy(kube: ControlPlane, namespace: str, tmp_path: Path) -> Path:
    """Four 8-GPU nodes with pods bound to them; returns a directory with an admin kubeconfig.

    The nodes are named after the test's namespace: an earlier test's pods stay bound to
    the names of its nodes (namespaces are never deleted), and would count on new ones.
    """
    for name in NODES:
        kube.create_node(f"{namespace}-{name}", gpus=8)
    pods = f"/api/v1/namespaces/{namespace}/pods"
    # g1: an init step of 6 beats its containers' 1 + 1.
    kube.create(
        pods,
        pod(
            "warm",
            f"{namespace}-g1",
            [box("a", limits=gpus(1)), box("b", limits=gpus(1))],
            initContainers=[box("fetch", limits=gpus(6))],
        ),
    )
    # g2: limits alone (the server defaults the requests), one pod ended.
    kube.create(pods, pod("train", f"{namespace}-g2", [box("a", limits=gpus(3))]))
    kube.create(pods, pod("done", f"{namespace}-g2", [box("a", limits=gpus(5))]))
    kube.set_pod_status(namespace, "done", "Succeeded")
    # g3: a Running pod of 8 GPUs, and a hostNetwork pod holding port 2222.
    kube.create(pods, pod("full", f"{namespace}-g3", [box("a", requests=gpus(8), limits=gpus(8))]))
    kube.set_pod_status(namespace, "full", "Running")
    held = box("worker")
    held["ports"] = [{"containerPort": 2222}]
    kube.create(pods, pod("other-worker-3", f"{namespace}-g3", [held], hostNetwork=True))
    # g4: idle.
    kube.kubeconfig(tmp_path / "kubeconfig")
    write(tmp_path / "gpu.yaml", GPU_TEMPLATE)
    return tmp_path


def test_nodes_json_agrees_with_kubectl_describe_node(cli: Any, namespace: str, busy: Path) -> None:
    result = cli("nodes", "-o", "json", "--kubeconfig", "kubeconfig", cwd=busy)
    assert result.code == 0, result.err
    found = {n["name"].removeprefix(f"{namespace}-"): n for n in json.loads(result.out)}
    assert list(found) == list(NODES)
    for name in NODES:
        requested = described_gpu_requests(busy / "kubeconfig", f"{namespace}-{name}")
        assert found[name]["gpu"] == {
            "allocatable": 8,
            "requested": requested,
            "free": 8 - requested,
        }
    assert [found[n]["gpu"]["requested"] for n in NODES] == [6, 3, 8, 0]
    assert found["g3"]["hostPorts"] == [2222]
    assert found["g3"]["pods"] == 2 and found["g2"]["pods"] == 1
    assert result.err == "4 nodes: 4 eligible, 15 GPUs free\n"


def test_gpus_takes_the_nodes_with_free_gpus(cli: Any, namespace: str, busy: Path) -> None:
    result = cli("gpu.yaml", "--kubeconfig", "kubeconfig", "--gpus", "5", "-o", "-", cwd=busy)
    assert result.code == 0, result.err
    used = [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs]
    assert used == [f"{namespace}-g2", f"{namespace}-g4"]  # 5 and 8 free; g1 has 2, g3 none
    free = {
        f"{namespace}-{n}": 8 - described_gpu_requests(busy / "kubeconfig", f"{namespace}-{n}")
        for n in NODES
    }
    assert used == [n for n, count in free.items() if count >= 5]


def test_port_auto_steps_over_the_port_a_pod_holds(cli: Any, namespace: str, busy: Path) -> None:
    args = ("tf2-multiworker", "--kubeconfig", "kubeconfig", "--port", "auto", "-o", "-")
    result = cli(*args, cwd=busy)
    assert result.code == 0, result.err
    assert result.err.splitlines()[0] == (
        f"simpletfjob: --port auto chose port 2223 "
        f"(2222 is held by {namespace}/other-worker-3 on {namespace}-g3)"
    )
    workers = tf_config_of(result.docs[0])["cluster"]["worker"]
    assert workers == [f"{namespace}-{n}:2223" for n in NODES]
    for doc in result.docs:
        port = doc["spec"]["template"]["spec"]["containers"][0]["ports"][0]
        assert (port["containerPort"], port["hostPort"]) == (2223, 2223)
    # At the default port, the node whose port is held is passed over.
    held = cli("tf2-multiworker", "--kubeconfig", "kubeconfig", "-o", "-", cwd=busy)
    assert held.code == 0, held.err
    used = [d["spec"]["template"]["spec"]["nodeName"] for d in held.docs]
    assert used == [f"{namespace}-{n}" for n in ("g1", "g2", "g4")]
