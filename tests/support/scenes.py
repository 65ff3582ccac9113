"""The scenes many test files set up: a run on the loopback server as apply leaves it, and the
moves of the controllers and the kubelet that the loopback server does not make.

The fixture that goes with them, `kubeconfig` (the loopback server's, namespace NS), is in
tests/conftest.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tests.support.kubeapi import KubeAPI, job_status, make_job, make_pod, make_service

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
