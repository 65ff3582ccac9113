"""The loopback server against the real one: each test runs the same requests and the same
assertions on both (the `cluster` fixture), so the model is checked against the real thing.

What the real control plane cannot be made to do quickly (an expired continue token, a
watch from a compacted resourceVersion, 5xx) is tested on the loopback server alone, in
tests/loopback/test_server.py.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import pytest

from tests.support.client import Client
from tests.support.cluster import Cluster, wait_for
from tests.support.kubeapi import container, pod_status


def create_pod(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    node: str | None = None,
    labels: dict[str, str] | None = None,
    phase: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {"containers": [container("main")], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    created = cluster.admin.post(f"/api/v1/namespaces/{namespace}/pods", body)
    if phase:
        created = cluster.set_pod_status(namespace, name, phase)
    return created  # type: ignore[no-any-return]


def names(answer: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in answer["items"]]


def token_of(answer: dict[str, Any]) -> dict[str, Any]:
    token = answer["metadata"]["continue"]
    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))  # type: ignore[no-any-return]


# -- selectors ---------------------------------------------------------------------------------


def test_field_selectors_on_pods(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    create_pod(cluster, ns, "a-running", node="n1", phase="Running")
    create_pod(cluster, ns, "b-done", node="n1", phase="Succeeded")
    create_pod(cluster, ns, "c-failed", node="n1", phase="Failed")
    create_pod(cluster, ns, "d-pending", node="n1")
    create_pod(cluster, ns, "e-elsewhere", node="n2", phase="Running")
    create_pod(cluster, ns, "f-unscheduled")
    pods = f"/api/v1/namespaces/{ns}/pods"
    get = cluster.admin.get
    # how kubectl describe node finds a node's pods
    usage = "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed"
    assert names(get(pods, fieldSelector=usage)) == ["a-running", "d-pending"]
    cached = get(pods, fieldSelector=usage, resourceVersion="0")  # in no particular order
    assert sorted(names(cached)) == ["a-running", "d-pending"]
    assert names(get(pods, fieldSelector="spec.nodeName=")) == ["f-unscheduled"]
    assert names(get(pods, fieldSelector="metadata.name==b-done")) == ["b-done"]
    assert names(get(pods, fieldSelector="status.phase=Pending")) == ["d-pending", "f-unscheduled"]
    everywhere = get("/api/v1/pods", fieldSelector=f"metadata.namespace={ns},spec.nodeName=n2")
    assert names(everywhere) == ["e-elsewhere"]


@pytest.mark.parametrize(
    ("path", "selector", "message"),
    [
        ("/api/v1/pods", "spec.nodename=x", "field label not supported: spec.nodename"),
        ("/api/v1/pods", "status.hostIP=x", "field label not supported: status.hostIP"),
        ("/api/v1/nodes", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        (
            "/api/v1/services",
            "spec.type=x",
            '"spec.type" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "/apis/batch/v1/jobs",
            "status.phase=x",
            'field label "status.phase" not supported for batchv1.Job',
        ),
        (
            "/api/v1/pods",
            "spec.nodeName",
            "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'",
        ),
        (
            "/api/v1/pods",
            "metadata.name=a=b",
            "invalid field selector: unescaped character in value: 61",
        ),
    ],
)
def test_field_selectors_the_server_refuses(
    cluster: Cluster, path: str, selector: str, message: str
) -> None:
    answer = cluster.admin.request("GET", path, query={"fieldSelector": selector})
    assert (answer.code, answer.body["reason"], answer.body["message"]) == (
        400,
        "BadRequest",
        message,
    )


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("app=(x", "unable to parse requirement: found '(', expected: identifier"),
        ("app in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a b", "unable to parse requirement: found 'b', expected: '=', '!=', '==', 'in', notin'"),
        ("=x", "found '=', expected: !, identifier, or 'end of string'"),
        ("app!=x,", "found '', expected: identifier after ','"),
        ("app=x y", "found 'y', expected: ',' or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        (
            "-bad=1",
            'unable to parse requirement: invalid label key "-bad": name part must consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "app=-x",
            'unable to parse requirement: invalid label value: "-x": at key: "app": a valid label '
            "must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
            "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ],
)
def test_label_selectors_the_server_refuses(cluster: Cluster, selector: str, message: str) -> None:
    answer = cluster.admin.request("GET", "/api/v1/pods", query={"labelSelector": selector})
    assert (answer.code, answer.body["reason"], answer.body["message"]) == (
        400,
        "BadRequest",
        message,
    )


def test_label_selectors_that_match(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    for name, labels in [
        ("p1", {"app": "a", "tier": "web"}),
        ("p2", {"app": "b"}),
        ("p3", {"app": "a", "tier": "db"}),
        ("p4", {"other": "x"}),
    ]:
        create_pod(cluster, ns, name, labels=labels)
    pods = f"/api/v1/namespaces/{ns}/pods"
    cases = {
        "app=a": ["p1", "p3"],
        "app==a,tier!=db": ["p1"],
        "app in (a, b)": ["p1", "p2", "p3"],
        "app notin (a)": ["p2", "p4"],
        "!app": ["p4"],
        "tier": ["p1", "p3"],
        "app=": [],
        "app in ()": [],
    }
    for selector, expected in cases.items():
        assert names(cluster.admin.get(pods, labelSelector=selector)) == expected, selector


# -- paging ------------------------------------------------------------------------------------


def test_pages_are_filled_after_filtering_and_read_at_one_revision(cluster: Cluster) -> None:
    """The etcd store fills each page to `limit` with matches; the last page may be empty.

    (It does not send short pages with a continue token, whatever the API contract allows:
    Faults.short_pages makes the loopback server do that.)
    """
    ns = cluster.create_namespace()
    for i in range(10):
        create_pod(cluster, ns, f"p{i}", labels={"app": "x" if i in (1, 8) else "y"})
    pods = f"/api/v1/namespaces/{ns}/pods"
    first = cluster.admin.get(pods, limit=2, labelSelector="app=x")
    assert names(first) == ["p1", "p8"]
    assert token_of(first)["start"] == "p8\x00"
    assert token_of(first)["v"] == "meta.k8s.io/v1"
    assert "remainingItemCount" not in first["metadata"]  # not counted under a selector
    last = cluster.admin.get(
        pods, limit=2, labelSelector="app=x", **{"continue": first["metadata"]["continue"]}
    )
    assert names(last) == [] and "continue" not in last["metadata"]

    page = cluster.admin.get(pods, limit=3)
    assert names(page) == ["p0", "p1", "p2"]
    assert page["metadata"]["remainingItemCount"] == 7
    assert token_of(page)["rv"] == int(page["metadata"]["resourceVersion"])
    create_pod(cluster, ns, "p5a")  # after the first page: the list does not see it
    cluster.admin.delete(f"{pods}/p9", {"gracePeriodSeconds": 0})
    rest = cluster.admin.get(pods, limit=100, **{"continue": page["metadata"]["continue"]})
    assert names(rest) == ["p3", "p4", "p5", "p6", "p7", "p8", "p9"]
    assert rest["metadata"]["resourceVersion"] == page["metadata"]["resourceVersion"]
    assert "continue" not in rest["metadata"]
    assert "p5a" in names(cluster.admin.get(pods))


def test_resource_version_0_is_served_whole_from_the_watch_cache(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    for i in range(5):
        create_pod(cluster, ns, f"p{i}")

    def cached() -> Any:
        # rv=0 asks for any version: the cache may be a write or two behind for a moment (a CI
        # run saw 4 of the 5 pods), but it never pages, whatever the limit
        page = cluster.admin.get(f"/api/v1/namespaces/{ns}/pods", limit=2, resourceVersion="0")
        assert "continue" not in page["metadata"], page["metadata"]
        return page if len(names(page)) == 5 else None

    page = wait_for(cached, 10, "the watch cache to hold the 5 pods")
    assert sorted(names(page)) == [f"p{i}" for i in range(5)]  # a map's order, not by key


def test_continue_with_a_resource_version_is_refused(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    for i in range(3):
        create_pod(cluster, ns, f"p{i}")
    page = cluster.admin.get(f"/api/v1/namespaces/{ns}/pods", limit=1)
    answer = cluster.admin.request(
        "GET",
        f"/api/v1/namespaces/{ns}/pods",
        query={"limit": 1, "continue": page["metadata"]["continue"], "resourceVersion": "1"},
    )
    assert answer.code == 400
    assert (
        answer.body["message"] == "specifying resource version is not allowed when using continue"
    )


# -- who may do what -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "message", "details"),
    [
        (
            "GET",
            "/api/v1/namespaces/ml/pods",
            'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "ml"',
            {"kind": "pods"},
        ),
        (
            "GET",
            "/api/v1/pods",
            'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope',
            {"kind": "pods"},
        ),
        (
            "GET",
            "/api/v1/namespaces/ml/pods/p1",
            'pods "p1" is forbidden: User "system:anonymous" cannot get resource "pods" in API group "" in the namespace "ml"',
            {"name": "p1", "kind": "pods"},
        ),
        (
            "GET",
            "/apis/batch/v1/jobs",
            'jobs.batch is forbidden: User "system:anonymous" cannot list resource "jobs" in API group "batch" at the cluster scope',
            {"group": "batch", "kind": "jobs"},
        ),
        (
            "DELETE",
            "/apis/batch/v1/namespaces/ml/jobs/j",
            'jobs.batch "j" is forbidden: User "system:anonymous" cannot delete resource "jobs" in API group "batch" in the namespace "ml"',
            {"name": "j", "group": "batch", "kind": "jobs"},
        ),
        (
            "PATCH",
            "/api/v1/namespaces/ml/pods/p1/status",
            'pods "p1" is forbidden: User "system:anonymous" cannot patch resource "pods/status" in API group "" in the namespace "ml"',
            {"name": "p1", "kind": "pods"},
        ),
        (
            "GET",
            "/api/v1/nodes",
            'nodes is forbidden: User "system:anonymous" cannot list resource "nodes" in API group "" at the cluster scope',
            {"kind": "nodes"},
        ),
        ("GET", "/api", 'forbidden: User "system:anonymous" cannot get path "/api"', {}),
    ],
)
def test_anonymous_users_are_refused(
    cluster: Cluster, method: str, path: str, message: str, details: dict[str, str]
) -> None:
    body = {} if method == "PATCH" else None
    answer = cluster.client(None).request(
        method, path, body, content_type="application/merge-patch+json"
    )
    assert answer.code == 403
    assert answer.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


def test_public_paths_discovery_and_an_unknown_token(cluster: Cluster) -> None:
    anonymous = cluster.client(None)
    assert anonymous.request("GET", "/version").body["gitVersion"] == "v1.20.2"
    assert anonymous.request("GET", "/readyz").code == 200
    alice = cluster.client("alice")  # authenticated, with no rights: discovery only
    assert alice.get("/api")["versions"] == ["v1"]
    core = {r["name"]: r for r in alice.get("/api/v1")["resources"]}
    assert core["pods"]["verbs"] == [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    assert core["pods/status"] == {
        "name": "pods/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["get", "patch", "update"],
    }
    assert core["nodes"]["namespaced"] is False
    batch = {r["name"]: r for r in alice.get("/apis/batch/v1")["resources"]}
    assert batch["jobs"]["kind"] == "Job" and batch["jobs"]["namespaced"] is True
    groups = {g["name"]: g for g in alice.get("/apis")["groups"]}
    assert groups["batch"]["preferredVersion"] == {"groupVersion": "batch/v1", "version": "v1"}
    stranger = Client(cluster.url, "not-a-token", cluster.ca_file).request("GET", "/api/v1/pods")
    assert (stranger.code, stranger.body) == (
        401,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        },
    )


def test_a_role_grants_one_namespace(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    bob = cluster.client("bob")
    cluster.grant("bob", ["get", "list", "watch"], ["pods"], ns)
    assert bob.get(f"/api/v1/namespaces/{ns}/pods")["items"] == []
    refused = bob.request("GET", "/api/v1/pods")
    assert refused.code == 403 and "at the cluster scope" in refused.body["message"]
    status = bob.request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/x/status",
        {},
        content_type="application/merge-patch+json",
    )
    assert status.code == 403 and 'cannot patch resource "pods/status"' in status.body["message"]
    cluster.grant("bob", ["list"], ["jobs"], None, api_group="batch")
    assert bob.get("/apis/batch/v1/jobs")["kind"] == "JobList"


def test_an_apply_that_creates_needs_create_besides_patch(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    bob = cluster.client("bob")
    cluster.grant("bob", ["patch"], ["services"], ns)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"clusterIP": "None", "ports": [{"port": 2222, "protocol": "TCP"}]},
    }
    path = f"/api/v1/namespaces/{ns}/services/s"
    for query in ({"fieldManager": "t"}, {"fieldManager": "t", "dryRun": "All"}):
        refused = bob.request(
            "PATCH", path, service, query=query, content_type="application/apply-patch+yaml"
        )
        # The patch was allowed; the create inside it was not, in words without the user's.
        assert (refused.code, refused.body["message"]) == (403, 'services "s" is forbidden: ')
        assert refused.body["details"] == {"name": "s", "kind": "services"}
    cluster.grant("bob", ["create"], ["services"], ns)
    assert bob.apply(path, service, manager="t")["metadata"]["name"] == "s"


# -- objects in and out --------------------------------------------------------------------------


def test_not_found_and_already_exists(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    admin = cluster.admin
    missing = admin.request("GET", f"/api/v1/namespaces/{ns}/pods/nope")
    assert (missing.code, missing.body["message"], missing.body["details"]) == (
        404,
        'pods "nope" not found',
        {"name": "nope", "kind": "pods"},
    )
    job = admin.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/nope")
    assert (job.code, job.body["message"], job.body["details"]) == (
        404,
        'jobs.batch "nope" not found',
        {"name": "nope", "group": "batch", "kind": "jobs"},
    )
    unknown = admin.request("GET", f"/api/v1/namespaces/{ns}/foos")
    assert (unknown.code, unknown.body["message"], unknown.body["details"]) == (
        404,
        "the server could not find the requested resource",
        {},
    )
    nowhere = admin.request(
        "POST",
        "/api/v1/namespaces/no-such-ns/pods",
        {"metadata": {"name": "x"}, "spec": {"containers": [container("c")]}},
    )
    assert (nowhere.code, nowhere.body["message"]) == (404, 'namespaces "no-such-ns" not found')
    create_pod(cluster, ns, "twice")
    again = admin.request(
        "POST",
        f"/api/v1/namespaces/{ns}/pods",
        {"metadata": {"name": "twice"}, "spec": {"containers": [container("c")]}},
    )
    assert (again.code, again.body["reason"], again.body["message"]) == (
        409,
        "AlreadyExists",
        'pods "twice" already exists',
    )


def test_what_the_server_fills_in(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    pod = create_pod(
        cluster, ns, "defaults", node="n1", hostNetwork=True,
        containers=[container("tf", "tensorflow/tensorflow:2.15.0", limits={"nvidia.com/gpu": "2", "memory": "1Gi"}, ports=[2222])],
    )  # fmt: skip
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    (tf,) = spec["containers"]
    assert tf["resources"]["requests"] == {"memory": "1Gi", "nvidia.com/gpu": "2"}
    assert tf["ports"] == [{"hostPort": 2222, "containerPort": 2222, "protocol": "TCP"}]
    assert (tf["imagePullPolicy"], tf["terminationMessagePath"]) == (
        "IfNotPresent",
        "/dev/termination-log",
    )
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"]) == (
        "Always",
        "ClusterFirst",
        "default-scheduler",
    )
    assert [t["key"] for t in spec["tolerations"]] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    assert pod["status"] == {"phase": "Pending", "qosClass": "Burstable"}
    job = cluster.admin.post(
        f"/apis/batch/v1/namespaces/{ns}/jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {
                "parallelism": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container("c")]}},
            },
        },
    )
    uid = job["metadata"]["uid"]
    assert (
        job["spec"]["backoffLimit"],
        job["spec"]["parallelism"],
        job["spec"].get("completions"),
    ) == (6, 0, None)
    assert job["spec"]["selector"] == {"matchLabels": {"controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == {"controller-uid": uid, "job-name": "j"}
    service = cluster.admin.post(
        f"/api/v1/namespaces/{ns}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"selector": {"a": "b"}, "ports": [{"port": 80}]},
        },
    )
    assert service["spec"]["ports"] == [{"protocol": "TCP", "port": 80, "targetPort": 80}]
    assert service["spec"]["clusterIP"].startswith("10.0.0.")
    assert (service["spec"]["type"], service["spec"]["sessionAffinity"]) == ("ClusterIP", "None")


# -- server-side apply ---------------------------------------------------------------------------


def applied_job(name: str, image: str = "busybox:1.36", backoff: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"simpletfjob/job": "run"}},
        "spec": {
            "parallelism": 0,  # the real Job controller leaves it alone
            "backoffLimit": backoff,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "tf", "image": image}]}
            },
        },
    }


def test_server_side_apply(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    admin = cluster.admin
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/j"
    apply = {"content_type": "application/apply-patch+yaml"}
    anonymous_manager = admin.request("PATCH", path, applied_job("j"), **apply)
    assert anonymous_manager.code == 422
    assert (
        anonymous_manager.body["message"]
        == 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    dry = admin.request(
        "PATCH",
        path,
        applied_job("j"),
        query={"fieldManager": "simpletfjob", "dryRun": "All"},
        **apply,
    )
    assert dry.code == 201 and admin.request("GET", path).code == 404
    created = admin.request(
        "PATCH", path, applied_job("j"), query={"fieldManager": "simpletfjob"}, **apply
    )
    assert created.code == 201
    (entry,) = created.body["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("simpletfjob", "Apply")
    fields = entry["fieldsV1"]["f:spec"]
    assert fields["f:template"]["f:spec"]["f:containers"]['k:{"name":"tf"}'] == {
        ".": {},
        "f:image": {},
        "f:name": {},
    }
    again = admin.apply(path, applied_job("j"), manager="simpletfjob")
    assert again["metadata"]["resourceVersion"] == created.body["metadata"]["resourceVersion"]
    conflict = admin.request(
        "PATCH", path, applied_job("j", backoff=4), query={"fieldManager": "other"}, **apply
    )
    assert conflict.code == 409
    assert (
        conflict.body["message"]
        == 'Apply failed with 1 conflict: conflict with "simpletfjob": .spec.backoffLimit'
    )
    assert conflict.body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "simpletfjob"',
            "field": ".spec.backoffLimit",
        }
    ]
    forced = admin.apply(path, applied_job("j", backoff=4), manager="other", force=True)
    assert forced["spec"]["backoffLimit"] == 4
    immutable = admin.request(
        "PATCH",
        path,
        applied_job("j", image="busybox:1.37", backoff=4),
        query={"fieldManager": "simpletfjob", "force": "true"},
        **apply,
    )
    assert immutable.code == 422 and immutable.body["reason"] == "Invalid"
    assert immutable.body["message"].startswith(
        'Job.batch "j" is invalid: spec.template: Invalid value: '
    )
    assert immutable.body["message"].endswith(": field is immutable")
    assert immutable.body["details"]["causes"][0]["field"] == "spec.template"


def test_merge_patch_and_the_status_subresource(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    create_pod(cluster, ns, "p", node="n1")
    path = f"/api/v1/namespaces/{ns}/pods/p"
    patched = cluster.admin.merge_patch(
        path, {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Failed"}}
    )
    assert patched["metadata"]["labels"] == {"a": "b"} and patched["status"]["phase"] == "Pending"
    status = pod_status(patched, "Running", restarts=2)
    through = cluster.admin.merge_patch(
        f"{path}/status", {"spec": {"nodeName": "elsewhere"}, "status": status}
    )
    assert through["spec"]["nodeName"] == "n1" and through["status"]["phase"] == "Running"
    assert through["status"]["containerStatuses"][0]["restartCount"] == 2
    unsupported = cluster.admin.request("PATCH", path, {}, content_type="application/json")
    assert (unsupported.code, unsupported.body["reason"]) == (415, "UnsupportedMediaType")


def test_updates_conflicts_and_the_other_patch_types(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    admin = cluster.admin
    path = f"/api/v1/namespaces/{ns}/pods/x"
    stale = create_pod(cluster, ns, "x", labels={"a": "b"})
    admin.merge_patch(path, {"metadata": {"labels": {"c": "d"}}})
    conflict = admin.request("PUT", path, stale)
    assert (conflict.code, conflict.body["reason"], conflict.body["details"]) == (
        409,
        "Conflict",
        {"name": "x", "kind": "pods"},
    )
    assert conflict.body["message"] == (
        'Operation cannot be fulfilled on pods "x": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    current = admin.get(path)
    current["spec"]["containers"][0]["name"] = "renamed"
    forbidden = admin.request("PUT", path, current)
    assert (forbidden.code, forbidden.body["details"]["kind"]) == (422, "Pod")
    assert forbidden.body["message"].startswith(
        'Pod "x" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds` "
        "or `spec.tolerations` (only additions to existing tolerations)"
    )
    json_patch = {"content_type": "application/json-patch+json"}
    replaced = admin.call(
        "PATCH", path, [{"op": "replace", "path": "/metadata/labels/a", "value": "z"}], **json_patch
    )
    assert replaced["metadata"]["labels"] == {"a": "z", "c": "d"}
    broken = admin.request(
        "PATCH", path, [{"op": "replace", "path": "/metadata/nope/a", "value": "z"}], **json_patch
    )
    assert (broken.code, broken.body["message"]) == (
        422,
        "the server rejected our request due to an error in our request",
    )
    admin.post(
        f"/api/v1/namespaces/{ns}/services",
        {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "name": "a"}]}},
    )
    strategic = admin.call(
        "PATCH", f"/api/v1/namespaces/{ns}/services/s", {"spec": {"ports": [{"port": 81, "name": "b"}]}},
        content_type="application/strategic-merge-patch+json",
    )  # fmt: skip
    assert [(p["name"], p["port"]) for p in strategic["spec"]["ports"]] == [("b", 81), ("a", 80)]


# -- deleting ------------------------------------------------------------------------------------


def owned_pod(
    cluster: Cluster, ns: str, name: str, job: dict[str, Any], node: str | None = None
) -> None:
    """A pod that names the Job its owner, without the Job controller's labels (it stays away)."""
    reference = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    body: dict[str, Any] = {
        "metadata": {"name": name, "ownerReferences": [reference]},
        "spec": {"containers": [container("c")]},
    }
    if node:
        body["spec"]["nodeName"] = node
    cluster.admin.post(f"/api/v1/namespaces/{ns}/pods", body)


def test_deleting_a_job_orphans_its_pods_unless_told(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    admin = cluster.admin
    jobs = f"/apis/batch/v1/namespaces/{ns}/jobs"
    orphaning = admin.post(jobs, applied_job("orphaning"))
    owned_pod(cluster, ns, "kept", orphaning)
    answer = admin.delete(f"{jobs}/orphaning")  # batch/v1's default: Orphan
    assert answer["kind"] == "Job" and answer["metadata"]["finalizers"] == ["orphan"]
    wait_for(lambda: admin.request("GET", f"{jobs}/orphaning").code == 404, 30, "the Job to go")
    kept = wait_for(
        lambda: (
            "ownerReferences"
            not in (p := admin.get(f"/api/v1/namespaces/{ns}/pods/kept"))["metadata"]
            and p
        ),
        30,
        "the pod to be orphaned",
    )
    assert kept["metadata"]["name"] == "kept"

    background = admin.post(jobs, applied_job("background"))
    owned_pod(cluster, ns, "unbound", background)
    answer = admin.delete(f"{jobs}/background", {"propagationPolicy": "Background"})
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": "background",
            "group": "batch",
            "kind": "jobs",
            "uid": background["metadata"]["uid"],
        },
    }
    wait_for(
        lambda: admin.request("GET", f"/api/v1/namespaces/{ns}/pods/unbound").code == 404,
        30,
        "the dependent pod to go",
    )

    bad = admin.request("DELETE", f"{jobs}/x", {"propagationPolicy": "Sideways"})
    assert bad.code == 422
    assert (
        bad.body["message"]
        == 'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil"'
    )


def test_foreground_deletion_waits_for_a_terminating_pod(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    admin = cluster.admin
    job = admin.post(f"/apis/batch/v1/namespaces/{ns}/jobs", applied_job("fg"))
    owned_pod(cluster, ns, "bound", job, node="n1")
    cluster.set_pod_status(ns, "bound", "Running")
    answer = admin.delete(
        f"/apis/batch/v1/namespaces/{ns}/jobs/fg", {"propagationPolicy": "Foreground"}
    )
    assert (
        answer["metadata"]["finalizers"] == ["foregroundDeletion"]
        and answer["metadata"]["deletionTimestamp"]
    )
    pod_path = f"/api/v1/namespaces/{ns}/pods/bound"
    terminating = wait_for(
        lambda: (p := admin.get(pod_path))["metadata"].get("deletionTimestamp") and p,
        30,
        "the pod to terminate",
    )
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    assert admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/fg")["metadata"]["finalizers"] == [
        "foregroundDeletion"
    ]
    cluster.force_delete(ns, "bound")
    wait_for(
        lambda: admin.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/fg").code == 404,
        30,
        "the Job to go",
    )


def test_a_pod_on_a_node_terminates_until_deleted_with_grace_0(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    create_pod(cluster, ns, "bound", node="n1", phase="Running")
    create_pod(cluster, ns, "done", node="n1", phase="Succeeded")
    path = f"/api/v1/namespaces/{ns}/pods"
    graceful = cluster.admin.delete(f"{path}/bound")
    assert graceful["kind"] == "Pod" and graceful["metadata"]["deletionGracePeriodSeconds"] == 30
    assert cluster.admin.get(f"{path}/bound")["metadata"]["deletionTimestamp"]
    finished = cluster.admin.delete(f"{path}/done")  # a finished pod goes at once
    assert finished["kind"] == "Pod" and finished["metadata"]["deletionGracePeriodSeconds"] == 0
    assert cluster.admin.request("GET", f"{path}/done").code == 404
    dry = cluster.admin.delete(f"{path}/bound", {"gracePeriodSeconds": 0, "dryRun": ["All"]})
    assert dry["kind"] == "Pod" and cluster.admin.request("GET", f"{path}/bound").code == 200
    cluster.force_delete(ns, "bound")
    assert cluster.admin.request("GET", f"{path}/bound").code == 404


# -- watching ------------------------------------------------------------------------------------


def test_watch_events_of_a_pod_lifecycle(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    path = f"/api/v1/namespaces/{ns}/pods"
    rv = cluster.admin.get(path)["metadata"]["resourceVersion"]
    create_pod(cluster, ns, "w", labels={"app": "x"})
    create_pod(cluster, ns, "other", labels={"app": "y"})
    cluster.admin.merge_patch(f"{path}/w", {"metadata": {"labels": {"app": "z"}}})  # leaves app=x
    cluster.admin.merge_patch(f"{path}/other", {"metadata": {"labels": {"app": "x"}}})  # joins it
    cluster.admin.delete(f"{path}/other")
    seen = []
    with cluster.admin.watch(
        path, resourceVersion=rv, labelSelector="app=x", timeoutSeconds=5
    ) as events:
        for event in events:
            meta = event["object"]["metadata"]
            seen.append(
                (event["type"], meta["name"], meta["labels"]["app"], "deletionTimestamp" in meta)
            )
            assert (event["object"]["kind"], event["object"]["apiVersion"]) == ("Pod", "v1")
            if event["type"] == "DELETED" and meta["name"] == "other":
                break
    assert seen == [
        ("ADDED", "w", "x", False),
        ("DELETED", "w", "x", False),  # it left the selection: DELETED, as it was
        ("ADDED", "other", "x", False),  # it entered the selection
        ("MODIFIED", "other", "x", True),  # a pod's deletion is written first ...
        ("DELETED", "other", "x", True),  # ... then done
    ]


def test_a_watch_without_resource_version_starts_with_what_exists(cluster: Cluster) -> None:
    ns = cluster.create_namespace()
    create_pod(cluster, ns, "a")
    create_pod(cluster, ns, "b")
    with cluster.admin.watch(f"/api/v1/namespaces/{ns}/pods", timeoutSeconds=10) as events:
        seen = [(e["type"], e["object"]["metadata"]["name"]) for e in itertools.islice(events, 2)]
    assert sorted(seen) == [("ADDED", "a"), ("ADDED", "b")]  # from the cache, in its order


def test_a_watch_ends_at_its_timeout(cluster: Cluster) -> None:
    import time

    ns = cluster.create_namespace()
    rv = cluster.admin.get(f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"]
    started = time.monotonic()
    with cluster.admin.watch(
        f"/api/v1/namespaces/{ns}/pods", resourceVersion=rv, timeoutSeconds=1
    ) as events:
        assert list(events) == []
    assert 0.9 < time.monotonic() - started < 5
