"""The scenes many test files set up: a run on the loopback server as apply leaves it, with the
moves of the controllers and the kubelet that the loopback server does not make; the kubelet
stand-in's nodes of one test, and `run`'s scene on them (`Runs`); the nodes and pods that the
fit and usage tests give a cluster.

The fixture that goes with the first, `kubeconfig` (the loopback server's, namespace NS), is
in tests/conftest.py.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import write
from tests.support.control_plane import ControlPlane
from tests.support.kubeapi import (
    KubeAPI,
    job_status,
    make_job,
    make_node,
    make_pod,
    make_service,
)
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import node_address
from tests.support.templates import RUN as TEMPLATE
from tests.support.templates import RUN_SCRIPT as SCRIPT

NS = "ml"
# What the loopback server says of a pod that no node has taken (load_run's pods)
UNSCHEDULED = "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def labels(run: str, role: str, index: int) -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/job": run,
        "simpletfjob/role": role,
        "simpletfjob/index": str(index),
    }


def load_run(
    api: KubeAPI,
    run: str = "mnist",
    tasks: tuple[tuple[str, int], ...] = (("ps", 0), ("worker", 0), ("worker", 1)),
    policy: str = "worker0",
    namespace: str = NS,
) -> None:
    """A rendered run as apply leaves it: a Job and a Service per task, one Pending pod each."""
    jobs, pods, services = [], [], []
    for role, index in tasks:
        name = f"{run}-{role}-{index}"
        job = make_job(
            name,
            namespace,
            labels=labels(run, role, index),
            annotations={"simpletfjob/success-policy": policy},
        )
        jobs.append(job)
        pods.append(make_pod(f"{name}-x", namespace, owner=job, labels=labels(run, role, index)))
        service = make_service(name, namespace)
        service["metadata"]["labels"] = {k: v for k, v in labels(run, role, index).items()}
        services.append(service)
    api.load("jobs", jobs)
    api.load("pods", pods)
    api.load("services", services)


def task_job(
    role: str,
    index: int,
    *,
    run: str = "mnist",
    policy: str | None = None,
    node: str | None = None,
    restart: str = "Never",
    **status: Any,
) -> dict[str, Any]:
    """A run's Job for a task as the API server returns it (status from `job_status`'s keywords)."""
    labels = {
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/job": run,
        "simpletfjob/role": role,
        "simpletfjob/index": str(index),
    }
    template: dict[str, Any] = {
        "spec": {"restartPolicy": restart, "containers": [{"name": "tf", "image": "tf"}]}
    }
    if node:
        template["spec"]["nodeName"] = node
    return make_job(
        f"{run}-{role}-{index}",
        labels=labels,
        annotations={"simpletfjob/success-policy": policy} if policy else None,
        template=template,
        status=job_status(**status) if status else None,
    )


def task_pod(of: dict[str, Any], suffix: str = "a", **kwargs: Any) -> dict[str, Any]:
    """A pod of the Job `of`, named after it."""
    name = f"{of['metadata']['name']}-{suffix}"
    return make_pod(name, owner=of, labels={"simpletfjob/job": "mnist"}, **kwargs)


def run_pod(api: KubeAPI, name: str, node: str, phase: str = "Running", **status: Any) -> None:
    """The scheduler and the kubelet: bind the pod (nodeName) and report its status."""
    if not api.get("pods", f"{name}-x", NS)["spec"].get("nodeName"):
        api.store.bind(NS, f"{name}-x", node)
    api.set_pod_status(f"{name}-x", NS, phase, **status)


def finish_job(api: KubeAPI, name: str, ok: bool = True) -> None:
    """The Job controller: the Job complete, or failed past its backoffLimit."""
    status = (
        job_status(succeeded=1, complete=True)
        if ok
        else job_status(failed=1, failed_reason="BackoffLimitExceeded")
    )
    api.patch("jobs", name, {"status": status}, namespace=NS, subresource="status")


def lists(api: KubeAPI, resource: str) -> int:
    """The lists made of `resource` (a list read in pages is one: its later pages carry `continue`)."""
    return len([r for r in api.requests_for(resource, "list") if "continue" not in r.query])


def when_watching(api: KubeAPI, then: Callable[[], None]) -> threading.Thread:
    """Run `then` in a thread once wait watches both Jobs and pods."""

    def go() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if api.requests_for("jobs", "watch") and api.requests_for("pods", "watch"):
                time.sleep(0.1)
                then()
                return
            time.sleep(0.02)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


# ---- the kubelet stand-in's nodes, and `run` on them ---------------------------------------------

_scenes = itertools.count()


def stand_in_nodes(
    prefix: str, count: int, *, label_key: str | None = None, label_prefix: str = ""
) -> tuple[list[Node], str]:
    """`count` nodes for a Kubelet, named PREFIX-N-I on this worker's node addresses, N new at
    each call in this process; with `label_key`, each labelled LABEL_KEY=LABEL, which is
    returned (LABEL_PREFIX, the pid, N), so that `-l` picks this test's nodes alone."""
    n = next(_scenes)
    label = f"{label_prefix}{os.getpid()}-{n}"
    chosen = {label_key: label} if label_key else {}
    return [Node(f"{prefix}-{n}-{i}", node_address(i), labels=chosen) for i in range(count)], label


class Scripted:
    """What a test of `run` on the stand-in's nodes writes first: the template (NAME.yaml), the
    tasks' program (task.py, the template's <<script>>), a directory for the program's marker
    files (<<markers>>), and a kubeconfig for the namespace."""

    def __init__(
        self, cli: Any, kube: ControlPlane, ns: str, tmp: Path, label: str, *, name: str,
        template: str, script: str,
    ) -> None:  # fmt: skip
        self.cli, self.kube, self.ns, self.label = cli, kube, ns, label
        self.template = write(tmp / f"{name}.yaml", template)
        self.script = write(tmp / "task.py", script)
        self.markers = tmp / "markers"
        self.markers.mkdir()
        self.kubeconfig = str(kube.kubeconfig(tmp / "kc", namespace=ns))


class Runs(Scripted):
    """The test's nodes (labelled rt=N), its template, and the commands as a user types them."""

    def __init__(
        self, cli: Any, kube: ControlPlane, kubelet: Kubelet, ns: str, tmp: Path, label: str
    ) -> None:
        super().__init__(cli, kube, ns, tmp, label, name="rt", template=TEMPLATE, script=SCRIPT)
        self.kubelet = kubelet

    def args(self, mode: str = "ok", seconds: float = 3) -> list[str]:
        return [
            str(self.template), "-l", f"rt={self.label}", "--address", "internal-ip",
            "--kubeconfig", self.kubeconfig, "--set", f"script={self.script}",
            "--set", f"markers={self.markers}", "--set", f"mode={mode}",
            "--set", f"seconds={seconds}",
        ]  # fmt: skip

    def run(self, *args: str, mode: str = "ok", seconds: float = 3) -> Any:
        return self.cli("run", *self.args(mode, seconds), *args)

    def jobs(self) -> dict[str, dict[str, Any]]:
        answer = self.kube.admin.get(
            f"/apis/batch/v1/namespaces/{self.ns}/jobs", labelSelector="simpletfjob/job=rt"
        )
        return {job["metadata"]["name"]: job for job in answer["items"]}

    def pods(self) -> list[dict[str, Any]]:
        answer = self.kube.admin.get(
            f"/api/v1/namespaces/{self.ns}/pods", labelSelector="simpletfjob/job=rt"
        )
        return list(answer["items"])

    def running(self, task: str) -> dict[str, Any] | None:
        return next(
            (
                p
                for p in self.pods()
                if p["metadata"]["labels"].get("job-name") == f"rt-{task}"
                and p.get("status", {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            ),
            None,
        )


# ---- nodes and pods, as the fit and usage tests give a cluster ------------------------------------


def node_object(name: str, gpus: int = 0, *, images: int = 0, **allocatable: str) -> dict[str, Any]:
    """A Node as make_node gives it (`images` entries in its image list), these amounts set in
    its allocatable."""
    obj = make_node(name, gpus=gpus, images=images)
    obj["status"]["allocatable"].update(allocatable)
    return obj


def bound_pod(
    name: str, node: str, containers: list[dict[str, Any]], **spec: Any
) -> dict[str, Any]:
    """A pod to create, bound to `node` (as the API server takes it from a scheduler)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": containers, **spec},
    }


def box(name: str, **resources: Any) -> dict[str, Any]:
    """A busybox container that asks for `resources` (requests=..., limits=...)."""
    return {"name": name, "image": "busybox", "resources": resources}
