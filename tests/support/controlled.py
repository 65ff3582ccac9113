"""A run applied document by document on the real control plane, where the Job controller does
its work and the test plays the kubelet (run_pods, set_pod_status): the scene of the `wait` and
`status` tests that need no kubelet stand-in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simpletfjob.kube.connection import Settings, connect
from simpletfjob.kube.objects import apply
from simpletfjob.kube.resources import JOBS, SERVICES
from tests.conftest import load_all
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.templates import TFRUN as TEMPLATE

NODES = ("cp-run-1", "cp-run-2", "cp-run-3", "cp-run-4")


def create_run(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path, *options: str) -> Path:
    """Render the template for the nodes and apply every document; the admin's kubeconfig."""
    for node in NODES:
        kube.create_node(node)
    template = tmp_path / "tfrun.yaml"
    template.write_text(TEMPLATE)
    rendered = cli(
        "render", str(template), "--nodes", ",".join(NODES), "-n", namespace, "-o", "-", *options
    )
    assert rendered.code == 0, rendered.err
    kubeconfig = kube.kubeconfig(tmp_path / "admin", namespace=namespace)
    with connect(Settings(kubeconfig=str(kubeconfig))) as conn:
        for document in load_all(rendered.out):
            apply(conn, {"Job": JOBS, "Service": SERVICES}[document["kind"]], document)
    return kubeconfig


def pod_of(kube: ControlPlane, namespace: str, job: str) -> str:
    pods = wait_for(lambda: kube.pods(namespace, f"job-name={job}"), 30, f"a pod for {job}")
    return str(pods[0]["metadata"]["name"])


def run_all_pods(kube: ControlPlane, namespace: str, tasks: int) -> None:
    """Play the kubelet once the Job controller has made every task's pod: run_pods acts only
    on the pods there are, and a pod made later would stay Pending for the whole test."""
    selector = "simpletfjob/job=tfrun"
    wait_for(lambda: len(kube.pods(namespace, selector)) >= tasks, 30, f"{tasks} pods")
    kube.run_pods(namespace, selector, NODES[0])  # each pod is pinned already


def meanwhile(play: Callable[[], None]) -> threading.Thread:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            play()
        except BaseException as e:  # shown by the test, which joins
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.errors = errors  # type: ignore[attr-defined]
    return thread


def joined(thread: threading.Thread) -> None:
    thread.join(60)
    for error in thread.errors:  # type: ignore[attr-defined]
        raise error


def jobs(kube: ControlPlane, namespace: str) -> dict[str, Any]:
    items = kube.admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    return {j["metadata"]["name"]: j for j in items if not j["metadata"].get("deletionTimestamp")}
