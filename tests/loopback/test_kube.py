"""kube/: the namespace as kubectl resolves it, and one request function's retries and messages.

Every test goes through a real kubeconfig and the real `kubernetes` client to the
loopback API server (tests/support/kubeapi), which is made to fail on cue. The calls
against both servers are in tests/control_plane/test_kube_calls.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.errors import ClusterError, InputError, UsageError
from simpletfjob.kube.connection import Connection, Settings, connect
from simpletfjob.kube.lists import list_objects
from simpletfjob.kube.objects import apply, delete, get
from simpletfjob.kube.paths import kubeconfig_paths
from simpletfjob.kube.request import ApiError, Deadline
from simpletfjob.kube.resources import (
    JOBS,
    NAMESPACES,
    NODES,
    PODS,
    SERVICES,
    Resource,
)
from tests.conftest import write
from tests.support.kubeapi import Answer, KubeAPI, make_job, make_pod, serve, write_kubeconfig

WIDGETS = Resource("example.com", "v1", "widgets", "Widget", namespaced=True)
JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "mnist-ps-0"},
    "spec": {
        "template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
        }
    },
}


@pytest.fixture
def api(kube_env: Path) -> Iterator[KubeAPI]:
    """The loopback server with an admin, and pods in namespace ml."""
    with serve(KubeAPI()) as server:
        server.add_admin()
        server.load("pods", [make_pod(f"p{i}", "ml", labels={"i": str(i)}) for i in range(7)])
        yield server


def connected(api: KubeAPI, tmp_path: Path, **settings: Any) -> Connection:
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", api.url, token="admin-token", namespace="ml"
    )
    fast = {"backoff": 0.01, "connect_timeout": 2.0, "read_timeout": 2.0, **settings}
    return connect(Settings(kubeconfig=str(kubeconfig), **fast))


# -- the namespace ------------------------------------------------------------------------------


def two_contexts(path: Path, server: str) -> Path:
    """A kubeconfig whose current context sets namespace 'ml', and another that sets none."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "admin-token"}}],
        "contexts": [
            {"name": "ml", "context": {"cluster": "c", "user": "u", "namespace": "ml"}},
            {"name": "bare", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "ml",
    }
    return write(path, json.dumps(config))


def test_namespace_explicit_then_the_contexts_then_default(api: KubeAPI, tmp_path: Path) -> None:
    kubeconfig = str(two_contexts(tmp_path / "kubeconfig", api.url))
    with connect(Settings(kubeconfig=kubeconfig)) as conn:
        assert conn.namespace == "ml"
        assert len(list_objects(conn, PODS).items) == 7
    with connect(Settings(kubeconfig=kubeconfig, namespace="other")) as conn:
        assert conn.namespace == "other"
        assert list_objects(conn, PODS).items == []
    with connect(Settings(kubeconfig=kubeconfig, context="bare")) as conn:
        assert conn.namespace == "default"
    paths = [r.path for r in api.requests_for("pods", "list")]
    assert paths == ["/api/v1/namespaces/ml/pods", "/api/v1/namespaces/other/pods"]


@pytest.mark.parametrize(
    ("pod_namespace", "file", "expected"),
    [
        ("from-env", "from-file", "from-env"),
        (None, "from-file\n", "from-file"),
        (None, None, "default"),
    ],
    ids=["POD_NAMESPACE", "service account file", "default"],
)
def test_namespace_in_a_pod(
    kubeapi_tls: KubeAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pod_namespace: str | None,
    file: str | None,
    expected: str,
) -> None:
    account = tmp_path / "serviceaccount"
    write(account / "token", "sa-token")
    assert kubeapi_tls.ca_file is not None
    write(account / "ca.crt", kubeapi_tls.ca_file.read_text())
    if file is not None:
        write(account / "namespace", file)
    host, port = kubeapi_tls.url.removeprefix("https://").split(":")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    if pod_namespace is not None:
        monkeypatch.setenv("POD_NAMESPACE", pod_namespace)
    with connect(Settings(service_account_dir=str(account))) as conn:
        assert conn.namespace == expected
        assert conn.target.context is None
    with connect(Settings(service_account_dir=str(account), namespace="given")) as conn:
        assert conn.namespace == "given"


def test_a_namespace_that_cannot_be_one_is_refused_when_needed_naming_where_it_came_from(
    api: KubeAPI, tmp_path: Path
) -> None:
    conn = connected(api, tmp_path, namespace="ML_Team")
    with conn, pytest.raises(UsageError) as caught:
        list_objects(conn, PODS)
    assert str(caught.value) == (
        "--namespace: 'ML_Team' is not a namespace name (lower-case letters, digits and '-', "
        "at most 63, starting and ending with a letter or digit)"
    )
    path = tmp_path / "kc"
    config = json.loads(two_contexts(path, api.url).read_text())
    where = f"kubeconfig {path}: contexts[0] ('ml').context.namespace"
    for value, problem in (
        (5, f"{where} must be a string, not the integer 5"),
        ("a.b", f"{where}: 'a.b' is not a namespace name"),
    ):
        config["contexts"][0]["context"]["namespace"] = value
        write(path, json.dumps(config))
        with connect(Settings(kubeconfig=str(path))) as conn:
            # Nodes need no namespace: kubectl reads them whatever the context's says.
            assert list_objects(conn, NODES).items == []
            with pytest.raises(InputError) as caught:
                list_objects(conn, JOBS)
        assert str(caught.value).startswith(problem)
    assert [r.resource for r in api.requests] == ["nodes", "nodes"]


# -- where things are --------------------------------------------------------------------------


def test_resources_know_their_paths_and_names() -> None:
    assert NODES.path() == "/api/v1/nodes"
    assert NODES.path("ignored", "n1") == "/api/v1/nodes/n1"
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("ml") == "/api/v1/namespaces/ml/pods"
    assert JOBS.path("ml", "mnist-ps-0") == "/apis/batch/v1/namespaces/ml/jobs/mnist-ps-0"
    assert NAMESPACES.path(name="ml") == "/api/v1/namespaces/ml"
    assert (JOBS.api_version, JOBS.singular) == ("batch/v1", "job")
    assert JOBS.ref("mnist-ps-0") == "job.batch/mnist-ps-0"
    assert SERVICES.ref("mnist-worker-0") == "service/mnist-worker-0"


def test_no_cluster_at_all_says_what_to_do(kube_env: Path) -> None:
    with pytest.raises(ClusterError) as caught:
        kubeconfig_paths(None, {"HOME": str(kube_env)})
    assert str(caught.value) == (
        "no cluster to connect to: there is no --kubeconfig, $KUBECONFIG or ~/.kube/config, "
        "and this is not a pod; point at a cluster with --kubeconfig FILE (or $KUBECONFIG)"
    )


# -- lists ------------------------------------------------------------------------------------


def test_pages_follow_continue_even_when_short_or_empty(api: KubeAPI, tmp_path: Path) -> None:
    api.faults.short_pages = True  # read `limit` objects, then filter: pages of 0 or 1 here
    with connected(api, tmp_path, page_size=2) as conn:
        listed = list_objects(conn, PODS, label_selector="i in (0,3,6)")
    assert [p["metadata"]["name"] for p in listed.items] == ["p0", "p3", "p6"]
    requests = api.requests_for("pods", "list")
    assert len(requests) == 4 and all(r.query["limit"] == "2" for r in requests)
    assert all(r.query["labelSelector"] == "i in (0,3,6)" for r in requests)


def test_an_expired_continue_restarts_the_list_once(api: KubeAPI, tmp_path: Path) -> None:
    api.faults.expire_continue = 1
    with connected(api, tmp_path, page_size=3) as conn:
        listed = list_objects(conn, PODS)
    assert sorted(p["metadata"]["name"] for p in listed.items) == [f"p{i}" for i in range(7)]
    starts = ["continue" in r.query for r in api.requests_for("pods", "list")]
    assert starts == [False, True, False, True, True]
    api.requests.clear()
    api.faults.expire_continue = 2
    with connected(api, tmp_path, page_size=3) as conn, pytest.raises(ClusterError) as caught:
        list_objects(conn, PODS)
    assert str(caught.value) == (
        f"{conn.target}: the pod list changes faster than it can be read in pages "
        "(the continue token expired twice, 410 Expired); try again"
    )


def test_the_cache_is_asked_with_resource_version_0(api: KubeAPI, tmp_path: Path) -> None:
    with connected(api, tmp_path, page_size=2) as conn:
        listed = list_objects(conn, PODS, field_selector="metadata.name=p4", resource_version="0")
    assert [p["metadata"]["name"] for p in listed.items] == ["p4"]
    (request,) = api.requests_for("pods", "list")
    assert request.query == {
        "limit": "2",
        "fieldSelector": "metadata.name=p4",
        "resourceVersion": "0",
    }


class Garbled(KubeAPI):
    """A server (or a proxy in front of one) whose list answers are not lists."""

    body = b""

    def handle(self, method: str, path: str, *args: Any, **kwargs: Any) -> Answer:
        if path.endswith("/pods"):
            return Answer(200, {"Content-Type": "application/json"}, self.body)
        return super().handle(method, path, *args, **kwargs)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html>proxy error</html>", "is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "is not JSON"),
        (b'{"kind": "PodList", "items": {}}', "is not a PodList"),
        (b'{"items": [], "metadata": {"continue": 3}}', "is not a PodList"),
    ],
)
def test_an_answer_that_is_not_a_list_is_one_line(
    kube_env: Path, tmp_path: Path, body: bytes, problem: str
) -> None:
    with serve(Garbled()) as garbled:
        garbled.body = body
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", garbled.url, namespace="ml")
        with (
            connect(Settings(kubeconfig=str(kubeconfig))) as conn,
            pytest.raises(ClusterError) as caught,
        ):
            list_objects(conn, PODS)
    assert (
        str(caught.value)
        == f"{conn.target}: the answer to GET /api/v1/namespaces/ml/pods {problem}"
    )


def test_a_resource_the_server_does_not_serve(api: KubeAPI, tmp_path: Path) -> None:
    with connected(api, tmp_path) as conn, pytest.raises(ApiError) as caught:
        list_objects(conn, WIDGETS)
    assert str(caught.value) == (
        f"{conn.target}: GET /apis/example.com/v1/namespaces/ml/widgets was not found (404); "
        "is this a Kubernetes API server?"
    )


# -- retries and deadlines, per verb --------------------------------------------------------------


def test_writes_are_retried_as_reads_are(api: KubeAPI, tmp_path: Path) -> None:
    api.add_faults(resource="jobs", verb="patch", fail_first=2)
    api.add_faults(resource="jobs", verb="delete", drop_first=1, throttle_first=1, retry_after=0)
    delays: list[float] = []
    with connected(api, tmp_path, sleep=delays.append, backoff=0.25) as conn:
        assert apply(conn, JOBS, JOB).outcome == "created"
        assert delays == [0.25, 0.5]
        assert not delete(conn, JOBS, "mnist-ps-0").already_gone
    assert delays == [0.25, 0.5, 0.25, 0.0]  # then a reset, then 429 with Retry-After: 0
    assert len(api.requests_for("jobs", "patch")) == 3
    assert len(api.requests_for("jobs", "delete")) == 3


@pytest.mark.parametrize(
    ("verb", "call", "outcome"),
    [
        ("list", lambda conn: list_objects(conn, PODS), "no complete pod list"),
        ("list", lambda conn: list_objects(conn, JOBS, namespace=""), "no complete job list"),
        ("get", lambda conn: get(conn, JOBS, "x"), "no answer to get job 'x' in namespace ml"),
        (
            "patch",
            lambda conn: apply(conn, JOBS, JOB, live=None),
            "no answer to apply job 'mnist-ps-0' in namespace ml",
        ),
        (
            "delete",
            lambda conn: delete(conn, JOBS, "x"),
            "no answer to delete job 'x' in namespace ml",
        ),
    ],
)
def test_the_deadline_message_names_what_did_not_come(
    api: KubeAPI, tmp_path: Path, verb: str, call: Any, outcome: str
) -> None:
    api.add_faults(verb=verb, fail_first=100)
    settings = {"deadline": 0.5, "backoff": 0.2, "attempts": 10}
    with connected(api, tmp_path, **settings) as conn, pytest.raises(ClusterError) as caught:
        call(conn)
    assert str(caught.value) == (
        f"{conn.target}: {outcome} within 0.5 s (last: 500 InternalError: "
        "Internal error occurred: etcdserver: request timed out)"
    )


def test_a_callers_deadline_covers_every_request_of_a_call(api: KubeAPI, tmp_path: Path) -> None:
    api.add_faults(resource="pods", verb="list", fail_first=100)
    expected = r"no complete pod list within 0.3 s \(last: 500"
    with (
        connected(api, tmp_path, backoff=0.2, attempts=10) as conn,
        pytest.raises(ClusterError, match=expected),
    ):
        list_objects(conn, PODS, deadline=Deadline.after(0.3))


# -- what apply and delete refuse or forgive ------------------------------------------------------


def test_apply_needs_a_named_object_of_its_resource(api: KubeAPI, tmp_path: Path) -> None:
    nameless: Mapping[str, Any] = {**JOB, "metadata": {}}
    with connected(api, tmp_path) as conn:
        with pytest.raises(InputError, match=r"a Job to apply needs a metadata\.name"):
            apply(conn, JOBS, nameless)
        with pytest.raises(InputError, match="apiVersion 'batch/v1', kind 'Job', not v1 Service"):
            apply(conn, SERVICES, JOB)
    assert api.requests == []


def test_apply_sends_server_side_apply_with_its_field_manager(api: KubeAPI, tmp_path: Path) -> None:
    with connected(api, tmp_path) as conn:
        apply(conn, JOBS, JOB, force=True, dry_run=True, live=None)
        apply(conn, JOBS, JOB, field_manager="someone")
    first, second = api.requests_for("jobs", "patch")
    assert first.query == {"fieldManager": "simpletfjob", "force": "true", "dryRun": "All"}
    assert second.query == {"fieldManager": "someone"}
    assert api.requests_for("jobs", "get") == [api.requests_for("jobs", "get")[0]]  # live read once
    stored = api.get("jobs", "mnist-ps-0", "ml")
    assert [m["manager"] for m in stored["metadata"]["managedFields"]] == ["someone"]


def test_what_is_already_gone_is_not_an_error(api: KubeAPI, tmp_path: Path) -> None:
    api.load("jobs", [make_job("done", "ml")])
    with connected(api, tmp_path) as conn:
        orphaning = delete(conn, JOBS, "done", propagation="Orphan")
        assert not orphaning.already_gone
        assert orphaning.object is not None  # held by the orphan finalizer as it answers
        assert orphaning.object["metadata"]["finalizers"] == ["orphan"]
        assert delete(conn, JOBS, "done").already_gone
        assert delete(conn, JOBS, "never", namespace="no-such-namespace").already_gone
        deleted_pod, gone, _ = delete(conn, PODS, "p1")
    assert not gone and deleted_pod is not None and deleted_pod["metadata"]["name"] == "p1"
    (request, *_) = api.requests_for("jobs", "delete")
    assert request.path == "/apis/batch/v1/namespaces/ml/jobs/done"


def test_the_proxy_environment_is_read_once_when_the_connection_is_made(
    api: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client's token hook sets the host again before every request, and the client read
    the whole environment for a proxy each time (1 ms a request). The proxy is the one the
    environment gave as the connection was made: what its pool manager was built with."""
    for scheme in ("http", "https", "all"):
        monkeypatch.delenv(f"{scheme}_proxy", raising=False)
        monkeypatch.delenv(f"{scheme.upper()}_PROXY", raising=False)
    conn = connected(api, tmp_path)
    monkeypatch.setenv("all_proxy", "http://127.0.0.1:9")  # read again, it would be taken
    for _ in range(3):
        assert get(conn, PODS, "p1") is not None
    assert conn.client.configuration.proxy is None


def test_a_quiet_watch_waits_past_the_calls_deadline_for_its_window(
    api: KubeAPI, tmp_path: Path
) -> None:
    """A watch with nothing to say for longer than one call's deadline (60 s by default; here
    0.5 s) is still open, not dropped: its stream's read timeout is its window's, and the
    server ends it. Cut to the deadline, a quiet watch broke once a deadline, and after
    `attempts` such breaks (about five minutes by default) said the API server lost."""
    from simpletfjob.kube.watch import watch

    with connected(api, tmp_path, deadline=0.5, read_timeout=0.5, attempts=1) as conn:
        version = list_objects(conn, JOBS).resource_version
        began = time.monotonic()
        events = list(watch(conn, JOBS, deadline=Deadline.after(2.0), resource_version=version))
    assert events == [] and time.monotonic() - began >= 1.9
    watches = [r for r in api.requests if r.verb == "watch"]
    assert len(watches) == 1, watches  # opened once, ended by the server at timeoutSeconds


def test_a_watch_whose_answer_does_not_come_fails_within_the_calls_deadline(
    api: KubeAPI, tmp_path: Path
) -> None:
    """Its window is for a quiet stream, once the answer has come: a server that takes the
    watch and sends no answer is given one call's deadline, as any request is."""
    from simpletfjob.kube.watch import watch

    with connected(api, tmp_path, deadline=0.5, read_timeout=0.5, attempts=1) as conn:
        version = list_objects(conn, JOBS).resource_version
        api.faults.delay, api.faults.verb = 3.0, "watch"
        began = time.monotonic()
        with pytest.raises(ClusterError):
            list(watch(conn, JOBS, deadline=Deadline.after(5.0), resource_version=version))
    assert time.monotonic() - began < 2.5
