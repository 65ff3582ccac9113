"""An API server that goes away while a command waits on it: `wait` and `delete --wait` ride it out.

On a real control plane of their own (the session's is shared), the tests kill kube-apiserver by
its process id and start it again on the same port, certificate and etcd, while a `wait` or
`delete --wait` process follows a run. On the loopback server, runs of 429, 5xx and dropped
connections longer than one call's attempts. kube/outage.py says what a ride is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.errors import ClusterError
from simpletfjob.kube.connection import Connection, Settings, connect
from simpletfjob.kube.lists import list_objects
from simpletfjob.kube.outage import StillAway, riding_out
from simpletfjob.kube.request import ApiError, Deadline
from simpletfjob.kube.resources import JOBS, PODS
from simpletfjob.kube.watch import watch
from tests.conftest import console_script
from tests.support.cluster import LoopbackCluster, wait_for
from tests.support.control_plane import ControlPlane, find_assets, start
from tests.support.controlled import NODES, create_run, jobs, pod_of
from tests.support.kubeapi import KubeAPI, make_pod, serve, write_kubeconfig
from tests.support.kubeapi.serving import closed_port
from tests.support.scenes import (
    NS,
    finish_job,
    load_run,
    run_pod,
    when_watching,
)

LOST = re.compile(r"simpletfjob: lost the API server at (\S+) \(context '[^']*'\): (.+); (.+)")
BACK = re.compile(r"simpletfjob: the API server is back after (\d+)s")
SINCE = re.compile(r"has been unreachable since (\d\d:\d\d:\d\d) \((\d+)s\): connection refused")


def clock_around(when: float, slack: int = 1) -> set[str]:
    """The local times of day, to the second, within `slack` seconds of `when`."""
    return {time.strftime("%H:%M:%S", time.localtime(when + d)) for d in range(-slack, slack + 1)}


def outage_lines(err: str) -> tuple[list[re.Match[str]], list[re.Match[str]]]:
    """The 'lost' and 'back' lines of a command's stderr, parsed."""
    lines = err.splitlines()
    lost = [m for line in lines if (m := LOST.fullmatch(line))]
    back = [m for line in lines if (m := BACK.fullmatch(line))]
    assert len([line for line in lines if "lost the API server" in line]) == len(lost), err
    return lost, back


# -- a control plane of its own, whose API server the tests stop and start ----------------------


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """etcd, kube-apiserver and the controllers, for this module only: started here, in the
    main thread, which outlives every process it starts (PR_SET_PDEATHSIG)."""
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    directory = Path(tempfile.mkdtemp(prefix="simpletfjob-outage-"))
    plane = start(assets, directory)
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def outage(plane: ControlPlane) -> Iterator[ControlPlane]:
    """The plane, its API server running again after the test whatever happened in it, its
    controllers started again after an outage (so that the next test's Jobs get their pods at
    once, not after the controllers' back-off), and the nodes the test made deleted."""
    plane.delete_nodes()
    starts = plane.apiserver_starts
    yield plane
    if plane.processes["kube-apiserver"].poll() is not None:
        plane.start_apiserver()
    if plane.apiserver_starts != starts:
        plane.restart_controllers()
    plane.delete_nodes()


class Process:
    """The console script run as its own process, its stdout and stderr read as they come."""

    def __init__(self, *args: str, home: Path) -> None:
        env = {**os.environ, "HOME": str(home)}
        for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
            env.pop(name, None)
        self.proc = subprocess.Popen(
            [console_script(), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.lines: list[str] = []  # stderr's
        self.out: list[bytes] = []  # stdout's, as read
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_out, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.out.append(raw)

    def saw(self, text: str, timeout: float = 30) -> None:
        wait_for(lambda: any(text in line for line in self.lines), timeout, repr(text))

    def printed(self, text: str, timeout: float = 30) -> None:
        """Wait until a line of stdout holds `text`."""
        wait_for(lambda: any(text.encode() in line for line in self.out), timeout, repr(text))

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        """Exit status, stdout and stderr."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        for reader in self._readers:
            reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code, b"".join(self.out).decode(), "\n".join(self.lines)


def running_run(plane: ControlPlane, cli: Any, tmp_path: Path) -> tuple[str, Path]:
    """A ps/worker run of 3 tasks, every pod Running; its namespace and the admin's kubeconfig."""
    namespace = plane.create_namespace()
    kubeconfig = create_run(cli, plane, namespace, tmp_path, "-N", "3")
    selector = "simpletfjob/job=tfrun"
    # The Job controller makes them; after an earlier test's restart of the API server its
    # informers list everything again first, which on a loaded machine takes a while.
    wait_for(lambda: len(plane.pods(namespace, selector)) >= 3, 120, "3 pods")
    plane.run_pods(namespace, selector, NODES[0])
    return namespace, kubeconfig


def test_wait_rides_out_an_api_server_restart_then_decides_and_cleans_up(
    outage: ControlPlane, cli: Any, tmp_path: Path
) -> None:
    namespace, kubeconfig = running_run(outage, cli, tmp_path)
    waiting = Process(
        "wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "2m", home=tmp_path
    )
    waiting.saw("worker-0 Running on")
    time.sleep(0.5)  # both watches open
    outage.kill_apiserver()
    time.sleep(10)
    outage.start_apiserver()
    outage.set_pod_status(namespace, pod_of(outage, namespace, "tfrun-worker-0"), "Succeeded")
    code, out, err = waiting.finish()
    assert code == 0, err
    assert out == ""
    (lost,), (back,) = outage_lines(err)
    assert lost[1] == outage.url
    assert lost[2] == "connection refused"
    assert lost[3] == "retrying until the --timeout (2m)"
    assert 10 <= int(back[1]) <= 60
    lines = err.splitlines()
    assert lines.index(lost[0]) < lines.index(back[0])
    assert lines[-3:] == [
        "job.batch/tfrun-ps-0 deleted",
        "job.batch/tfrun-worker-1 deleted",
        "run tfrun succeeded: worker-0 Succeeded",
    ]
    assert set(jobs(outage, namespace)) == {"tfrun-worker-0"}


def test_status_watch_rides_out_an_api_server_restart_then_prints_the_end(
    outage: ControlPlane, cli: Any, tmp_path: Path
) -> None:
    namespace, kubeconfig = running_run(outage, cli, tmp_path)
    watching = Process("status", "tfrun", "-w", "--kubeconfig", str(kubeconfig), home=tmp_path)
    # The table printed (a command the server has never answered takes a lost server for a
    # wrong context, and ends at once: a fresh interpreter may take seconds to get this far
    # on a loaded machine), then both watches open.
    watching.printed("worker-1")
    time.sleep(0.5)
    outage.kill_apiserver()
    time.sleep(10)
    outage.start_apiserver()
    outage.set_pod_status(namespace, pod_of(outage, namespace, "tfrun-worker-0"), "Succeeded")
    code, out, err = watching.finish()
    assert code == 0, err
    (lost,), (back,) = outage_lines(err)
    assert (lost[2], lost[3]) == ("connection refused", "retrying until it is back (no --timeout)")
    assert 10 <= int(back[1]) <= 60
    assert err.splitlines()[-1] == "run tfrun succeeded: worker-0 Succeeded"
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [(row[0], row[2]) for row in rows[:3]] == [
        ("ps-0", "Running"),
        ("worker-0", "Running"),
        ("worker-1", "Running"),
    ]
    assert (rows[-1][0], rows[-1][2]) == ("worker-0", "Succeeded")  # the change, once it is back
    assert set(jobs(outage, namespace)) == {"tfrun-ps-0", "tfrun-worker-0", "tfrun-worker-1"}


def test_wait_whose_timeout_passes_in_the_outage_exits_3_saying_since_when(
    outage: ControlPlane, cli: Any, tmp_path: Path
) -> None:
    namespace, kubeconfig = running_run(outage, cli, tmp_path)
    waiting = Process(
        "wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "8s", home=tmp_path
    )
    waiting.saw("worker-0 Running on")
    killed = time.time()
    outage.kill_apiserver()
    code, out, err = waiting.finish(timeout=60)
    assert code == 3, err
    assert out == ""
    (lost,), back = outage_lines(err)
    assert back == []
    assert lost.group(2, 3) == ("connection refused", "retrying until the --timeout (8s)")
    last = err.splitlines()[-1]
    assert last.startswith(
        f"simpletfjob: error: run 'tfrun' did not end within 8s (Running); the API server at "
        f"{outage.url} (context "
    ), last
    assert "; it is left as it is; see: simpletfjob status tfrun -n " in last, last
    since = SINCE.search(last)
    assert since is not None, last
    assert since[1] in clock_around(killed, 3)
    assert 1 <= int(since[2]) <= 8
    outage.start_apiserver()
    assert set(jobs(outage, namespace)) == {"tfrun-ps-0", "tfrun-worker-0", "tfrun-worker-1"}


def test_delete_wait_rides_out_an_api_server_restart(
    outage: ControlPlane, cli: Any, tmp_path: Path
) -> None:
    namespace, kubeconfig = running_run(outage, cli, tmp_path)
    held = f"/apis/batch/v1/namespaces/{namespace}/jobs/tfrun-worker-0"
    outage.admin.merge_patch(held, {"metadata": {"finalizers": ["tests.example/hold"]}})
    deleting = Process(
        "delete",
        "tfrun",
        "--wait",
        "--timeout",
        "2m",
        "--kubeconfig",
        str(kubeconfig),
        home=tmp_path,
    )
    deleting.saw('job.batch "tfrun-worker-1" deleted')
    time.sleep(1)  # the watch of what is left is open
    outage.kill_apiserver()
    time.sleep(10)
    outage.start_apiserver()
    outage.admin.merge_patch(held, {"metadata": {"finalizers": None}})
    code, out, err = deleting.finish()
    assert code == 0, err
    assert out == ""
    (lost,), (back,) = outage_lines(err)
    assert lost.group(2, 3) == ("connection refused", "retrying until the --timeout (2m)")
    assert 10 <= int(back[1]) <= 60
    last = err.splitlines()[-1]
    assert last.startswith(f"simpletfjob: deleted run tfrun in namespace {namespace} ("), last
    assert last.endswith(" and its Jobs are gone"), last
    assert jobs(outage, namespace) == {}


def test_delete_wait_whose_timeout_passes_in_the_outage_says_since_when(
    outage: ControlPlane, cli: Any, tmp_path: Path
) -> None:
    namespace, kubeconfig = running_run(outage, cli, tmp_path)
    held = f"/apis/batch/v1/namespaces/{namespace}/jobs/tfrun-worker-0"
    outage.admin.merge_patch(held, {"metadata": {"finalizers": ["tests.example/hold"]}})
    deleting = Process(
        "delete",
        "tfrun",
        "--wait",
        "--timeout",
        "6s",
        "--kubeconfig",
        str(kubeconfig),
        home=tmp_path,
    )
    deleting.saw('job.batch "tfrun-worker-1" deleted')
    killed = time.time()
    outage.kill_apiserver()
    code, out, err = deleting.finish(timeout=60)
    outage.start_apiserver()
    outage.admin.merge_patch(held, {"metadata": {"finalizers": None}})
    assert code == 1, err
    assert out == ""
    (lost,), back = outage_lines(err)
    assert back == []
    assert lost.group(2, 3) == ("connection refused", "retrying until the --timeout (6s)")
    last = err.splitlines()[-1]
    assert last.startswith(
        f"simpletfjob: error: run 'tfrun' in namespace {namespace}: its jobs were not seen gone "
        f"within 6s: the API server at {outage.url} (context "
    ), last
    since = SINCE.search(last)
    assert since is not None and last.endswith(since[0]), last
    assert since[1] in clock_around(killed, 3)


# -- the loopback server: failures past one call's attempts ------------------------------------


@pytest.mark.parametrize(
    ("faults", "cause"),
    [
        (
            {"resource": "jobs", "verb": "watch", "throttle_first": 7, "retry_after": 0},
            "429 TooManyRequests: ",
        ),
        ({"resource": "pods", "verb": "watch", "fail_first": 6}, "500 InternalError: "),
        ({"resource": "pods", "verb": "watch", "drop_first": 6}, "connection dropped: "),
    ],
    ids=["429", "5xx", "dropped"],
)
def test_wait_rides_out_more_failures_than_one_call_makes_attempts(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, faults: dict[str, Any], cause: str
) -> None:
    load_run(kubeapi)
    kubeapi.add_faults(**faults)
    faulted = faults["resource"]
    count = next(v for k, v in faults.items() if k.endswith("_first"))

    def play() -> None:
        run_pod(kubeapi, "mnist-worker-0", "h100")
        # the run ends once the faulted watch is open again
        wait_for(lambda: len(kubeapi.requests_for(faulted, "watch")) > count, 30, "the watch")
        time.sleep(0.3)
        run_pod(kubeapi, "mnist-worker-0", "h100", "Succeeded")
        finish_job(kubeapi, "mnist-worker-0")

    changer = when_watching(kubeapi, play)
    result = cli("wait", "mnist", "--kubeconfig", kubeconfig, "--timeout", "40s")
    changer.join()
    assert result.code == 0, result.err
    assert result.err.splitlines()[-1] == "run mnist succeeded: worker-0 Succeeded"
    (lost,), (back,) = outage_lines(result.err)
    assert lost[1] == kubeapi.url
    assert lost[2].startswith(cause), lost[0]
    assert lost[3] == "retrying until the --timeout (40s)"
    assert result.err.splitlines().index(lost[0]) < result.err.splitlines().index(back[0])


def test_wait_cleanup_rides_out_a_server_that_keeps_throttling(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi)
    run_pod(kubeapi, "mnist-worker-0", "h100", "Succeeded")
    finish_job(kubeapi, "mnist-worker-0")
    kubeapi.add_faults(resource="jobs", verb="delete", throttle_first=7, retry_after=0)
    result = cli("wait", "mnist", "--kubeconfig", kubeconfig, "--timeout", "30s")
    assert result.code == 0, result.err
    (lost,), (back,) = outage_lines(result.err)
    assert lost[2].startswith("429 TooManyRequests: "), lost[0]
    assert result.err.splitlines()[-6:] == [
        back[0],
        "job.batch/mnist-ps-0 deleted",
        "job.batch/mnist-worker-1 deleted",
        "service/mnist-ps-0 deleted",
        "service/mnist-worker-1 deleted",
        "run mnist succeeded: worker-0 Succeeded",
    ]
    assert {j["metadata"]["name"] for j in kubeapi.objects("jobs", NS)} == {"mnist-worker-0"}


def test_wait_whose_timeout_passes_in_its_cleanup_exits_3_with_the_verdict(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi)
    run_pod(kubeapi, "mnist-worker-0", "h100", "Succeeded")
    finish_job(kubeapi, "mnist-worker-0")
    kubeapi.add_faults(resource="jobs", verb="delete", throttle_first=1000, retry_after=0)
    started = time.monotonic()
    result = cli("wait", "mnist", "--kubeconfig", kubeconfig, "--timeout", "3s")
    assert 2.9 <= time.monotonic() - started < 6
    assert result.code == 3, result.err
    (lost,), back = outage_lines(result.err)
    assert back == []
    assert lost[3] == "retrying until the --timeout (3s)"
    last = result.err.splitlines()[-1]
    assert last.startswith(
        "simpletfjob: error: run 'mnist' succeeded: worker-0 Succeeded; but its cleanup "
        f"(--cleanup running) did not finish within 3s: the API server at {kubeapi.url} "
    ), last
    assert re.search(r"unreachable since \d\d:\d\d:\d\d \([23]s\): 429 TooManyRequests: ", last)
    assert {j["metadata"]["name"] for j in kubeapi.objects("jobs", NS)} == {
        "mnist-ps-0",
        "mnist-worker-0",
        "mnist-worker-1",
    }
    # a few tries a second at most, not a busy loop: Retry-After 0 does not undo the backoff
    assert len(kubeapi.requests_for("jobs", "delete")) < 15


def connected(api: KubeAPI, tmp_path: Path, **settings: Any) -> Connection:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, namespace=NS)
    return connect(Settings(kubeconfig=str(kubeconfig), **settings))


def test_a_watch_that_keeps_ending_at_once_is_ridden_out_with_one_line_each_way(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeapi.load("pods", [make_pod("p", NS)])
    kubeapi.add_faults(resource="pods", verb="watch", watch_empty_first=8)
    said: list[str] = []
    with connected(kubeapi, tmp_path, backoff=0.01, attempts=3) as conn:
        version = list_objects(conn, PODS).resource_version
        threading.Timer(0.5, lambda: kubeapi.create("pods", make_pod("q", NS))).start()
        with riding_out(conn, Deadline.after(20), said.append, "the --timeout (20s)"):
            events = watch(conn, PODS, resource_version=version, deadline=Deadline.after(20))
            first = next(events)
            events.close()
    assert (first.type, first.object and first.object["metadata"]["name"]) == ("ADDED", "q")
    assert len(kubeapi.requests_for("pods", "watch")) == 9
    lost, back = outage_lines("\n".join(said))
    assert len(lost) == 1 and len(back) == 1, said
    assert lost[0][2] == "the watch ended at once, with no event"


def test_a_server_away_past_the_deadline_is_still_away_since_when_it_went(
    kube_env: Path, tmp_path: Path
) -> None:
    api = KubeAPI()
    token = api.add_admin()
    with serve(api):
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, token=token, namespace=NS)
        conn = connect(Settings(kubeconfig=str(kubeconfig)))
        list_objects(conn, JOBS)  # it answered
    conn.client.rest_client.pool_manager.clear()  # the loopback server's connections outlive it
    said: list[str] = []
    went = time.time()
    with conn, riding_out(conn, Deadline.after(2.5), said.append, "the --timeout (2.5s)"):
        with pytest.raises(StillAway) as caught:
            list_objects(conn, JOBS)
        took = time.time() - went
    assert 2.4 <= took < 4
    assert said == [
        f"simpletfjob: lost the API server at {conn.target}: connection refused; retrying until "
        "the --timeout (2.5s)"
    ]
    since = SINCE.search(str(caught.value))
    assert since is not None, caught.value
    assert str(caught.value).startswith(f"the API server at {conn.target} has been unreachable")
    assert since[1] in clock_around(went)
    assert since[2] in ("2", "3")


def test_a_ride_gives_up_at_once_on_an_answer_or_a_server_never_reached(
    loopback: LoopbackCluster, kube_env: Path, tmp_path: Path
) -> None:
    ns = loopback.create_namespace()
    loopback.grant("alice", ["list"], ["pods"], namespace=ns)
    said: list[str] = []
    kubeconfig = loopback.kubeconfig(tmp_path / "alice", "alice", ns)
    with connect(Settings(kubeconfig=str(kubeconfig))) as conn:
        list_objects(conn, PODS)
        with riding_out(conn, Deadline.after(30), said.append, "the --timeout (30s)"):
            started = time.monotonic()
            with pytest.raises(ApiError) as refused:
                list_objects(conn, JOBS)
            assert time.monotonic() - started < 2
    assert refused.value.status == 403
    nowhere = write_kubeconfig(tmp_path / "nowhere", f"http://127.0.0.1:{closed_port()}")
    with (
        connect(Settings(kubeconfig=str(nowhere))) as conn,
        riding_out(conn, Deadline.after(30), said.append, "the --timeout (30s)"),
    ):
        started = time.monotonic()
        with pytest.raises(ClusterError) as unreachable:
            list_objects(conn, PODS)
        assert time.monotonic() - started < 2
    assert "connection refused; is the cluster up" in str(unreachable.value)
    assert said == []
