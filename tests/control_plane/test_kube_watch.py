"""kube/'s watch: it lists first, follows changes, resumes where it was and re-lists on 410.

Following changes is checked on both API servers; the faults (dropped and reset
watches, 410 either way, 5xx, a silent connection, a server that goes away, a proxy that
closes each connection) on the loopback server, which can be made to fail on cue, and
several watches taken together. Every watch goes through a real kubeconfig and the real
`kubernetes` client.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.errors import ClusterError
from simpletfjob.kube import watch as kube_watch
from simpletfjob.kube.connection import Connection, Settings, connect
from simpletfjob.kube.lists import list_objects
from simpletfjob.kube.request import ApiError, Deadline
from simpletfjob.kube.resources import JOBS, PODS
from simpletfjob.kube.watch import Event, Watches, watch
from tests.support.cluster import ADMIN, ADMIN_TOKEN, Cluster, LoopbackCluster, wait_for
from tests.support.faultproxy import FaultProxy
from tests.support.kubeapi import KubeAPI, make_pod, serve, write_kubeconfig


def connected(cluster: Cluster, tmp_path: Path, namespace: str, user: str = ADMIN) -> Connection:
    kubeconfig = cluster.kubeconfig(tmp_path / f"kubeconfig-{user}", user, namespace)
    return connect(Settings(kubeconfig=str(kubeconfig), backoff=0.01, attempts=3, deadline=10.0))


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def name_of(event: Event) -> str:
    assert event.object is not None
    return str(event.object["metadata"]["name"])


def changes(events: Iterator[Event], count: int) -> list[tuple[str, str]]:
    """The next `count` changes (no bookmarks), as (type, name)."""
    seen = []
    for event in events:
        if event.type != "BOOKMARK":
            seen.append((event.type, name_of(event) if event.object else ""))
        if len(seen) == count:
            break
    return seen


# -- on both servers ------------------------------------------------------------------------------


def test_a_watch_lists_first_then_follows_every_change(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace()
    pods = f"/api/v1/namespaces/{ns}/pods"
    cluster.admin.post(pods, pod("p0"))
    cluster.admin.post(pods, pod("p1"))
    listed = threading.Event()

    def meanwhile() -> None:
        assert listed.wait(30)
        cluster.admin.post(pods, pod("p2"))
        cluster.admin.merge_patch(f"{pods}/p0", {"metadata": {"labels": {"seen": "yes"}}})
        cluster.admin.delete(f"{pods}/p1", {"kind": "DeleteOptions", "gracePeriodSeconds": 0})

    changer = threading.Thread(target=meanwhile)
    changer.start()
    with connected(cluster, tmp_path, ns) as conn:
        events = watch(conn, PODS, deadline=Deadline.after(30))
        first = next(events)
        assert first.type == "RELIST" and first.object is None
        assert sorted(p["metadata"]["name"] for p in first.objects) == ["p0", "p1"]
        listed.set()
        seen: list[Event] = []
        for event in events:
            seen.append(event)
            if event.type == "DELETED":
                break
        events.close()
    changer.join()
    by_name = [(e.type, name_of(e)) for e in seen if e.type != "BOOKMARK"]
    assert by_name[0] == ("ADDED", "p2")
    assert ("MODIFIED", "p0") in by_name
    assert by_name[-1] == ("DELETED", "p1")
    modified = next(e for e in seen if e.type == "MODIFIED" and name_of(e) == "p0")
    assert modified.object is not None and modified.object["metadata"]["labels"] == {"seen": "yes"}


def test_a_quiet_watch_ends_at_its_deadline(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.create_namespace()
    with connected(cluster, tmp_path, ns) as conn:
        started = time.monotonic()
        events = list(watch(conn, PODS, deadline=Deadline.after(1.5)))
        took = time.monotonic() - started
    assert [e.type for e in events if e.type != "BOOKMARK"] == ["RELIST"]
    assert 1.4 <= took < 2.5


# -- faults, on the loopback server ---------------------------------------------------------------


@pytest.fixture
def busy(loopback: LoopbackCluster) -> tuple[LoopbackCluster, KubeAPI, str, str]:
    """Five pods created after a list: (cluster, server, namespace, the list's resourceVersion)."""
    assert loopback.api is not None
    ns = loopback.create_namespace()
    before = loopback.admin.get(f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"]
    for name in "abcde":
        loopback.admin.post(f"/api/v1/namespaces/{ns}/pods", pod(name))
    loopback.api.requests.clear()  # each test counts the requests the watch makes
    return loopback, loopback.api, ns, before


@pytest.mark.parametrize("reset", [False, True], ids=["ended", "reset"])
def test_a_dropped_watch_resumes_from_the_last_version_it_saw(
    busy: tuple[LoopbackCluster, KubeAPI, str, str], tmp_path: Path, reset: bool
) -> None:
    cluster, api, ns, before = busy
    api.add_faults(
        resource="pods", verb="watch", watch_drop_after=2, watch_drops=2, watch_reset=reset
    )
    with connected(cluster, tmp_path, ns) as conn:
        events = watch(conn, PODS, resource_version=before, deadline=Deadline.after(20))
        seen: list[Event] = []
        for event in events:
            if event.type != "BOOKMARK":
                seen.append(event)
            if len(seen) == 5:
                break
        events.close()
    assert [(e.type, name_of(e)) for e in seen] == [("ADDED", n) for n in "abcde"]
    versions = [e.object["metadata"]["resourceVersion"] for e in seen if e.object]
    asked = [r.query["resourceVersion"] for r in api.requests_for("pods", "watch")]
    assert asked == [before, versions[1], versions[3]]
    assert api.requests_for("pods", "list") == []  # resumed, not listed again


@pytest.mark.parametrize("how", ["http 410", "error event", "compacted"])
def test_410_gone_relists_and_goes_on(
    busy: tuple[LoopbackCluster, KubeAPI, str, str], tmp_path: Path, how: str
) -> None:
    cluster, api, ns, before = busy
    if how == "http 410":
        api.add_faults(resource="pods", verb="watch", watch_gone_first=1)
    elif how == "error event":
        api.add_faults(resource="pods", verb="watch", watch_expire_first=1)
    else:
        api.compact()  # the history before now is gone: a watch from `before` is too old
    pods = f"/api/v1/namespaces/{ns}/pods"
    listed = threading.Event()

    def later() -> None:
        assert listed.wait(30)
        cluster.admin.post(pods, pod("after"))

    threading.Thread(target=later).start()
    with connected(cluster, tmp_path, ns) as conn:
        events = watch(conn, PODS, resource_version=before, deadline=Deadline.after(20))
        relist = next(events)
        listed.set()
        assert changes(events, 1) == [("ADDED", "after")]
        events.close()
    assert relist.type == "RELIST"
    assert sorted(p["metadata"]["name"] for p in relist.objects) == list("abcde")
    assert len(api.requests_for("pods", "list")) == 1
    watches = api.requests_for("pods", "watch")
    assert len(watches) == 2 and watches[0].query["resourceVersion"] == before
    assert int(watches[1].query["resourceVersion"]) > int(before)


def test_bookmarks_move_the_resume_point(
    busy: tuple[LoopbackCluster, KubeAPI, str, str], tmp_path: Path
) -> None:
    cluster, api, ns, before = busy
    api.bookmark_interval = 0.2
    with connected(cluster, tmp_path, ns) as conn:
        events = watch(conn, PODS, resource_version=before, deadline=Deadline.after(20))
        kinds = []
        for event in events:
            kinds.append(event.type)
            if event.type == "BOOKMARK":
                assert event.object is not None
                assert int(event.object["metadata"]["resourceVersion"]) >= int(before) + 5
                break
        events.close()
    assert kinds == ["ADDED"] * 5 + ["BOOKMARK"]
    assert api.requests_for("pods", "watch")[0].query["allowWatchBookmarks"] == "true"


def test_5xx_when_opening_a_watch_is_retried(
    busy: tuple[LoopbackCluster, KubeAPI, str, str], tmp_path: Path
) -> None:
    cluster, api, ns, before = busy
    api.add_faults(resource="pods", verb="watch", fail_first=2)
    with connected(cluster, tmp_path, ns) as conn:
        events = watch(conn, PODS, resource_version=before, deadline=Deadline.after(20))
        assert changes(events, 5) == [("ADDED", n) for n in "abcde"]
        events.close()
    assert len(api.requests_for("pods", "watch")) == 3


def test_a_server_that_keeps_failing_ends_the_watch_in_one_line(
    busy: tuple[LoopbackCluster, KubeAPI, str, str], tmp_path: Path
) -> None:
    cluster, api, ns, before = busy
    api.add_faults(resource="pods", verb="watch", fail_first=100)
    with connected(cluster, tmp_path, ns) as conn, pytest.raises(ClusterError) as caught:
        list(watch(conn, PODS, resource_version=before, deadline=Deadline.after(20)))
    assert str(caught.value) == (
        f"{conn.target}: the server kept failing after 3 attempts (last: 500 InternalError: "
        "Internal error occurred: etcdserver: request timed out)"
    )


def test_a_failing_server_at_the_deadline_ends_the_watch_as_a_quiet_one_would(
    busy: tuple[LoopbackCluster, KubeAPI, str, str], tmp_path: Path
) -> None:
    cluster, api, ns, before = busy
    api.add_faults(resource="pods", verb="watch", fail_first=100)
    kubeconfig = cluster.kubeconfig(tmp_path / "kubeconfig", ADMIN, ns)
    settings = Settings(kubeconfig=str(kubeconfig), backoff=0.1, attempts=1000)
    with connect(settings) as conn:
        started = time.monotonic()
        events = list(watch(conn, PODS, resource_version=before, deadline=Deadline.after(1.0)))
        took = time.monotonic() - started
    assert events == []
    assert 0.95 <= took < 1.5
    assert len(api.requests_for("pods", "watch")) > 2


@pytest.fixture
def closing(loopback: LoopbackCluster) -> Iterator[tuple[LoopbackCluster, FaultProxy]]:
    """The loopback server behind a proxy of the tests' own (faultproxy.py)."""
    assert loopback.api is not None
    with FaultProxy(loopback.api.url) as proxy:
        yield loopback, proxy


def through(proxy: FaultProxy, tmp_path: Path, ns: str, **settings: Any) -> Connection:
    kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig-proxy", token=ADMIN_TOKEN, namespace=ns)
    return connect(Settings(kubeconfig=str(kubeconfig), **{"backoff": 0.01, **settings}))


def version_of(cluster: Cluster, ns: str) -> str:
    return str(cluster.admin.get(f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"])


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_behind_a_proxy_that_closes_each_connection_each_event_comes_as_it_comes(
    closing: tuple[LoopbackCluster, FaultProxy], tmp_path: Path, framing: str
) -> None:
    """The proxy answers with `Connection: close`: the client holds no socket of its own for
    the watch, whose events must still be handed over as they come, not at its end."""
    cluster, proxy = closing
    proxy.close_each(framing)
    ns = cluster.create_namespace()
    before = version_of(cluster, ns)
    with through(proxy, tmp_path, ns) as conn:
        events = watch(conn, PODS, resource_version=before, deadline=Deadline.after(60))
        for name in ("a", "b"):
            if name == "a":
                proxy.wait_for("watch", "pods")
            started = time.monotonic()
            cluster.admin.post(f"/api/v1/namespaces/{ns}/pods", pod(name))
            assert changes(events, 1) == [("ADDED", name)]
            assert time.monotonic() - started < 5
        events.close()
    assert [r.done for r in proxy.seen("watch")] == ["streamed"]  # one watch, still open


def test_several_watches_are_each_heard_whichever_speaks(
    closing: tuple[LoopbackCluster, FaultProxy], tmp_path: Path
) -> None:
    """Two watches taken together, behind a proxy that closes each connection: each event is
    taken as it comes, from whichever watch it came."""
    cluster, proxy = closing
    proxy.close_each("chunked")
    quiet, busy = cluster.create_namespace(), cluster.create_namespace()
    with through(proxy, tmp_path, quiet) as conn, Watches(conn, Deadline.after(60)) as both:
        for ns in (quiet, busy):
            both.add(ns, PODS, namespace=ns, resource_version=version_of(cluster, ns))
        wait_for(lambda: len(proxy.seen("watch")) == 2, 20, "both watches")
        for ns, name in ((busy, "b1"), (quiet, "q1"), (busy, "b2")):
            cluster.admin.post(f"/api/v1/namespaces/{ns}/pods", pod(name))
            got = [(w, e) for w, e in both.take(Deadline.after(10)) if e.type != "BOOKMARK"]
            assert [(w, e.type, name_of(e)) for w, e in got] == [(ns, "ADDED", name)]


def test_a_watch_that_pauses_before_its_next_try_leaves_the_others_heard(
    busy: tuple[LoopbackCluster, KubeAPI, str, str], tmp_path: Path
) -> None:
    cluster, api, ns, before = busy
    api.add_faults(resource="jobs", verb="watch", fail_first=2)
    kubeconfig = cluster.kubeconfig(tmp_path / "kubeconfig", ADMIN, ns)
    settings = Settings(kubeconfig=str(kubeconfig), backoff=2.0, attempts=5)
    with connect(settings) as conn, Watches(conn, Deadline.after(60)) as both:
        both.add("jobs", JOBS, resource_version=before)
        both.add("pods", PODS, resource_version=before)
        # The Jobs' watch has failed once and is pausing (however slowly a loaded machine
        # started its thread) before the clock starts.
        wait_for(lambda: api.requests_for("jobs", "watch"), 20, "the Jobs' first watch")
        started = time.monotonic()
        got = [(w, e.type) for w, e in both.take(Deadline.after(10)) if e.type != "BOOKMARK"]
        assert got and all(found == ("pods", "ADDED") for found in got)
        assert time.monotonic() - started < 1.5  # not after the Jobs' watch's pause (2 s)
    assert len(api.requests_for("jobs", "watch")) == 1


def test_a_silent_connection_counts_as_dropped_and_the_watch_resumes(
    closing: tuple[LoopbackCluster, FaultProxy], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers a watch, then says nothing past its window: the watch is opened
    again from where it was, once its read has waited the window and the slack."""
    cluster, proxy = closing
    monkeypatch.setattr(kube_watch, "WINDOW", 1.0)
    monkeypatch.setattr(kube_watch, "SLACK", 1.0)
    ns = cluster.create_namespace()
    before = version_of(cluster, ns)
    proxy.silence(verb="watch", count=1)
    with through(proxy, tmp_path, ns) as conn:
        events = watch(conn, PODS, resource_version=before, deadline=Deadline.after(30))
        proxy.wait_for("watch", "pods")
        started = time.monotonic()
        cluster.admin.post(f"/api/v1/namespaces/{ns}/pods", pod("after"))
        assert changes(events, 1) == [("ADDED", "after")]
        assert 1.5 < time.monotonic() - started < 10  # once the silent read gave up
        events.close()
    watches = proxy.seen("watch")
    assert [w.done for w in watches] == ["silenced", "streamed"]
    assert [w.query["resourceVersion"] for w in watches] == [before, before]


def test_a_refused_watch_names_the_verb(loopback: LoopbackCluster, tmp_path: Path) -> None:
    ns = loopback.create_namespace()
    loopback.grant("alice", ["list"], ["pods"], namespace=ns)
    with connected(loopback, tmp_path, ns, user="alice") as conn, pytest.raises(ApiError) as caught:
        list(watch(conn, PODS, deadline=Deadline.after(20)))
    assert str(caught.value) == (
        f"{conn.target}: user 'alice' cannot watch pods in namespace {ns} (403 Forbidden); it "
        "needs a Role with verb 'watch' on 'pods'"
    )


def test_a_server_that_goes_away_is_tried_again_then_given_up(
    kube_env: Path, tmp_path: Path
) -> None:
    api = KubeAPI()
    token = api.add_admin()
    api.load("pods", [make_pod("p", "ml")])
    with serve(api):
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, token=token, namespace="ml")
        conn = connect(Settings(kubeconfig=str(kubeconfig), backoff=0.01, attempts=3))
        events = watch(conn, PODS, deadline=Deadline.after(20))
        assert next(events).type == "RELIST"
        threading.Timer(0.2, lambda: api.create("pods", make_pod("q", "ml"))).start()
        assert changes(events, 1) == [("ADDED", "q")]  # the watch is open
    # The server is gone: its watches ended and its port is closed. A real server would have
    # closed its idle connections too; the loopback server's outlive it, so drop them here.
    conn.client.rest_client.pool_manager.clear()
    with conn, pytest.raises(ClusterError) as caught:
        for _ in events:
            pass
    # The watch's thread goes on as the server stops: its last try may have met the server's
    # end (the stream closed at once) or its closed port, whichever came last.
    failing = (
        f"{conn.target}: the server kept failing after 3 attempts to watch pods in namespace ml"
    )
    assert str(caught.value).startswith(
        (
            f"{failing} (last: unreachable: connection refused",
            f"{failing} (last: the watch ended at once, with no event)",
        )
    ), caught.value


def test_a_watch_in_all_namespaces(loopback: LoopbackCluster, tmp_path: Path) -> None:
    one, two = loopback.create_namespace(), loopback.create_namespace()
    loopback.admin.post(f"/api/v1/namespaces/{one}/pods", pod("x", app="tf"))
    with connected(loopback, tmp_path, one) as conn:
        version = list_objects(conn, PODS, namespace="").resource_version
        loopback.admin.post(f"/api/v1/namespaces/{two}/pods", pod("y", app="tf"))
        loopback.admin.post(f"/api/v1/namespaces/{two}/pods", pod("z", app="web"))
        events = watch(
            conn,
            PODS,
            namespace="",
            label_selector="app=tf",
            resource_version=version,
            deadline=Deadline.after(20),
        )
        assert changes(events, 1) == [("ADDED", "y")]
        events.close()
    assert loopback.api is not None
    (request,) = loopback.api.requests_for("pods", "watch")
    assert request.path == "/api/v1/pods" and request.query["labelSelector"] == "app=tf"


def test_closing_a_connection_cuts_its_open_watches(
    loopback: LoopbackCluster, tmp_path: Path
) -> None:
    """A watch's thread, blocked on its socket, wakes when its connection closes, so that none
    stays blocked in a process that goes on (the Python API)."""
    ns = loopback.create_namespace()
    conn = connected(loopback, tmp_path, ns)
    events = watch(conn, PODS, deadline=Deadline.after(60))
    assert next(events).type == "RELIST"  # listed; then the watch opens, its thread blocks on it
    wait_for(lambda: list(conn.streams), 20, "the watch to open")
    conn.close()
    started = time.monotonic()
    with pytest.raises(ClusterError, match="the connection was closed"):  # its next try gives up
        next(events)
    assert time.monotonic() - started < 10
    wait_for(lambda: not watching(), 20, "the watch's thread to end")


def test_leaving_a_watch_stops_its_thread(loopback: LoopbackCluster, tmp_path: Path) -> None:
    ns = loopback.create_namespace()
    with connected(loopback, tmp_path, ns) as conn:
        with watch(conn, PODS, deadline=Deadline.after(60)) as events:
            assert next(events).type == "RELIST"
            wait_for(lambda: list(conn.streams), 20, "the watch to open")
            assert watching()
        wait_for(lambda: not watching(), 20, "the watch's thread to end")


def watching() -> bool:
    """Whether a watch's thread (kube/watch.py's) is alive in this process."""
    return any(t.name.startswith("simpletfjob-watch-") for t in threading.enumerate())
