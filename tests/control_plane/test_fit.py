"""The fit on the real control plane: what each task asks against what its nodes have free.

The nodes are made as a kubelet registers them, with the allocatable each test needs; the
pods that already take room are created bound to them (`spec.nodeName`), as the API server
takes them from a scheduler, and stay Pending, which counts. Every node of a test carries
a label of its own, and the commands read the cluster with `-l`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, write
from tests.support.control_plane import ControlPlane
from tests.support.scenes import bound_pod, box
from tests.support.templates import FIT_BY_ROLE as TEMPLATE

GPU = "nvidia.com/gpu"
FPGA = "example.com/fpga"


BASE = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "20Gi", "pods": "110"}


def resources(kind: str, **amounts: str) -> str:
    lines = "".join(f'              {name}: "{value}"\n' for name, value in amounts.items())
    return f"          resources:\n            {kind}:\n{lines}"


def template(worker: str = "", ps: str = "") -> str:
    return TEMPLATE.replace("{worker}", worker).replace("{ps}", ps)


class Fixture:
    """The test's nodes (labelled fit=<namespace>), its pods, and the commands as a user types them."""

    def __init__(self, cli: Any, kube: ControlPlane, namespace: str, tmp: Path) -> None:
        self.cli, self.kube, self.ns, self.tmp = cli, kube, namespace, tmp
        self.kubeconfig = str(kube.kubeconfig(tmp / "kubeconfig", namespace=namespace))

    def node(self, name: str, **allocatable: str) -> str:
        """A Ready node with BASE's allocatable and these; its full name."""
        full = f"{self.ns}-{name}"
        self.kube.create_node(full, labels={"fit": self.ns})
        listed = {**BASE, **allocatable}
        status = {"capacity": listed, "allocatable": listed}
        self.kube.admin.merge_patch(f"/api/v1/nodes/{full}/status", {"status": status})
        return full

    def pod(self, name: str, node: str, kind: str = "requests", **amounts: str) -> None:
        """A pod bound to the node that asks for these amounts."""
        body = bound_pod(name, node, [box("main", **{kind: amounts})])
        self.kube.create(f"/api/v1/namespaces/{self.ns}/pods", body)

    def run(self, command: str, text: str, *args: str) -> Any:
        path = write(self.tmp / "t.yaml", text)
        where = ["--kubeconfig", self.kubeconfig, "-l", f"fit={self.ns}"]
        if command == "render":
            return self.cli(str(path), *where, "-o", "-", *args)
        return self.cli(command, str(path), *where, *args)

    def jobs(self) -> dict[str, str]:
        """The run's Jobs on the server, and the node each is pinned to."""
        answer = self.kube.admin.get(f"/apis/batch/v1/namespaces/{self.ns}/jobs")
        return {
            j["metadata"]["name"]: j["spec"]["template"]["spec"]["nodeName"]
            for j in answer["items"]
        }

    def short(self, name: str) -> str:
        return name.removeprefix(f"{self.ns}-")


@pytest.fixture
def fit(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path) -> Fixture:
    return Fixture(cli, kube, namespace, tmp_path)


@pytest.mark.parametrize(
    ("resource", "kind", "has", "held", "asked", "shown"),
    [
        ("cpu", "requests", "4", "3500m", "1", "cpu 1 > 500m free"),
        ("memory", "limits", "8Gi", "7Gi", "2Gi", "memory 2Gi > 1Gi free"),
        (
            "ephemeral-storage",
            "requests",
            "20Gi",
            "15Gi",
            "10Gi",
            "ephemeral-storage 10Gi > 5Gi free",
        ),
        (GPU, "limits", "2", "1", "2", "nvidia.com/gpu 2 > 1 free"),
        (FPGA, "limits", "4", "3", "2", "example.com/fpga 2 > 1 free"),
    ],
)
def test_a_run_that_cannot_fit_is_refused_at_plan_time_on_each_resource(
    fit: Fixture, resource: str, kind: str, has: str, held: str, asked: str, shown: str
) -> None:
    """Each kind of resource, held by a pod on one of two nodes: render, apply and run refuse a
    run of two workers alike, before anything is sent; --explain says why per role."""
    busy = fit.node("busy", **{resource: has})
    fit.node("idle", **{resource: has})
    fit.pod("hog", busy, "limits" if "/" in resource else kind, **{resource: held})
    text = template(worker=resources(kind, **{resource: asked}))
    args = ("-N", "2", "--psn", "0")
    amount = shown.split()[1]
    line = (
        f"simpletfjob: error: 2 workers ask {amount} {resource} each; only 1 node has "
        f"{amount} free ({fit.ns}-idle)"
    )
    for command in ("render", "apply", "run"):
        result = fit.run(command, text, *args)
        assert_one_line_error(result)
        assert result.err == line + "\n", (command, result.err)
    assert fit.jobs() == {}
    explained = fit.run("render", text, *args, "--explain")
    rows = {row.split()[0]: row for row in explained.err.splitlines()[1:3]}
    assert rows[busy].endswith(f"worker: {shown}")
    assert fit.run("apply", text, "-N", "1", "--psn", "0").code == 0
    assert fit.jobs() == {"fit-worker-0": f"{fit.ns}-idle"}


def test_workers_take_the_gpu_nodes_and_the_ps_a_cpu_node(fit: Fixture) -> None:
    """The GPU nodes come first by name; the ps, which asks for no GPU, leaves them to the
    workers (before the fit, it took the first of them and a worker could not start)."""
    for name in ("a-gpu", "b-gpu"):
        fit.node(name, **{GPU: "1"})
    fit.node("c-cpu")
    text = template(worker=resources("limits", **{GPU: "1"}), ps=resources("requests", cpu="1"))
    result = fit.run("apply", text)
    assert result.code == 0, result.err
    assert {k: fit.short(v) for k, v in fit.jobs().items()} == {
        "fit-ps-0": "c-cpu",
        "fit-worker-0": "a-gpu",
        "fit-worker-1": "b-gpu",
    }


def test_tasks_per_host_add_up_on_one_node(fit: Fixture) -> None:
    node = fit.node("g", **{GPU: "2"})
    fit.pod("small", node, cpu="1")  # a pod's cpu counts beside the run's own
    text = template(worker=resources("limits", **{GPU: "1"}))
    args = ("-N", "1", "--psn", "0", "--tasks-per-host")
    refused = fit.run("apply", text, *args, "3")
    assert_one_line_error(refused)
    assert refused.err == (
        f"simpletfjob: error: 3 workers ask 1 {GPU} each; only 2 fit on -N 1 host ({node}: 2 free)\n"
    )
    assert fit.jobs() == {}
    cpu = template(worker=resources("requests", cpu="2"))
    refused = fit.run("apply", cpu, *args, "2")  # 2 x 2 of the 3 cpu the pod leaves
    assert refused.err == (
        f"simpletfjob: error: 2 workers ask 2 cpu each; only 1 fit on -N 1 host ({node}: 3 free)\n"
    )
    assert fit.run("apply", text, *args, "2").code == 0
    assert set(fit.jobs().values()) == {node} and len(fit.jobs()) == 2


def test_a_saved_node_list_is_fitted_against_allocatable(fit: Fixture) -> None:
    """Offline, the nodes' pods are not known: a node whose GPUs a pod holds still fits, as it
    would with --no-usage; one without enough allocatable does not."""
    full = fit.node("full", **{GPU: "2"})
    fit.node("half", **{GPU: "1"})
    fit.pod("hog", full, "limits", **{GPU: "2"})
    listed = fit.kube.admin.get("/api/v1/nodes", labelSelector=f"fit={fit.ns}")
    write(fit.tmp / "nodes.json", json.dumps({**listed, "kind": "NodeList", "apiVersion": "v1"}))
    text = template(worker=resources("limits", **{GPU: "2"}))
    path = write(fit.tmp / "t.yaml", text)
    offline = fit.cli(
        str(path), "--nodes-file", str(fit.tmp / "nodes.json"), "-o", "-", "--psn", "0"
    )
    assert offline.code == 0, offline.err
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in offline.docs] == [full]
    live = fit.run("render", text, "--psn", "0")
    assert live.err == f"simpletfjob: error: 2 workers ask 2 {GPU} each; no node has 2 free\n"
    refused = fit.cli(
        str(path), "--nodes-file", str(fit.tmp / "nodes.json"), "-o", "-", "--psn", "0", "-N", "2"
    )
    assert refused.err == (
        f"simpletfjob: error: 2 workers ask 2 {GPU} each; only 1 node has 2 free ({full})\n"
    )


def test_run_spends_no_restart_on_a_run_that_cannot_fit(fit: Fixture) -> None:
    fit.node("g", **{GPU: "1"})
    text = template(worker=resources("limits", **{GPU: "2"}))
    result = fit.run("run", text, "--psn", "0", "--max-restarts", "3", "--timeout", "20s")
    assert_one_line_error(result)
    assert result.err == f"simpletfjob: error: 1 worker asks 2 {GPU}; no node has 2 free\n"
    assert fit.jobs() == {}
