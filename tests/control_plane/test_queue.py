"""`run --queue`, `apply --queue`, `queue NAME` and `status` of a queued run, on the real control
plane with the kubelet stand-in and one node of 4 CPUs: each run's one task asks for 3, so two
runs fit alone but not together. Each task writes when it started and ended (markers/NAME.*):
no two of them may overlap, and they must run in the order their clients entered the queue."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import pty
import re
import signal
import subprocess
import threading
import time
import tty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.conftest import assert_one_line_error, console_script, write
from tests.support import forkserver
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.faultproxy import FaultProxy
from tests.support.kubelet import Kubelet
from tests.support.runs import docs_rbac
from tests.support.scenes import stand_in_nodes
from tests.support.templates import QUEUED as TEMPLATE

SCRIPT = """\
import pathlib, sys, time
markers, name, seconds = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
(markers / f"{name}.start").write_text(repr(time.time()))
time.sleep(seconds)
(markers / f"{name}.end").write_text(repr(time.time()))
"""
SCRIPT_PATH = console_script()
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{}/leases"


class Queue:
    """The test's node, template and program; the clients as a user starts them."""

    def __init__(
        self, kube: ControlPlane, ns: str, tmp: Path, label: str, nodes: list[str]
    ) -> None:
        self.kube, self.ns, self.label, self.nodes = kube, ns, label, nodes
        self.template = write(tmp / "q.yaml", TEMPLATE)
        self.script = write(tmp / "task.py", SCRIPT)
        self.markers = tmp / "markers"
        self.markers.mkdir()
        self.kubeconfig = str(kube.kubeconfig(tmp / "kc", namespace=ns))

    def args(self, name: str, seconds: float, cpu: str, kubeconfig: str | None) -> list[str]:
        return [
            str(self.template), "--name", name, "-N", "1", "--psn", "0", "-l", f"q={self.label}",
            "--address", "internal-ip", "--kubeconfig", kubeconfig or self.kubeconfig,
            "--set", f"script={self.script}", "--set", f"markers={self.markers}",
            "--set", f"seconds={seconds}", "--set", f"cpu={cpu}", "--queue", "team",
        ]  # fmt: skip

    def start(
        self, name: str, *more: str, seconds: float = 3, cpu: str = "3", command: str = "run",
        kubeconfig: str | None = None,
    ) -> subprocess.Popen[str]:  # fmt: skip
        """A client, started; it returns once its entry is in the queue (or it has ended)."""
        proc = forkserver.Popen(
            [SCRIPT_PATH, command, *self.args(name, seconds, cpu, kubeconfig), *more],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for(lambda: proc.poll() is not None or name in self.waiting() or self.jobs(name),
                 timeout=60, what=f"{name} in the queue")  # fmt: skip
        return proc

    def leases(self) -> list[dict[str, Any]]:
        answer = self.kube.admin.get(LEASES.format(self.ns), labelSelector="simpletfjob/queue")
        return list(answer["items"])

    def waiting(self) -> list[str]:
        """The runs with an entry, by entry name (the queue's order)."""
        entries = sorted(
            (lease["metadata"]["name"], lease["metadata"]["annotations"]["simpletfjob/queue-run"])
            for lease in self.leases()
            if not lease["metadata"]["name"].endswith(".lock")
        )
        return [run for _, run in entries]

    def jobs(self, name: str) -> list[str]:
        answer = self.kube.admin.get(
            f"/apis/batch/v1/namespaces/{self.ns}/jobs", labelSelector=f"simpletfjob/job={name}"
        )
        return [job["metadata"]["name"] for job in answer["items"]]

    def ran(self) -> dict[str, tuple[float, float]]:
        """Each run's task: when it started and ended."""
        return {
            path.stem: (float(path.read_text()), float((self.markers / f"{path.stem}.end").read_text()))
            for path in self.markers.glob("*.start")
            if (self.markers / f"{path.stem}.end").exists()
        }  # fmt: skip

    def cli(self, cli: Any, *args: str) -> Any:
        return cli(*args, "--kubeconfig", self.kubeconfig)


@dataclasses.dataclass(frozen=True)
class Ended:
    code: int
    out: str
    err: str

    @property
    def pair(self) -> tuple[int, str]:
        return self.code, self.err


def ended(proc: subprocess.Popen[str], timeout: float = 180) -> Ended:
    out, err = proc.communicate(timeout=timeout)
    return Ended(proc.returncode, out, err)


def one_after_another(ran: dict[str, tuple[float, float]], order: list[str]) -> None:
    """Each run's task started after the one before it ended: no overlap, in this order."""
    assert sorted(ran, key=lambda name: ran[name][0]) == order, ran
    for before, after in itertools.pairwise(order):
        assert ran[before][1] <= ran[after][0], (before, after, ran)


@pytest.fixture
def queue(kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Queue]:
    nodes, label = stand_in_nodes("qn", 1, label_key="q")
    small = [dataclasses.replace(node, cpu="4") for node in nodes]
    with Kubelet(kube, small, tmp_path / "kubelet"):
        yield Queue(kube, namespace, tmp_path, label, [node.name for node in small])


def test_two_runs_that_fit_alone_but_not_together_run_one_after_the_other(
    queue: Queue, cli: Any
) -> None:
    first = queue.start("qa", seconds=6)
    second = queue.start("qb")
    assert queue.jobs("qa") and queue.waiting() == ["qb"]
    # While it waits: `queue` lists it, and `status` says it is Queued, and where.
    listed = queue.cli(cli, "queue", "team", "-o", "json")
    assert listed.code == 0, listed.err
    (entry,) = json.loads(listed.out)
    assert {k: entry[k] for k in ("position", "run", "namespace", "state")} == {
        "position": 1, "run": "qb", "namespace": queue.ns, "state": entry["state"],
    }  # fmt: skip
    assert entry["state"] in ("Waiting", "Admitting")
    assert entry["asks"] == [{"role": "worker", "tasks": 1, "requests": {"cpu": "3"}}]
    assert entry["since"].endswith("Z")
    status = queue.cli(cli, "status", "qb", "-o", "json")
    assert status.code == 0, status.err
    assert json.loads(status.out) == {
        "name": "qb", "namespace": queue.ns, "state": "Queued",
        "queue": {"name": "team", "position": 1, "of": 1}, "tasks": [],
    }  # fmt: skip
    table = queue.cli(cli, "status", "qb")
    assert table.out == f'run qb in {queue.ns}: Queued, 0 tasks (1st of 1 in queue "team")\n'
    # The run that has its Jobs is no longer in the queue: status shows its tasks.
    assert json.loads(queue.cli(cli, "status", "qa", "-o", "json").out)["state"] != "Queued"

    assert ended(first).code == 0
    code, err = ended(second).pair
    assert code == 0, err
    assert (
        'waiting in queue "team": 1st of 1; needs 1 × cpu 3 on 1 node, the most free on one node is cpu '
        in err
    ), err
    assert err.splitlines()[-1] == "run qb succeeded: worker-0 Succeeded"
    one_after_another(queue.ran(), ["qa", "qb"])
    assert queue.waiting() == []
    assert queue.cli(cli, "queue", "team").err == (
        f'No runs waiting in queue "team" in {queue.ns} namespace.\n'
    )


def test_status_lists_the_leases_once_and_only_for_a_run_without_jobs(
    queue: Queue, cli: Any, kube: ControlPlane, tmp_path: Path
) -> None:
    """A run with Jobs reads no Lease; one without, one list of them; a user who may not list
    them is told there is no such run, as before."""
    first = queue.start("qa", seconds=30)
    queue.start("qb").kill()  # its entry stays (it expires in 30 s)
    with FaultProxy(kube.url, ca_file=kube.ca_file, tls=trustme.CA()) as proxy:
        kubeconfig = str(
            proxy.kubeconfig(tmp_path / "kp", token=kube.admin_token, namespace=queue.ns)
        )

        def status(run: str) -> tuple[Any, list[str]]:
            before = len(proxy.requests)
            result = cli("status", run, "-o", "json", "--kubeconfig", kubeconfig)
            return result, [r.verb for r in proxy.requests[before:] if r.resource == "leases"]

        running, read = status("qa")
        assert (running.code, read) == (0, []), running.err
        assert json.loads(running.out)["state"] in ("Pending", "Running")
        queued, read = status("qb")
        assert (queued.code, read, json.loads(queued.out)["state"]) == (0, ["list"], "Queued")
        missing, read = status("qc")
        assert read == ["list"]
        assert_one_line_error(missing, 1, contains=["no run 'qc' in namespace"])
    kube.grant("erin", ["list"], ["jobs"], queue.ns, "batch")
    kube.grant("erin", ["list"], ["pods"], queue.ns)
    erin = str(kube.kubeconfig(tmp_path / "erin", user="erin", namespace=queue.ns))
    refused = cli("status", "qb", "--kubeconfig", erin)
    assert_one_line_error(refused, 1, contains=[f"no run 'qb' in namespace '{queue.ns}'"])
    first.send_signal(signal.SIGTERM)
    ended(first)


def test_three_clients_keep_their_order_apply_among_them(queue: Queue, cli: Any) -> None:
    procs = [queue.start("qa", seconds=4), queue.start("qb"), queue.start("qc", command="apply")]
    assert queue.waiting() == ["qb", "qc"]
    table = queue.cli(cli, "queue", "team").out.splitlines()
    assert table[0].split() == ["POSITION", "RUN", "NAMESPACE", "SINCE", "ASKS", "STATE"]
    assert [row.split()[:3] for row in table[1:]] == [["1", "qb", queue.ns], ["2", "qc", queue.ns]]
    assert "1 worker × cpu 3" in table[2]
    for proc in procs:
        code, err = ended(proc).pair
        assert code == 0, err
    # apply returns once applied: its task may still run.
    wait_for(lambda: "qc" in queue.ran(), timeout=60, what="qc's task done")
    one_after_another(queue.ran(), ["qa", "qb", "qc"])


def test_two_clients_that_start_at_the_same_moment_never_run_together(queue: Queue) -> None:
    streams = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    procs = [
        forkserver.Popen(
            [SCRIPT_PATH, "run", *queue.args(name, 3, "3", None)], text=True, **streams
        )
        for name in ("qa", "qb")
    ]
    for proc in procs:
        code, err = ended(proc).pair
        assert code == 0, err
    ran = queue.ran()
    order = sorted(ran, key=lambda name: ran[name][0])
    one_after_another(ran, order)


def test_of_two_clients_that_take_the_lock_at_the_same_moment_one_only_holds_it(
    queue: Queue,
) -> None:
    """The lock is taken by an update that carries the resourceVersion both read."""
    from simpletfjob.kube.connection import Settings, connect
    from simpletfjob.kube.leases import lease_body
    from simpletfjob.runs.queue import QUEUE_LABEL, _Turn, lock_name

    lock = queue.kube.admin.post(
        LEASES.format(queue.ns), lease_body(lock_name("team"), "", 30, {QUEUE_LABEL: "team"}, {})
    )
    with connect(Settings(kubeconfig=queue.kubeconfig), purpose="test") as conn:
        turns = [_Turn(conn, "team", queue.ns, 30.0, run, []) for run in ("qa", "qb")]
        for turn in turns:
            turn.enter()
        live = {turn.name for turn in turns}
        taken: list[bool] = []
        barrier = threading.Barrier(2)

        def take(turn: _Turn) -> None:
            barrier.wait()
            taken.append(turn._take(lock, live))

        threads = [threading.Thread(target=take, args=(turn,)) for turn in turns]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(taken) == [False, True]
        holder = queue.kube.admin.get(LEASES.format(queue.ns) + "/" + lock_name("team"))
        (winner,) = [turn for turn in turns if turn.held is not None]
        assert holder["spec"]["holderIdentity"] == winner.name
        # The other, reading it again, sees it held by a live entry: not free for it.
        (loser,) = [turn for turn in turns if turn.held is None]
        assert not loser._take(holder, live)
        for turn in turns:
            turn.leave()
    assert queue.waiting() == []
    released = queue.kube.admin.get(LEASES.format(queue.ns) + "/" + lock_name("team"))
    assert "holderIdentity" not in released["spec"]


def test_a_waiter_killed_with_sigkill_leaves_an_entry_that_expires(queue: Queue) -> None:
    first = queue.start("qa", seconds=10)
    killed = queue.start("qb", "--queue-lease", "3s")
    third = queue.start("qc")
    assert queue.waiting() == ["qb", "qc"]
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    assert queue.waiting() == ["qb", "qc"]  # SIGKILL removes nothing
    wait_for(lambda: queue.waiting() == ["qc"], timeout=30, what="qb's entry expired")
    assert ended(first).code == 0
    code, err = ended(third).pair
    assert code == 0, err
    assert queue.jobs("qb") == []
    one_after_another(queue.ran(), ["qa", "qc"])


def test_timeout_while_waiting_exits_3_with_nothing_applied_and_the_entry_removed(
    queue: Queue,
) -> None:
    first = queue.start("qa", seconds=30)
    waiting = [
        queue.start("qb", "--timeout", "4s"),
        queue.start("qc", "--timeout", "4s", command="apply"),
    ]
    for name, proc in zip(("qb", "qc"), waiting, strict=True):
        code, err = ended(proc).pair
        assert code == 3, err
        line = err.splitlines()[-1]
        assert line.startswith(f"simpletfjob: error: run '{name}' was not admitted within 4s (in "
                               'queue "team": '), line  # fmt: skip
        assert line.endswith("; nothing was applied, and its entry was removed"), line
        assert queue.jobs(name) == []
    assert queue.waiting() == []
    first.send_signal(signal.SIGTERM)
    ended(first)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_while_waiting_removes_the_entry(
    queue: Queue, signum: signal.Signals, code: int
) -> None:
    first = queue.start("qa", seconds=30)
    waiting = queue.start("qb")
    wait_for(lambda: queue.waiting() == ["qb"], timeout=30, what="qb waiting")
    waiting.send_signal(signum)
    code_got, err = ended(waiting).pair
    assert code_got == code, err
    assert err.splitlines()[-1] == (
        f"simpletfjob: interrupted: left queue 'team' (its entry removed); nothing of run 'qb' "
        f"was applied to namespace {queue.ns}"
    ), err
    assert queue.waiting() == [] and queue.jobs("qb") == []
    first.send_signal(signal.SIGTERM)
    ended(first)


def test_a_user_without_rights_on_leases_is_refused_before_it_waits(
    queue: Queue, kube: ControlPlane, tmp_path: Path
) -> None:
    """docs/rbac.md's Role (in the namespace) but not the queue's: refused in one line before
    anything waits or is applied. The nodes come from a saved list (no ClusterRole)."""
    user = "carol"
    for rule in docs_rbac("Role")["rules"]:
        kube.grant(user, rule["verbs"], rule["resources"], queue.ns, rule["apiGroups"][0])
    kubeconfig = str(kube.kubeconfig(tmp_path / "carol", user=user, namespace=queue.ns))
    saved = {"apiVersion": "v1", "kind": "NodeList", "items": [
        kube.admin.get(f"/api/v1/nodes/{node}") for node in queue.nodes
    ]}  # fmt: skip
    nodes = write(tmp_path / "nodes.json", json.dumps(saved))
    refusal = (
        f"user '{user}' cannot get, list, watch, create, update, delete leases in namespace "
        f"{queue.ns}, which --queue needs, so nothing was applied; it needs a Role with verbs "
        "'get', 'list', 'watch', 'create', 'update', 'delete' on 'leases' in API group "
        "'coordination.k8s.io'"
    )
    for command in ("run", "apply"):
        proc = queue.start("qa", "--nodes-file", str(nodes), command=command, kubeconfig=kubeconfig)
        code, err = ended(proc).pair
        errors = [line for line in err.splitlines() if line.startswith("simpletfjob: error:")]
        assert code == 1 and len(errors) == 1 and errors[0].endswith(refusal), err
        assert queue.jobs("qa") == [] and queue.waiting() == []
    # The queue's Role, but for one verb: that verb alone is named.
    rule = docs_rbac("Role", "simpletfjob-queue")["rules"][0]
    verbs = [verb for verb in rule["verbs"] if verb != "update"]
    kube.grant(user, verbs, rule["resources"], queue.ns, rule["apiGroups"][0])
    proc = queue.start("qa", "--nodes-file", str(nodes), command="apply", kubeconfig=kubeconfig)
    line = assert_one_line_error(ended(proc), 1)
    assert line.endswith(
        f"user '{user}' cannot update leases in namespace {queue.ns}, which --queue needs, so "
        "nothing was applied; it needs a Role with verb 'update' on 'leases' in API group "
        "'coordination.k8s.io'"
    ), line


def test_a_run_whose_pods_are_slow_to_appear_counts_as_taken_for_the_next_head(
    queue: Queue, kube: ControlPlane
) -> None:
    """With the Job controller stopped, the first run's Job exists but its pod does not: the
    fit counts the pod it has yet to make, so the second run waits until it has run."""
    manager = kube.processes["kube-controller-manager"]
    manager.terminate()
    manager.wait(timeout=30)
    try:
        first = queue.start("qa")
        wait_for(lambda: queue.jobs("qa"), timeout=60, what="qa's Job")
        second = queue.start("qb")
        time.sleep(12)  # two of the head's tries, at least
        assert queue.waiting() == ["qb"] and queue.jobs("qb") == []
    finally:
        kube.launch("kube-controller-manager", kube.commands["kube-controller-manager"])
    assert ended(first).code == 0
    code, err = ended(second).pair
    assert code == 0, err
    one_after_another(queue.ran(), ["qa", "qb"])


def test_the_python_api_applies_at_the_runs_turn_and_says_a_queued_run_is_queued(
    queue: Queue,
) -> None:
    import simpletfjob
    from simpletfjob.api.results import State

    client = simpletfjob.Client(kubeconfig=queue.kubeconfig, namespace=queue.ns)
    first = queue.start("qa", seconds=6)
    found: list[Any] = []

    def look() -> None:
        wait_for(lambda: queue.waiting() == ["qb"], timeout=60, what="qb waiting")
        found.append(simpletfjob.Run(client, "qb", queue.ns).status())

    looking = threading.Thread(target=look)
    looking.start()
    values = {"script": str(queue.script), "markers": str(queue.markers), "seconds": 1,
              "cpu": "3"}  # fmt: skip
    run = client.apply(
        str(queue.template), num=1, name="qb", values=values, psn=0,
        selector=f"q={queue.label}", address="internal-ip", queue="team",
    )  # fmt: skip
    looking.join(timeout=60)
    assert run.name == "qb" and queue.jobs("qb")
    (status,) = found
    assert (status.state, status.queue) == (State.QUEUED, {"name": "team", "position": 1, "of": 1})
    assert status.tasks == ()
    assert ended(first).code == 0
    assert run.wait(timeout="2m").succeeded
    one_after_another(queue.ran(), ["qa", "qb"])


def test_on_a_terminal_the_waiting_line_is_the_status_line(queue: Queue) -> None:
    """stderr on a pty: the waiting line is drawn in place (`\\r\\e[K`, with the time so far),
    never as a line of its own; through a pipe (above) it is a line."""
    first = queue.start("qa", seconds=30)
    main, terminal = pty.openpty()
    tty.setraw(terminal)
    try:
        proc = forkserver.Popen(
            [SCRIPT_PATH, "run", *queue.args("qb", 3, "3", None)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=terminal,
        )  # fmt: skip
        os.close(terminal)
        received = b""
        while b'waiting in queue "team": 1st of 1' not in received:
            received += os.read(main, 65536)
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(OSError):  # EIO: the terminal's last writer has gone
            while data := os.read(main, 65536):
                received += data
        assert proc.wait(timeout=60) == 130
    finally:
        os.close(main)
    drawn = re.findall(rb"\r\x1b\[K(waiting in queue [^\r\n]*?)(?=\r\x1b\[K)", received)
    assert drawn and all(re.search(rb"; \d+s$", line) for line in drawn), received
    assert (
        'waiting in queue "team": 1st of 1; needs 1 × cpu 3 on 1 node, the most free on one node is cpu '.encode()
        in drawn[0]
    ), received
    assert b"waiting in queue" not in re.sub(rb"\r\x1b\[K[^\r\n]*", b"", received), received
    assert received.endswith(
        b"nothing of run 'qb' was applied to namespace " + queue.ns.encode() + b"\n"
    )
    first.send_signal(signal.SIGTERM)
    ended(first)
