"""The control-plane fixture itself: it answers, RBAC refuses, the Job controller and the garbage
collector do their work, watches see changes, and a failed start leaves nothing running."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane, ControlPlaneError, find_assets, start
from tests.support.kubeapi import container


def job(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"simpletfjob/job": name}},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [container("tf")]}},
            **spec,
        },
    }


def job_pods(
    plane: ControlPlane, namespace: str, name: str, count: int = 1
) -> list[dict[str, Any]]:
    return wait_for(
        lambda: (pods := plane.pods(namespace, f"job-name={name}")) and len(pods) >= count and pods,
        30,
        f"the Job controller to create {count} pod(s) for {name}",
    )


def test_the_server_answers_and_the_kubeconfig_works_with_the_kubernetes_client(
    kube: ControlPlane, tmp_path: Path
) -> None:
    assert kube.admin.get("/version")["gitVersion"] == "v1.20.2"
    assert kube.started_in > 0
    from kubernetes import client, config

    kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig", namespace="default")
    api = config.new_client_from_config(config_file=str(kubeconfig))
    names = {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}
    assert {"default", "kube-system"} <= names
    _, active = config.list_kube_config_contexts(config_file=str(kubeconfig))
    assert active["context"]["namespace"] == "default"


def test_rbac_refuses_an_unprivileged_user_until_granted(
    kube: ControlPlane, namespace: str
) -> None:
    carol = kube.client("carol")
    refused = carol.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    assert refused.code == 403
    assert refused.body["message"] == (
        f'pods is forbidden: User "carol" cannot list resource "pods" in API group "" '
        f'in the namespace "{namespace}"'
    )
    kube.grant("carol", ["list", "watch"], ["pods"], namespace)
    assert carol.get(f"/api/v1/namespaces/{namespace}/pods")["items"] == []
    elsewhere = carol.request("GET", "/api/v1/namespaces/default/pods")
    assert elsewhere.code == 403  # a Role grants one namespace only
    jobs = carol.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")
    assert jobs.code == 403 and 'in API group "batch"' in jobs.body["message"]


def test_nodes_are_ready_without_the_not_ready_taint(kube: ControlPlane) -> None:
    node = kube.create_node(
        "fixture-gpu-node", gpus=4, taints=[{"key": "pool", "value": "a", "effect": "NoSchedule"}]
    )
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    assert [t["key"] for t in node["spec"]["taints"]] == ["pool"]


def test_the_job_controller_completes_a_job_whose_pod_succeeds(
    kube: ControlPlane, namespace: str
) -> None:
    kube.create_node("fixture-node-1")
    kube.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job("done"))
    (pod,) = job_pods(kube, namespace, "done")
    name = pod["metadata"]["name"]
    assert kube.run_pods(namespace, "job-name=done", "fixture-node-1", restarts=1) == [name]
    running = kube.admin.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    assert running["spec"]["nodeName"] == "fixture-node-1"
    assert running["status"]["containerStatuses"][0]["restartCount"] == 1
    kube.set_pod_status(namespace, name, "Succeeded")
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/done"
    finished = wait_for(
        lambda: (j := kube.admin.get(path))["status"].get("succeeded") == 1 and j,
        30,
        "the Job to count its success",
    )
    assert [c["type"] for c in finished["status"].get("conditions", [])] == ["Complete"]


def test_the_controllers_started_again_are_a_new_process_that_does_the_same_work(
    kube: ControlPlane, namespace: str
) -> None:
    """restart_controllers (after an outage: test_outage.py's fixture) leaves no second copy."""
    before = kube.processes["kube-controller-manager"]
    kube.restart_controllers()
    after = kube.processes["kube-controller-manager"]
    assert before.poll() is not None and after.poll() is None and after.pid != before.pid
    assert (kube.directory / "kube-controller-manager.pid").read_text() == str(after.pid)
    kube.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job("again"))
    job_pods(kube, namespace, "again")


def test_a_pod_that_fails_past_the_backoff_limit_fails_the_job(
    kube: ControlPlane, namespace: str
) -> None:
    kube.create_node("fixture-node-2")
    kube.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job("broken", backoffLimit=0))
    (pod,) = job_pods(kube, namespace, "broken")
    kube.bind(namespace, pod["metadata"]["name"], "fixture-node-2")
    failed = kube.set_pod_status(namespace, pod["metadata"]["name"], "Failed", exit_code=3)
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/broken"
    conditions = wait_for(
        lambda: kube.admin.get(path)["status"].get("conditions"), 30, "a Failed condition"
    )
    assert [(c["type"], c["reason"]) for c in conditions] == [("Failed", "BackoffLimitExceeded")]


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
def test_garbage_collection_deletes_the_pods_of_a_deleted_job(
    kube: ControlPlane, namespace: str, policy: str
) -> None:
    kube.create_node("fixture-node-3")
    kube.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job("gc"))
    (pod,) = job_pods(kube, namespace, "gc")
    name = pod["metadata"]["name"]
    kube.bind(namespace, name, "fixture-node-3")
    kube.set_pod_status(namespace, name, "Running")
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/gc"
    answer = kube.admin.delete(
        path, {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": policy}
    )
    if policy == "Foreground":
        assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
    # the pod runs on a node: it terminates until its kubelet (here, the test) removes it
    terminating = wait_for(
        lambda: (
            (p := kube.pods(namespace, "job-name=gc"))
            and p[0]["metadata"].get("deletionTimestamp")
            and p[0]
        ),
        30,
        "the garbage collector to delete the pod",
    )
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    if policy == "Foreground":
        assert kube.admin.get(path)["metadata"]["deletionTimestamp"]
    kube.force_delete(namespace, name)
    wait_for(lambda: kube.pods(namespace, "job-name=gc") == [], 30, "the pod to go")
    gone = wait_for(lambda: kube.admin.request("GET", path).code == 404, 30, "the Job to go")
    assert gone


def test_a_watch_sees_changes(kube: ControlPlane, namespace: str) -> None:
    admin = kube.admin
    path = f"/api/v1/namespaces/{namespace}/pods"
    rv = admin.get(path)["metadata"]["resourceVersion"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "watched"},
        "spec": {"containers": [container("c")]},
    }
    admin.post(path, pod)
    admin.merge_patch(f"{path}/watched", {"metadata": {"labels": {"seen": "yes"}}})
    admin.delete(f"{path}/watched")
    with admin.watch(path, resourceVersion=rv, timeoutSeconds=10) as events:
        seen = []
        for event in events:
            meta = event["object"]["metadata"]
            seen.append(
                (event["type"], meta.get("labels", {}).get("seen"), "deletionTimestamp" in meta)
            )
            if event["type"] == "DELETED":
                break
    # a pod's deletion is first written (deletionTimestamp, grace 0), then done
    assert seen == [
        ("ADDED", None, False),
        ("MODIFIED", "yes", False),
        ("MODIFIED", "yes", True),
        ("DELETED", "yes", True),
    ]


def test_a_start_that_fails_stops_what_it_started_and_names_the_log(tmp_path: Path) -> None:
    real, reason = find_assets()
    if real is None:
        pytest.skip(reason)
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "etcd").symlink_to(real / "etcd")
    (assets / "kube-controller-manager").symlink_to(real / "kube-controller-manager")
    broken = assets / "kube-apiserver"
    broken.write_text("#!/bin/sh\necho 'flag provided but not defined' >&2\nexit 1\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(
        ControlPlaneError, match=r"kube-apiserver exited with 1; see .*kube-apiserver\.log"
    ) as caught:
        start(assets, tmp_path / "plane", timeout=20)
    assert "flag provided but not defined" in str(caught.value)
    etcd_pid = int((tmp_path / "plane" / "etcd.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(etcd_pid, 0)


def test_without_the_binaries_the_reason_is_given(tmp_path: Path) -> None:
    assert find_assets({}) == (
        None,
        "$KUBEBUILDER_ASSETS is not set (../shared/kube/unpack prints a directory for it)",
    )
    directory, reason = find_assets({"KUBEBUILDER_ASSETS": str(tmp_path)})
    assert directory is None
    assert reason == (
        f"$KUBEBUILDER_ASSETS={tmp_path} has no executable etcd, kube-apiserver, "
        "kube-controller-manager"
    )
