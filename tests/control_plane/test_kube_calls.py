"""kube/'s calls against both API servers: list, get, server-side apply, delete, and refusals.

Each test runs on the loopback server and on the real control plane (the `cluster`
fixture), through a real kubeconfig and the real `kubernetes` client, so what kube/
decides from an answer (created, configured or unchanged; already gone; the refusal's
wording) is checked against what kube-apiserver really answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simpletfjob.errors import ClusterError, UsageError
from simpletfjob.kube.connection import Connection, Settings, connect
from simpletfjob.kube.lists import list_objects
from simpletfjob.kube.objects import apply, delete, get
from simpletfjob.kube.request import ApiError, ApplyConflict
from simpletfjob.kube.resources import JOBS, PODS, SERVICES
from tests.support.cluster import ADMIN, Cluster, wait_for
from tests.support.kubeapi import container


def connected(cluster: Cluster, tmp_path: Path, namespace: str, user: str = ADMIN) -> Connection:
    kubeconfig = cluster.kubeconfig(tmp_path / f"kubeconfig-{user}", user, namespace)
    return connect(Settings(kubeconfig=str(kubeconfig), page_size=2, deadline=20.0))


def job(name: str, label: str = "1", image: str = "busybox") -> dict[str, Any]:
    """A Job as a render writes it: no namespace, no status."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"simpletfjob/job": "t", "try": label}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"simpletfjob/job": "t"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "tensorflow", "image": image}],
                },
            },
        },
    }


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"simpletfjob/job": "t"}},
        "spec": {
            "clusterIP": "None",
            "selector": {"job-name": name},
            "ports": [{"name": "tf", "port": 2222, "protocol": "TCP"}],
        },
    }


def create_pod(cluster: Cluster, namespace: str, name: str, **metadata: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **metadata},
        "spec": {"containers": [container("main")]},
    }
    return cluster.admin.post(f"/api/v1/namespaces/{namespace}/pods", body)  # type: ignore[no-any-return]


def names(items: list[dict[str, Any]]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in items)


# -- server-side apply ------------------------------------------------------------------------


def test_apply_says_created_unchanged_and_configured(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        first = apply(conn, JOBS, job("mnist-worker-0"))
        assert first.outcome == "created"
        assert first.object["metadata"]["namespace"] == ns  # the context's namespace
        again = apply(conn, JOBS, job("mnist-worker-0"))
        assert again.outcome == "unchanged"
        stored = get(conn, JOBS, "mnist-worker-0")
        assert stored is not None and stored["metadata"]["labels"]["try"] == "1"
        assert any(m["manager"] == "simpletfjob" for m in stored["metadata"]["managedFields"])

        relabelled = apply(conn, JOBS, job("mnist-worker-0", label="2"))
        assert relabelled.outcome == "configured"
        assert relabelled.object["metadata"]["labels"]["try"] == "2"

        assert apply(conn, SERVICES, service("mnist-worker-0")).outcome == "created"
        assert apply(conn, SERVICES, service("mnist-worker-0")).outcome == "unchanged"


def test_a_dry_run_says_what_apply_would_do_and_changes_nothing(
    cluster: Cluster, tmp_path: Path
) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        would = apply(conn, JOBS, job("dry"), dry_run=True)
        assert would.outcome == "created"
        assert get(conn, JOBS, "dry", missing_ok=True) is None
        apply(conn, JOBS, job("dry"))
        assert apply(conn, JOBS, job("dry"), dry_run=True).outcome == "unchanged"
        changed = apply(conn, JOBS, job("dry", label="2"), dry_run=True)
        assert changed.outcome == "configured"
        assert changed.object["metadata"]["labels"]["try"] == "2"
        stored = get(conn, JOBS, "dry")
        assert stored is not None and stored["metadata"]["labels"]["try"] == "1"


def test_an_immutable_change_is_one_line_naming_the_job(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        apply(conn, JOBS, job("mnist-ps-0"))
        with pytest.raises(ApiError) as caught:
            apply(conn, JOBS, job("mnist-ps-0", image="tensorflow/tensorflow"))
    message = str(caught.value)
    assert caught.value.status == 422
    assert message.startswith(f"{conn.target}: cannot apply job 'mnist-ps-0' in namespace {ns}: ")
    assert 'Job.batch "mnist-ps-0" is invalid' in message and "field is immutable" in message
    assert message.endswith("(422 Invalid)") and "\n" not in message


def test_a_field_of_another_manager_conflicts_until_forced(
    cluster: Cluster, tmp_path: Path
) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        apply(conn, JOBS, job("shared"), field_manager="someone-else")
        with pytest.raises(ApiError) as caught:
            apply(conn, JOBS, job("shared", label="mine"))
        assert caught.value.status == 409
        assert str(caught.value) == (
            f"{conn.target}: cannot apply job 'shared' in namespace {ns}: .metadata.labels.try "
            "is owned by field manager 'someone-else' (409 Conflict)"
        )
        assert isinstance(caught.value, ApplyConflict)
        assert caught.value.conflicts == [("someone-else", ".metadata.labels.try")]
        forced = apply(conn, JOBS, job("shared", label="mine"), force=True)
        assert forced.outcome == "configured"
        assert forced.object["metadata"]["labels"]["try"] == "mine"


def test_an_object_made_meanwhile_as_this_apply_makes_it_is_unchanged(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Another apply of the same render created it after this one looked: 200, not 201."""
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        predicted = apply(conn, JOBS, job("raced"), dry_run=True, live=None)
        assert predicted.outcome == "created"
        assert apply(conn, JOBS, job("raced"), live=None).outcome == "created"  # the other
        again = apply(conn, JOBS, job("raced"), live=None, expected=predicted.object)
        assert again.outcome == "unchanged"
        # Without what it would have made, it says created, as before.
        assert apply(conn, JOBS, job("raced"), live=None).outcome == "created"


def test_conflicts_with_two_managers_name_each_with_its_fields(
    cluster: Cluster, tmp_path: Path
) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        apply(conn, JOBS, job("shared"), field_manager="first")
        theirs = job("shared")
        theirs["metadata"]["labels"] = {"other": "b"}
        del theirs["spec"]
        apply(conn, JOBS, theirs, field_manager="second")
        mine = job("shared", label="mine")
        mine["metadata"]["labels"]["other"] = "mine"
        with pytest.raises(ApplyConflict) as caught:
            apply(conn, JOBS, mine)
    assert sorted(caught.value.conflicts) == [
        ("first", ".metadata.labels.try"),
        ("second", ".metadata.labels.other"),
    ]
    assert caught.value.managers in (["first", "second"], ["second", "first"])
    message = str(caught.value)
    assert ".metadata.labels.try is owned by field manager 'first'" in message
    assert ".metadata.labels.other is owned by field manager 'second'" in message
    assert message.endswith("(409 Conflict)") and "\n" not in message


def test_a_document_in_another_namespace_is_refused_before_any_request(
    cluster: Cluster, tmp_path: Path
) -> None:
    ns = cluster.create_namespace()
    elsewhere = job("x")
    elsewhere["metadata"]["namespace"] = "other"
    with connected(cluster, tmp_path, ns) as conn:
        with pytest.raises(UsageError, match="names namespace 'other'"):
            apply(conn, JOBS, elsewhere, namespace=ns)
        # Without a namespace given, the document's own is used, as kubectl does.
        other = cluster.create_namespace()
        elsewhere["metadata"]["namespace"] = other
        assert apply(conn, JOBS, elsewhere).object["metadata"]["namespace"] == other


# -- get and delete ------------------------------------------------------------------------------


def test_get_names_the_missing_object(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        assert get(conn, JOBS, "nope", missing_ok=True) is None
        with pytest.raises(ApiError) as caught:
            get(conn, JOBS, "nope")
    assert str(caught.value) == (
        f"{conn.target}: job 'nope' in namespace {ns} was not found (404 NotFound)"
    )


@pytest.mark.parametrize(
    ("propagation", "pod_stays"),
    [("Background", False), ("Foreground", False), ("Orphan", True)],
)
def test_delete_with_each_propagation(
    cluster: Cluster, tmp_path: Path, propagation: Any, pod_stays: bool
) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        owner = apply(conn, JOBS, job("run")).object
        # Not the Job's controller reference: the Job controller would release a pod that its
        # selector does not match. The garbage collector follows any owner reference.
        reference = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "run",
            "uid": owner["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
        create_pod(cluster, ns, "run-pod", labels={"mine": "yes"}, ownerReferences=[reference])

        assert not delete(conn, JOBS, "run", propagation=propagation, dry_run=True).already_gone
        assert get(conn, JOBS, "run", missing_ok=True) is not None  # a dry run deletes nothing

        deleted = delete(conn, JOBS, "run", propagation=propagation)
        assert not deleted.already_gone
        if propagation == "Foreground" and deleted.object is not None:
            # kept, with its finalizer, until the garbage collector has deleted the pod
            assert deleted.object["metadata"].get("deletionTimestamp")
        wait_for(lambda: get(conn, JOBS, "run", missing_ok=True) is None, what="the Job to go")

        def pods() -> list[dict[str, Any]]:
            return list_objects(conn, PODS, label_selector="mine=yes").items

        if pod_stays:
            (pod,) = pods()
            assert not pod["metadata"].get("ownerReferences")
        else:
            wait_for(lambda: not pods(), what="the pod to be collected")
        assert delete(conn, JOBS, "run").already_gone


# -- lists ----------------------------------------------------------------------------------------


def test_list_in_pages_with_selectors_in_one_namespace_or_all(
    cluster: Cluster, tmp_path: Path
) -> None:
    ns = cluster.create_namespace()
    other = cluster.create_namespace()
    for i in range(5):
        create_pod(cluster, ns, f"p{i}", labels={"app": "tf" if i != 2 else "web"})
    create_pod(cluster, other, "p9", labels={"app": "tf"})
    with connected(cluster, tmp_path, ns) as conn:
        mine = list_objects(conn, PODS, label_selector="app=tf")  # pages of 2
        assert names(mine.items) == ["p0", "p1", "p3", "p4"]
        assert int(mine.resource_version) > 0
        by_name = list_objects(conn, PODS, field_selector="metadata.name=p3")
        assert names(by_name.items) == ["p3"]
        everywhere = list_objects(conn, PODS, namespace="", label_selector="app=tf")
        assert {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in everywhere.items} >= {
            (ns, "p0"),
            (other, "p9"),
        }
        cached = list_objects(conn, PODS, namespace=other, resource_version="0")
        assert names(cached.items) == ["p9"]


def test_a_bad_field_selector_is_the_servers_one_line(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn, pytest.raises(ApiError) as caught:
        list_objects(conn, PODS, field_selector="spec.unknown=x")
    assert caught.value.status == 400
    assert str(caught.value).startswith(f"{conn.target}: the server answered 400 BadRequest: ")
    assert "spec.unknown" in str(caught.value)


# -- refusals name the verb and the resource --------------------------------------------------------


def test_refusals_name_the_verb_the_resource_and_the_role_needed(
    cluster: Cluster, tmp_path: Path
) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as admin:
        apply(admin, JOBS, job("mnist-ps-0"))
    with connected(cluster, tmp_path, ns, user="bob") as conn:
        target = conn.target

        def refused(call: Any, *args: Any, **kwargs: Any) -> str:
            with pytest.raises(ApiError) as caught:
                call(conn, *args, **kwargs)
            assert caught.value.status == 403
            return str(caught.value)

        assert refused(list_objects, PODS) == (
            f"{target}: user 'bob' cannot list pods in namespace {ns} (403 Forbidden); it needs "
            "a Role with verb 'list' on 'pods'"
        )
        assert refused(list_objects, PODS, namespace="") == (
            f"{target}: user 'bob' cannot list pods in all namespaces (403 Forbidden); it needs "
            "a ClusterRole with verb 'list' on 'pods'"
        )
        assert refused(get, JOBS, "mnist-ps-0") == (
            f"{target}: user 'bob' cannot get jobs in namespace {ns} (403 Forbidden, to get job "
            "'mnist-ps-0'); it needs a Role with verb 'get' on 'jobs' in API group 'batch'"
        )
        assert refused(delete, JOBS, "mnist-ps-0") == (
            f"{target}: user 'bob' cannot delete jobs in namespace {ns} (403 Forbidden, to delete "
            "job 'mnist-ps-0'); it needs a Role with verb 'delete' on 'jobs' in API group 'batch'"
        )
        cluster.grant("bob", ["get"], ["jobs"], namespace=ns, api_group="batch")
        # apply reads the Job first, then patches it: the refusal is the patch's
        assert refused(apply, JOBS, job("mnist-ps-0", label="2")) == (
            f"{target}: user 'bob' cannot patch jobs in namespace {ns} (403 Forbidden, to apply "
            "job 'mnist-ps-0'); it needs a Role with verb 'patch' on 'jobs' in API group 'batch'"
        )
        cluster.grant("bob", ["patch"], ["jobs"], namespace=ns, api_group="batch")
        # Creating by apply needs `create` too; the server's refusal names no user then,
        # so a dry-run create finds it, and the line names the user as every refusal does.
        assert refused(apply, JOBS, job("mnist-worker-0"), dry_run=True) == (
            f"{target}: user 'bob' cannot create jobs in namespace {ns} (403 Forbidden, to apply "
            "job 'mnist-worker-0'); it needs a Role with verb 'create' on 'jobs' in API group 'batch'"
        )


def test_an_unknown_user_is_told_to_log_in_again(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace()
    cluster.tokens["mallory"] = "not-a-token-the-server-knows"
    with (
        connected(cluster, tmp_path, ns, user="mallory") as conn,
        pytest.raises(ClusterError) as caught,
    ):
        list_objects(conn, JOBS)
    assert str(caught.value) == (
        f"{conn.target}: the server refused your credentials (401 Unauthorized); "
        "log in again, or fix the user's token or certificate in your kubeconfig"
    )
