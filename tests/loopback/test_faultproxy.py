"""The fault proxy (tests/support/faultproxy.py) does what it says, and what `wait` makes of a
connection cut in the middle of an answer.

The proxy's own checks run against the loopback server; tests/control_plane/test_run_signals.py
puts it in front of the real one.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.conftest import EXAMPLES, open_cluster
from tests.support.client import Client
from tests.support.faultproxy import FaultProxy, verb_of
from tests.support.kubeapi import KubeAPI, make_node, serve
from tests.support.scenes import NS, finish_job, load_run, run_pod

PODS = f"/api/v1/namespaces/{NS}/pods"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"


@pytest.fixture
def behind(kube_env: Path) -> Iterator[tuple[KubeAPI, FaultProxy]]:
    with serve(open_cluster()) as api, FaultProxy(api.url) as proxy:
        load_run(api)
        yield api, proxy


def raw_get(url: str, path: str) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("method", "path", "query", "content_type", "expected"),
    [
        ("GET", PODS, {}, "", ("list", "pods")),
        ("GET", PODS, {"watch": "true"}, "", ("watch", "pods")),
        ("GET", f"{PODS}/p", {}, "", ("get", "pods")),
        ("GET", f"{PODS}/p/log", {}, "", ("get", "pods/log")),
        ("PATCH", f"{JOBS}/j", {}, "application/apply-patch+yaml", ("apply", "jobs")),
        ("PATCH", f"{JOBS}/j", {}, "application/merge-patch+json", ("patch", "jobs")),
        ("DELETE", f"{JOBS}/j", {}, "", ("delete", "jobs")),
        ("GET", "/api/v1/nodes", {}, "", ("list", "nodes")),
        ("GET", "/version", {}, "", ("", "")),
    ],
)
def test_requests_are_named_by_verb_and_resource_as_the_authorizer_names_them(
    method: str, path: str, query: dict[str, str], content_type: str, expected: tuple[str, str]
) -> None:
    assert verb_of(method, path, query, content_type) == expected


def test_answers_pass_through_unchanged(behind: tuple[KubeAPI, FaultProxy]) -> None:
    api, proxy = behind
    direct = Client(api.url).get(PODS)
    through = Client(proxy.url).get(PODS)
    assert through["items"] == direct["items"]
    assert [(r.verb, r.resource, r.done) for r in proxy.requests] == [("list", "pods", "passed")]


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
        (401, "Unauthorized"),
        (403, "Forbidden"),
    ],
)
def test_a_status_is_answered_as_kube_apiserver_words_it(
    behind: tuple[KubeAPI, FaultProxy], status: int, reason: str
) -> None:
    _, proxy = behind
    if status in (401, 403):
        proxy.refuse(status, count=1)
    else:
        proxy.fail(status, count=1)
    code, _, body = raw_get(proxy.url, PODS)
    answer = json.loads(body)
    assert (code, answer["kind"], answer["code"], answer["reason"]) == (
        status,
        "Status",
        status,
        reason,
    )
    assert raw_get(proxy.url, PODS)[0] == 200  # count=1: the next one passes


def test_throttling_says_when_to_come_back(behind: tuple[KubeAPI, FaultProxy]) -> None:
    _, proxy = behind
    proxy.throttle(7, verb="list")
    code, headers, body = raw_get(proxy.url, PODS)
    assert (code, headers["Retry-After"], json.loads(body)["reason"]) == (
        429,
        "7",
        "TooManyRequests",
    )
    assert raw_get(proxy.url, f"{PODS}/mnist-ps-0-x")[0] == 200  # a get is no list


def test_a_watch_answered_gone(behind: tuple[KubeAPI, FaultProxy]) -> None:
    _, proxy = behind
    proxy.gone(resource="pods")
    code, _, body = raw_get(proxy.url, f"{PODS}?watch=true")
    assert (code, json.loads(body)["reason"]) == (410, "Expired")
    assert raw_get(proxy.url, PODS)[0] == 200  # a list is no watch


def test_a_cut_answer_stops_after_the_bytes_given(behind: tuple[KubeAPI, FaultProxy]) -> None:
    _, proxy = behind
    proxy.cut(after=40, verb="list")
    host, port = proxy.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", PODS)
    response = connection.getresponse()
    with pytest.raises(http.client.IncompleteRead) as cut:
        response.read()
    assert len(cut.value.partial) == 40 and cut.value.expected > 0


def test_a_delayed_write_lands_even_when_the_client_has_gone(
    behind: tuple[KubeAPI, FaultProxy],
) -> None:
    """As behind a slow admission webhook: the client stops waiting, the object is made anyway."""
    api, proxy = behind
    proxy.delay(1.0, verb="create")
    client = Client(proxy.url, timeout=0.2)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late"}, "spec": {}}
    pod["spec"] = {"containers": [{"name": "c", "image": "i"}]}
    with pytest.raises(OSError):  # timed out
        client.post(PODS, pod)
    deadline = time.monotonic() + 30
    while "late" not in {p["metadata"]["name"] for p in api.objects("pods", NS)}:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_open_watches_are_cut_and_the_next_ones_meet_the_fault(
    behind: tuple[KubeAPI, FaultProxy],
) -> None:
    _, proxy = behind
    events: list[Any] = []
    failure: list[BaseException] = []

    def watch() -> None:
        try:
            with Client(proxy.url).watch(PODS, resourceVersion="0") as stream:
                events.extend(stream)
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    proxy.wait_for("watch", "pods")
    proxy.fail(503)
    assert proxy.cut_streams() == 1
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(failure[0], (http.client.HTTPException, OSError, ValueError)), failure
    assert raw_get(proxy.url, f"{PODS}?watch=true")[0] == 503


def test_down_refuses_connections_and_up_serves_on_the_same_port(
    behind: tuple[KubeAPI, FaultProxy],
) -> None:
    _, proxy = behind
    url = proxy.url
    proxy.down()
    with pytest.raises(ConnectionRefusedError):
        raw_get(url, PODS)
    proxy.up()
    assert proxy.url == url
    assert raw_get(url, PODS)[0] == 200


def test_https_to_the_client(kube_env: Path, tmp_path: Path) -> None:
    ca = trustme.CA()
    with serve(open_cluster()) as api, FaultProxy(api.url, tls=ca) as proxy:
        load_run(api)
        assert proxy.url.startswith("https://")
        ca_file = tmp_path / "ca.crt"
        ca.cert_pem.write_to_path(str(ca_file))
        assert len(Client(proxy.url, ca_file=ca_file).get(PODS)["items"]) == 3


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_close_each_answers_with_connection_close_and_closes_after_each_answer(
    behind: tuple[KubeAPI, FaultProxy], framing: str
) -> None:
    _, proxy = behind
    proxy.close_each(framing)
    host, port = proxy.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", PODS)
    response = connection.getresponse()
    assert response.getheader("Connection") == "close"
    assert len(json.loads(response.read())["items"]) == 3
    assert connection.sock is None  # http.client let the connection go, as urllib3's does
    connection.close()
    code, headers, _ = raw_get(proxy.url, PODS)  # a connection of its own each time
    assert (code, headers["Connection"]) == (200, "close")
    assert proxy.connections == 2


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_close_each_relays_a_watch_event_by_event_as_it_comes(
    behind: tuple[KubeAPI, FaultProxy], framing: str
) -> None:
    api, proxy = behind
    proxy.close_each(framing)
    host, port = proxy.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    version = Client(api.url).get(JOBS)["metadata"]["resourceVersion"]
    connection.request("GET", f"{JOBS}?watch=true&resourceVersion={version}&timeoutSeconds=20")
    response = connection.getresponse()
    assert (response.getheader("Connection"), response.getheader("Transfer-Encoding")) == (
        "close",
        "chunked" if framing == "chunked" else None,
    )
    assert response.getheader("Content-Length") is None
    proxy.wait_for("watch", "jobs")
    started = time.monotonic()
    finish_job(api, "mnist-worker-0")
    event = json.loads(response.readline())
    assert time.monotonic() - started < 5  # as it came, not at the watch's end (20 s)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("MODIFIED", "mnist-worker-0")
    connection.close()


# -- what a command makes of it --------------------------------------------------------------


@pytest.mark.parametrize("when", ["before the watches", "once watching"])
def test_wait_says_an_answer_cut_mid_body_in_its_own_words(
    cli: Any, behind: tuple[KubeAPI, FaultProxy], tmp_path: Path, when: str
) -> None:
    """Not urllib3's `('Connection broken: IncompleteRead(40 bytes read, ...)', ...)`."""
    api, proxy = behind
    kubeconfig = str(proxy.kubeconfig(tmp_path / "kc", namespace=NS))
    result: list[Any] = []
    if when == "before the watches":
        proxy.cut(after=40, verb="list")
    thread = threading.Thread(
        target=lambda: result.append(
            cli("wait", "mnist", "--timeout", "2m", "--kubeconfig", kubeconfig)
        ),
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 60
    # More cuts in a row than a call makes attempts (5), for each of the two resources.
    while len([r for r in proxy.requests if r.done == "cut"]) < 12:
        if when == "once watching":  # each watch, once open, is cut in the middle of an event
            proxy.wait_for("watch")
            proxy.cut_streams()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proxy.clear()
    finish_job(api, "mnist-worker-0")
    thread.join(120)
    (done,) = result
    assert done.code == 0, done.err
    lost = [line for line in done.err.splitlines() if "lost the API server" in line]
    assert len(lost) == 1, done.err
    cause = lost[0].split("): ", 1)[1].split("; retrying")[0]
    expected = (
        r"connection dropped: the answer broke off after 40 of \d+ bytes"
        if when == "before the watches"
        # Where in the stream the cut fell: in a chunk, or between chunks in an event.
        else r"connection dropped: the (answer broke off after \d+ of \d+ bytes"
        r"|answer broke off in the middle of a chunk|stream broke off in the middle of an event)"
    )
    assert re.fullmatch(expected, cause), lost[0]
    assert done.err.splitlines()[-1] == "run mnist succeeded: worker-0 Succeeded"


def test_a_watch_answered_gone_again_and_again_is_tried_again_after_a_delay_not_at_once(
    cli: Any, behind: tuple[KubeAPI, FaultProxy], tmp_path: Path
) -> None:
    """Each 410 listed the run again and watched again at once: 1700 requests in 10 s."""
    _, proxy = behind
    kubeconfig = str(proxy.kubeconfig(tmp_path / "kc", namespace=NS))
    proxy.gone()
    result = cli("wait", "mnist", "--timeout", "4s", "--kubeconfig", kubeconfig)
    assert result.code == 3, result.err
    watches = proxy.seen("watch")
    assert 2 <= len(watches) <= 20, len(watches)
    lost = [line for line in result.err.splitlines() if "lost the API server" in line]
    assert all("410 Gone right after a fresh list" in line for line in lost), result.err


def start_watching(cli: Any, kubeconfig: str, *args: str) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(
        target=lambda: result.append(cli(*args, "--kubeconfig", kubeconfig)), daemon=True
    )
    thread.start()
    return thread, result


def test_status_watch_behind_a_slow_server_prints_each_change_and_the_end(
    cli: Any, behind: tuple[KubeAPI, FaultProxy], tmp_path: Path
) -> None:
    api, proxy = behind
    api.set_nodes([make_node("n1")])
    kubeconfig = str(proxy.kubeconfig(tmp_path / "kc", namespace=NS))
    proxy.delay(0.5)  # every request
    thread, result = start_watching(cli, kubeconfig, "status", "mnist", "-w")
    proxy.wait_for("watch", "jobs")
    proxy.wait_for("watch", "pods")
    run_pod(api, "mnist-worker-0", "n1")
    run_pod(api, "mnist-ps-0", "n1")
    time.sleep(1.5)
    api.set_pod_status("mnist-worker-0-x", NS, "Succeeded", exit_code=0)
    finish_job(api, "mnist-worker-0")
    thread.join(60)
    (done,) = result
    assert done.code == 0, done.err
    head, header, *rows = done.out.splitlines()
    assert head.startswith("run mnist in ml: Pending, 3 tasks") and header.split()[0] == "TASK"
    table, changes = rows[:3], rows[3:]
    assert [r.split()[0] for r in table] == ["ps-0", "worker-0", "worker-1"]
    seen = [(r.split()[0], r.split()[2]) for r in changes]
    assert ("worker-0", "Running") in seen and ("ps-0", "Running") in seen, done.out
    assert seen[-1] == ("worker-0", "Succeeded"), done.out  # the end of the run is a row too
    assert ("worker-1", "Pending") not in seen  # unchanged rows are not printed again
    assert done.err.splitlines()[-1] == "run mnist succeeded: worker-0 Succeeded"


def test_status_watch_of_a_run_deleted_meanwhile_ends_in_one_line(
    cli: Any, behind: tuple[KubeAPI, FaultProxy], tmp_path: Path
) -> None:
    api, proxy = behind
    kubeconfig = str(proxy.kubeconfig(tmp_path / "kc", namespace=NS))
    thread, result = start_watching(cli, kubeconfig, "status", "mnist", "-w")
    proxy.wait_for("watch", "jobs")
    proxy.wait_for("watch", "pods")
    for job in ("mnist-ps-0", "mnist-worker-0", "mnist-worker-1"):
        api.delete("jobs", job, namespace=NS, propagation="Background")
    thread.join(60)
    (done,) = result
    assert done.code == 1, done.err
    errors = [line for line in done.err.splitlines() if line.startswith("simpletfjob: error:")]
    assert errors == [done.err.splitlines()[-1]], done.err
    assert re.fullmatch(
        r"simpletfjob: error: run 'mnist' failed: worker-0's Job is gone and its end was not "
        r"seen \(.*\)",
        errors[0],
    ), done.err


def test_a_list_left_behind_by_its_command_stops_when_the_command_ends(
    cli: Any, behind: tuple[KubeAPI, FaultProxy], tmp_path: Path
) -> None:
    """The pods' list (in its own thread) rode out the outage for ever once the Jobs' list had
    ended the command: in a library user's process it went on asking, every few seconds."""
    _, proxy = behind
    kubeconfig = str(proxy.kubeconfig(tmp_path / "kc", namespace=NS))
    proxy.fail(500, resource="pods")
    proxy.refuse(403, resource="jobs", count=None)
    result = cli("status", "mnist", "-w", "--kubeconfig", kubeconfig)
    assert result.code == 1 and "(403 Forbidden)" in result.err, result.err
    time.sleep(1.5)  # a try of the pods' list that had begun ends
    asked = len(proxy.seen("list", "pods"))
    time.sleep(6)  # longer than the longest wait between two tries (5 s)
    assert len(proxy.seen("list", "pods")) == asked


@pytest.mark.parametrize("command", ["wait", "run"])
def test_a_server_failing_past_the_timeout_before_the_attempts_are_over_is_a_timeout(
    cli: Any, behind: tuple[KubeAPI, FaultProxy], tmp_path: Path, command: str
) -> None:
    """A server that answers 500 from the start, and a --timeout shorter than a call's five
    attempts (0.5 + 1 + 2 + 4 s apart): the command ends as its --timeout says (exit 3: the
    run did not end, or start, within it), as it does when the attempts end first; not 'the server kept
    failing' (exit 1), which a slower machine used to get for the same fault."""
    _, proxy = behind
    kubeconfig = str(proxy.kubeconfig(tmp_path / "kc", namespace=NS))
    proxy.fail(500)
    args = {
        "wait": ["wait", "mnist"],
        "run": ["run", str(EXAMPLES / "mnist.yaml"), "--nodes", "h1,h2,h3", "--logs", "none"],
    }[command]
    result = cli(*args, "--timeout", "3s", "--kubeconfig", kubeconfig)
    assert result.code == 3, result.err
    lines = result.err.splitlines()
    assert [line for line in lines if line.startswith("simpletfjob: error:")] == [lines[-1]]
    ended = {"wait": "run 'mnist' did not end", "run": "the run did not start"}[command]
    assert lines[-1].startswith(f"simpletfjob: error: {ended} within 3s"), result.err
    assert "kept failing" not in result.err, result.err
