"""What only the loopback server does: faults, compaction, short pages, watch drops, bookmarks,
the Python API tests drive it with, the recorded requests, and the builders of realistic
objects. (What it shares with a real server is checked against one in test_faithful.py.)
"""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.support.client import ApiFailure, Client
from tests.support.cluster import ADMIN, LoopbackCluster
from tests.support.kubeapi import (
    KubeAPI,
    container,
    job_status,
    make_job,
    make_node,
    make_pod,
    make_service,
    pod_status,
    realistic_cluster,
    realistic_pods,
    serve,
    sidecar,
    write_kubeconfig,
)


def api_of(cluster: LoopbackCluster) -> KubeAPI:
    assert cluster.api is not None
    return cluster.api


def decode(token: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))  # type: ignore[no-any-return]


def names(answer: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in answer["items"]]


def some_pods(api: KubeAPI, namespace: str = "ml", count: int = 6) -> None:
    api.load(
        "pods",
        [
            make_pod(
                f"p{i}", namespace, node=f"n{i % 2}", labels={"app": "x" if i % 3 == 0 else "y"}
            )
            for i in range(count)
        ],
    )


# -- faults --------------------------------------------------------------------------------------


def test_faults_for_one_resource_leave_the_others_alone(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    some_pods(api)
    api.add_faults(resource="pods", verb="list", fail_first=1, throttle_first=1, retry_after=7)
    admin = loopback.admin
    assert admin.request("GET", "/api/v1/nodes").code == 200
    failed = admin.request("GET", "/api/v1/pods")
    assert (failed.code, failed.body["message"]) == (
        500,
        "Internal error occurred: etcdserver: request timed out",
    )
    throttled = admin.request("GET", "/api/v1/pods")
    assert (throttled.code, throttled.headers["Retry-After"]) == (429, "7")
    assert throttled.body["details"] == {"retryAfterSeconds": 7}
    assert admin.request("GET", "/api/v1/namespaces/ml/pods/p1").code == 200  # a get, not a list
    assert len(admin.get("/api/v1/pods")["items"]) == 6


def test_a_dropped_connection_gets_no_answer(loopback: LoopbackCluster) -> None:
    api_of(loopback).add_faults(resource="jobs", drop_first=1)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        loopback.admin.request("GET", "/apis/batch/v1/jobs")
    assert loopback.admin.get("/apis/batch/v1/jobs")["items"] == []
    assert [r.verb for r in api_of(loopback).requests_for("jobs")] == ["list", "list"]


def test_a_slow_answer(loopback: LoopbackCluster) -> None:
    api_of(loopback).add_faults(resource="nodes", delay=0.3)
    started = time.monotonic()
    loopback.admin.get("/api/v1/nodes")
    assert time.monotonic() - started >= 0.3


def test_an_expired_continue_token_comes_back_fresh(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    some_pods(api)
    first = loopback.admin.get("/api/v1/namespaces/ml/pods", limit=2)
    api.faults.expire_continue = 1
    expired = loopback.admin.request(
        "GET",
        "/api/v1/namespaces/ml/pods",
        query={"limit": 2, "continue": first["metadata"]["continue"]},
    )
    assert (expired.code, expired.body["reason"]) == (410, "Expired")
    assert expired.body["message"].startswith("The provided continue parameter is too old")
    fresh = decode(expired.body["metadata"]["continue"])
    assert fresh == {"v": "meta.k8s.io/v1", "rv": -1, "start": "p1\x00"}
    rest = loopback.admin.get(
        "/api/v1/namespaces/ml/pods", limit=10, **{"continue": expired.body["metadata"]["continue"]}
    )
    assert names(rest) == ["p2", "p3", "p4", "p5"]


def test_compaction_expires_continue_tokens_and_old_watches(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    some_pods(api)
    first = loopback.admin.get("/api/v1/namespaces/ml/pods", limit=2)
    api.create("pods", make_pod("late", "ml"))
    api.compact()  # etcd compaction: the first page's revision is gone
    expired = loopback.admin.request(
        "GET",
        "/api/v1/namespaces/ml/pods",
        query={"limit": 2, "continue": first["metadata"]["continue"]},
    )
    assert expired.code == 410 and decode(expired.body["metadata"]["continue"])["rv"] == -1
    with loopback.admin.watch(
        "/api/v1/namespaces/ml/pods", resourceVersion=first["metadata"]["resourceVersion"]
    ) as events:
        (event,) = list(events)
    old = int(first["metadata"]["resourceVersion"])
    assert event == {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {old} ({api.store.oldest})",
            "reason": "Expired",
            "code": 410,
        },
    }


def test_the_history_is_a_window(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    api.store.history_size = 3
    some_pods(api, count=1)
    start = loopback.admin.get("/api/v1/namespaces/ml/pods")["metadata"]["resourceVersion"]
    for i in range(5):
        api.patch("pods", "p0", {"metadata": {"labels": {"n": str(i)}}}, namespace="ml")
    with loopback.admin.watch("/api/v1/namespaces/ml/pods", resourceVersion=start) as events:
        assert next(events)["type"] == "ERROR"
    recent = str(api.store.oldest)
    with loopback.admin.watch(
        "/api/v1/namespaces/ml/pods", resourceVersion=recent, timeoutSeconds=1
    ) as events:
        assert [e["object"]["metadata"]["labels"]["n"] for e in events] == ["2", "3", "4"]


def test_short_pages_read_limit_objects_then_filter(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    some_pods(api, count=9)  # app=x: p0, p3, p6
    api.faults.short_pages = True
    pages, token = [], None
    while True:
        query: dict[str, Any] = {"limit": 2, "labelSelector": "app=x"}
        if token:
            query["continue"] = token
        page = loopback.admin.get("/api/v1/namespaces/ml/pods", **query)
        pages.append(names(page))
        token = page["metadata"].get("continue")
        if not token:
            break
    # keys p0..p8 read two at a time: [p0 p1] [p2 p3] [p4 p5] [p6 p7] [p8]
    assert pages == [["p0"], ["p3"], [], ["p6"], []]


# -- watches -------------------------------------------------------------------------------------


def test_a_dropped_watch_resumes_from_its_last_resource_version(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    start = loopback.admin.get("/api/v1/namespaces/default/pods")["metadata"]["resourceVersion"]
    for i in range(4):
        api.create("pods", make_pod(f"w{i}"))
    api.faults.watch_drop_after = 2
    with loopback.admin.watch("/api/v1/namespaces/default/pods", resourceVersion=start) as events:
        first = list(events)  # the server ends the stream after two events
    assert [e["object"]["metadata"]["name"] for e in first] == ["w0", "w1"]
    last = first[-1]["object"]["metadata"]["resourceVersion"]
    with loopback.admin.watch(
        "/api/v1/namespaces/default/pods", resourceVersion=last, timeoutSeconds=1
    ) as events:
        assert [e["object"]["metadata"]["name"] for e in events] == ["w2", "w3"]


def test_a_reset_watch_breaks_the_stream(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    start = loopback.admin.get("/api/v1/namespaces/default/pods")["metadata"]["resourceVersion"]
    api.create("pods", make_pod("a"))
    api.create("pods", make_pod("b"))
    api.faults.watch_drop_after = 1
    api.faults.watch_reset = True
    with loopback.admin.watch("/api/v1/namespaces/default/pods", resourceVersion=start) as events:
        assert next(events)["type"] == "ADDED"
        with pytest.raises((http.client.IncompleteRead, ConnectionResetError, ValueError)):
            list(events)


def test_watches_refused_with_410_either_way(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    api.faults.watch_gone_first = 1
    api.faults.watch_expire_first = 1
    with pytest.raises(ApiFailure) as caught, loopback.admin.watch("/api/v1/pods"):
        pass
    assert caught.value.code == 410 and caught.value.status["reason"] == "Expired"
    with loopback.admin.watch("/api/v1/pods", resourceVersion="5") as events:
        (event,) = list(events)
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    assert event["object"]["message"].startswith("too old resource version: 5 (")


def test_bookmarks_when_asked(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    api.bookmark_interval = 0.2
    rv = loopback.admin.get("/apis/batch/v1/jobs")["metadata"]["resourceVersion"]
    path = "/apis/batch/v1/jobs"
    with loopback.admin.watch(path, resourceVersion=rv, allowWatchBookmarks="true") as events:
        bookmark = next(events)
    assert (bookmark["type"], bookmark["object"]["kind"]) == ("BOOKMARK", "Job")
    assert bookmark["object"]["metadata"] == {"resourceVersion": rv, "creationTimestamp": None}
    with loopback.admin.watch(path, resourceVersion=rv, timeoutSeconds=1) as events:
        assert list(events) == []


def test_the_kubernetes_client_watches_and_raises_410(
    loopback: LoopbackCluster, tmp_path: Path
) -> None:
    from kubernetes import client, config, watch
    from kubernetes.client.exceptions import ApiException

    api = api_of(loopback)
    kubeconfig = loopback.kubeconfig(tmp_path / "kubeconfig")
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    rv = core.list_namespaced_pod("default").metadata.resource_version
    api.create("pods", make_pod("seen"))
    api.set_pod_status("seen", phase="Running")
    api.delete("pods", "seen")
    watcher = watch.Watch()
    seen = []
    for event in watcher.stream(
        core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].status.phase))
        if event["type"] == "DELETED":
            watcher.stop()
    assert seen == [
        ("ADDED", "Pending"),
        ("MODIFIED", "Running"),
        ("MODIFIED", "Running"),
        ("DELETED", "Running"),
    ]
    api.compact()
    with pytest.raises(ApiException) as caught:
        list(
            watch.Watch().stream(
                core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=2
            )
        )
    assert caught.value.status == 410


# -- the Python API and what the server records --------------------------------------------------


def test_requests_are_recorded_with_their_user_and_verb(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    alice = loopback.client("alice")
    alice.request("GET", "/api/v1/pods", query={"fieldSelector": "spec.nodeName=n1", "limit": 500})
    loopback.admin.request("DELETE", "/apis/batch/v1/namespaces/ml/jobs/j")
    (listing,) = api.requests_for("pods", "list")
    assert (listing.method, listing.path, listing.user, listing.namespace) == (
        "GET",
        "/api/v1/pods",
        "alice",
        None,
    )
    assert listing.query == {"fieldSelector": "spec.nodeName=n1", "limit": "500"}
    (deleting,) = api.requests_for("jobs")
    assert (deleting.verb, deleting.namespace, deleting.name, deleting.user) == (
        "delete",
        "ml",
        "j",
        ADMIN,
    )


def test_users_tokens_and_rights() -> None:
    api = KubeAPI()
    with serve(api):
        assert Client(api.url).request("GET", "/api/v1/nodes").code == 403  # anonymous, as real
        api.grant("system:anonymous", ["list"], ["nodes"])
        assert Client(api.url).request("GET", "/api/v1/nodes").code == 200
        api.anonymous_auth = False
        assert Client(api.url).request("GET", "/api/v1/nodes").code == 401
        api.add_user("dora", "dora-token", groups=["ops"])
        api.grant("ops", "*", ["pods", "pods/status"], namespace="ml")
        dora = Client(api.url, "dora-token")
        assert dora.request("GET", "/api/v1/namespaces/ml/pods").code == 200
        assert dora.request("GET", "/api/v1/namespaces/other/pods").code == 403


def test_the_python_api_changes_what_clients_see(loopback: LoopbackCluster) -> None:
    api = api_of(loopback)
    job = make_job("run-worker-0", "ml", labels={"simpletfjob/job": "run"})
    api.load("jobs", [job])
    pod = make_pod("run-worker-0-abcde", "ml", node="n1", owner=job)
    api.load("pods", [pod])
    api.set_pod_status("run-worker-0-abcde", "ml", "Failed", exit_code=137)
    api.patch(
        "jobs",
        "run-worker-0",
        {"status": job_status(failed=1, failed_reason="BackoffLimitExceeded")},
        namespace="ml",
        subresource="status",
    )
    seen = loopback.admin.get("/apis/batch/v1/namespaces/ml/jobs/run-worker-0")
    assert seen["status"]["conditions"][0]["reason"] == "BackoffLimitExceeded"
    terminated = loopback.admin.get("/api/v1/namespaces/ml/pods/run-worker-0-abcde")["status"][
        "containerStatuses"
    ][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")
    api.delete("jobs", "run-worker-0", namespace="ml", propagation="Background")
    # the garbage collector deleted the pod, and a failed pod goes at once
    assert (
        loopback.admin.request("GET", "/api/v1/namespaces/ml/pods/run-worker-0-abcde").code == 404
    )


def test_the_server_as_its_own_process(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.kubeapi", "--nodes", "8", "--pods", "40", "--token", "t", "--tls", str(tmp_path)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url, node_bytes, pod_bytes = server.stdout.readline().split()
        assert int(node_bytes) > 8 * 5000 and int(pod_bytes) > 40 * 2000
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", url, token="t", ca_file=tmp_path / "ca.crt"
        )
        from kubernetes import client, config

        core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        assert len(core.list_pod_for_all_namespaces().items) == 40
        assert len(core.list_node().items) == 8
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


# -- objects as the API server returns them ---------------------------------------------------------


def test_a_pod_with_init_containers_sidecars_overhead_and_host_ports() -> None:
    pod = make_pod(
        "p",
        "ml",
        node="n1",
        host_network=True,
        containers=[container("tf", limits={"nvidia.com/gpu": "2"}, ports=[2222])],
        init_containers=[
            container("fetch", requests={"cpu": "4"}),
            sidecar("proxy", requests={"cpu": "100m"}),
        ],
        overhead={"cpu": "250m"},
        runtime_class="kata",
    )
    spec = pod["spec"]
    assert spec["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": "2"},
        "requests": {"nvidia.com/gpu": "2"},
    }
    assert spec["containers"][0]["ports"] == [
        {"containerPort": 2222, "protocol": "TCP", "hostPort": 2222}
    ]
    assert [c.get("restartPolicy") for c in spec["initContainers"]] == [None, "Always"]
    assert spec["overhead"] == {"cpu": "250m"} and spec["runtimeClassName"] == "kata"
    status = pod["status"]
    assert status["phase"] == "Running" and status["hostIP"] == status["podIP"]  # host network
    init = {s["name"]: s["state"] for s in status["initContainerStatuses"]}
    assert "terminated" in init["fetch"] and "running" in init["proxy"]
    assert [m["manager"] for m in pod["metadata"]["managedFields"]] == ["kubectl-create", "kubelet"]


def test_kubelet_statuses() -> None:
    pod = make_pod("p", node="n1")
    pulling = pod_status(pod, "Pending", waiting="ImagePullBackOff")
    assert pulling["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    crashed = pod_status(pod, "Failed", exit_code=1, restarts=3)
    main = crashed["containerStatuses"][0]
    assert (main["state"]["terminated"]["reason"], main["restartCount"]) == ("Error", 3)
    assert main["lastState"]["terminated"]["exitCode"] == 1
    assert (
        pod_status(pod, "Succeeded")["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    )
    unscheduled = make_pod("q")
    assert unscheduled["status"]["phase"] == "Pending" and "nodeName" not in unscheduled["spec"]
    assert make_service("s", selector={"a": "b"})["spec"]["clusterIP"] == "None"
    job = make_job("j", status=job_status(succeeded=1, complete=True))
    assert job["status"]["conditions"][0]["type"] == "Complete"
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "j"


def test_a_large_realistic_cluster() -> None:
    nodes = realistic_cluster(40)
    pods = list(realistic_pods(nodes, 1000))
    assert len({(p.namespace, p.name) for p in pods}) == 1000
    phases = Counter(p.fields["status.phase"] for p in pods)
    assert set(phases) == {"Running", "Pending", "Succeeded", "Failed", "Unknown"}
    exporters = [json.loads(p.body) for p in pods if p.name.startswith("node-exporter-")]
    assert len(exporters) == 40  # one on every node, holding host port 9100
    assert {e["spec"]["containers"][0]["ports"][0]["hostPort"] for e in exporters} == {9100}
    for pod in pods[::97]:
        obj = json.loads(pod.body)  # the index agrees with the JSON
        assert (obj["metadata"]["namespace"], obj["metadata"]["name"]) == (pod.namespace, pod.name)
        assert obj["metadata"].get("labels", {}) == pod.labels
        assert obj["spec"].get("nodeName", "") == pod.fields["spec.nodeName"]
        assert obj["status"]["phase"] == pod.fields["status.phase"]
    gpu = [json.loads(p.body) for p in pods if p.name.startswith("llm-finetune-")]
    assert gpu and all(
        g["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "8" for g in gpu
    )
    assert any("overhead" in json.loads(p.body)["spec"] for p in pods)
    assert make_node("x")["metadata"]["name"] == "x"
