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
from tests.support.client import ApiFailure
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.scenes import bound_pod as pod
from tests.support.scenes import box
from tests.support.templates import HOST_PORT_GPUS as HOST_TEMPLATE
from tests.support.templates import PLAIN as GPU_TEMPLATE

GPU = "nvidia.com/gpu"


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


# ---- what a node's pod list shows wrongly, or not yet ---------------------------------------------


@pytest.fixture
def hosts(kube: ControlPlane, namespace: str, tmp_path: Path) -> Any:
    """Two 8-GPU nodes of this test alone (-l picks them); runs the CLI there as the admin."""
    for name in ("a", "b"):
        kube.create_node(f"{namespace}-{name}", gpus=8, labels={"test-ns": namespace})
    kube.kubeconfig(tmp_path / "kubeconfig")
    write(tmp_path / "host.yaml", HOST_TEMPLATE)

    def run(cli: Any, *args: str) -> Any:
        common = ("--kubeconfig", "kubeconfig", "-n", namespace)
        if args[0] != "delete":
            common += ("-l", f"test-ns={namespace}", "--psn", "0")
        return cli(*args, *common, cwd=tmp_path)

    run.cwd = tmp_path  # type: ignore[attr-defined]
    return run


def job_names(result: Any) -> list[tuple[str, int]]:
    """(nodeName, hostPort) of each Job a render wrote."""
    found = []
    for doc in result.docs:
        spec = doc["spec"]["template"]["spec"]
        found.append((spec["nodeName"], spec["containers"][0]["ports"][0]["hostPort"]))
    return found


def stopping(kube: ControlPlane, namespace: str, job: str, policy: str) -> str:
    """Delete the Job (propagation `policy`) once its pod exists; the pod, left stopping."""
    pods = wait_for(lambda: kube.pods(namespace, f"job-name={job}"), 30, f"a pod of {job}")
    pod = pods[0]["metadata"]["name"]
    options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": policy}
    kube.admin.delete(f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}", options)
    if policy == "Orphan":  # the garbage collector lets go of the pod, which runs on
        wait_for(
            lambda: (
                not kube.pods(namespace, f"job-name={job}")[0]["metadata"].get("ownerReferences")
            ),
            30,
            "the pod orphaned",
        )
    else:  # the garbage collector deletes the pod; with no kubelet it stays Terminating
        wait_for(
            lambda: kube.pods(namespace, f"job-name={job}")[0]["metadata"].get("deletionTimestamp"),
            30,
            "the pod stopping",
        )
    return str(pod)


def test_the_stopping_pods_of_a_deleted_run_hold_their_port(
    cli: Any, kube: ControlPlane, namespace: str, hosts: Any
) -> None:
    """`delete`, then `apply --replace --port auto`: the old pods still hold 2222."""
    first = hosts(
        cli,
        "apply",
        "host.yaml",
        "--name",
        "mnist",
        "--set",
        "job=mnist",
        "--set",
        "gpus=0",
        "-N",
        "1",
    )
    assert first.code == 0, first.err
    pod = wait_for(lambda: kube.pods(namespace, "simpletfjob/job=mnist"), 30, "the pod")[0]
    deleted = hosts(cli, "delete", "mnist", "--wait")
    assert deleted.code == 0, deleted.err
    wait_for(
        lambda: kube.pods(namespace, "simpletfjob/job=mnist")[0]["metadata"].get(
            "deletionTimestamp"
        ),
        30,
        "the pod stopping",
    )
    args = ("--name", "mnist", "--set", "job=mnist", "--set", "gpus=0", "-N", "1", "--port", "auto")
    again = hosts(cli, "apply", "host.yaml", "--replace", *args)
    assert again.code == 0, again.err
    held = f"2222 is held by {namespace}/{pod['metadata']['name']} on {namespace}-a"
    assert f"simpletfjob: --port auto chose port 2223 ({held})" in again.err.splitlines()
    job = kube.admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/mnist-worker-0")
    assert job["spec"]["template"]["spec"]["containers"][0]["ports"][0]["hostPort"] == 2223


@pytest.mark.parametrize("policy", ["Foreground", "Background", "Orphan"])
def test_a_pod_whose_job_is_deleted_is_no_longer_the_runs_own(
    cli: Any, kube: ControlPlane, namespace: str, hosts: Any, policy: str
) -> None:
    first = hosts(
        cli,
        "apply",
        "host.yaml",
        "--name",
        "mnist",
        "--set",
        "job=mnist",
        "--set",
        "gpus=3",
        "-N",
        "1",
    )
    assert first.code == 0, first.err
    pod = stopping(kube, namespace, "mnist-worker-0", policy)
    args = (
        "host.yaml",
        "--name",
        "mnist",
        "--set",
        "job=mnist",
        "--set",
        "gpus=3",
        "-o",
        "-",
        "--port",
        "auto",
    )
    result = hosts(cli, *args, "--gpus", "6")
    assert result.code == 0, result.err
    # 3 of node a's 8 GPUs and its port 2222 are the stopping pod's: node b, at 2222.
    assert job_names(result) == [(f"{namespace}-b", 2222)]
    assert (
        "simpletfjob: warning: -N -1: the run got 1 task on 1 node; 1 node otherwise eligible "
        "was left out for what their pods hold: 1 with too few free GPUs "
        f"({namespace}-a)"
    ) in result.err.splitlines()
    result = hosts(cli, *args, "-N", "2")
    assert result.code == 0, result.err
    assert job_names(result) == [(f"{namespace}-a", 2223), (f"{namespace}-b", 2223)]
    assert f"(2222 is held by {namespace}/{pod} on {namespace}-a)" in result.err


def no_pods(kube: ControlPlane, namespace: str) -> None:
    """A quota of no pods in the namespace, in force: the Job controller can make none there.

    No quota controller runs, so the test writes the quota's status as it would; admission
    reads quotas through an informer, so a probe pod is tried until one is refused.
    """
    path = f"/api/v1/namespaces/{namespace}/resourcequotas"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"}}
    kube.create(path, {**quota, "spec": {"hard": {"pods": "0"}}})
    status = {"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}}
    kube.admin.merge_patch(f"{path}/no-pods/status", status)

    def refused() -> bool:
        probe = pod("probe", "", [box("a")])
        del probe["spec"]["nodeName"]
        try:
            kube.create(f"/api/v1/namespaces/{namespace}/pods", probe)
        except ApiFailure as e:
            return e.code == 403
        kube.force_delete(namespace, "probe")
        return False

    wait_for(refused, 30, "the quota in force")


def test_jobs_whose_pods_do_not_exist_yet_hold_their_gpus_and_port(
    cli: Any, kube: ControlPlane, namespace: str, hosts: Any
) -> None:
    """Two applies back to back, before the Job controller has made the first one's pods: here
    it never can, as a quota of no pods refuses them."""
    no_pods(kube, namespace)
    common = ("host.yaml", "--set", "gpus=8", "--gpus", "8", "--port", "auto", "-N", "1")
    first = hosts(cli, "apply", *common, "--name", "first", "--set", "job=first")
    assert first.code == 0, first.err
    assert "simpletfjob: --port auto chose port 2222" in first.err.splitlines()
    second = hosts(cli, "apply", *common, "--name", "second", "--set", "job=second")
    assert second.code == 0, second.err
    jobs = kube.admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    nodes = {j["metadata"]["name"]: j["spec"]["template"]["spec"]["nodeName"] for j in jobs}
    assert nodes == {"first-worker-0": f"{namespace}-a", "second-worker-0": f"{namespace}-b"}
    assert kube.pods(namespace) == []
    # Both nodes hold 2222 and all their GPUs for the pods to come.
    args = ("--name", "third", "--set", "job=third", "--set", "gpus=0", "-o", "-", "--port", "auto")
    third = hosts(cli, "host.yaml", *args)
    assert third.code == 0, third.err
    assert job_names(third) == [(f"{namespace}-a", 2223), (f"{namespace}-b", 2223)]
    holder = f"{namespace}/first-worker-0 (Job, pod not created yet)"
    assert f"(2222 is held by {holder} on {namespace}-a)" in third.err
    shown = cli("nodes", "-o", "json", "--kubeconfig", "kubeconfig", "-l", f"test-ns={namespace}",
                cwd=hosts.cwd)  # fmt: skip
    listed = json.loads(shown.out)
    assert [(n["gpu"]["free"], n["hostPorts"], n["pods"]) for n in listed] == [(0, [2222], 0)] * 2
