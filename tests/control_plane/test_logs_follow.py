"""`logs -f` and `run --logs` on the real control plane and the kubelet stand-in, where lines
could be lost or late: very long lines, a log still coming when the run ends, a container
started again in place, --previous, --since and --timestamps while following, a run whose
pods are still Pending, and 150 tasks at once.

Each task runs a script of the test's own (logruns.py); a script that waits for a marker
lets the test say what it saw live before the task goes on.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from simpletfjob.runs.logsources import ENDED_AT_ONCE
from tests.conftest import Result, console_script
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.faultproxy import FaultProxy
from tests.support.kubelet import Kubelet
from tests.support.logruns import Live, LogRun, prefixed
from tests.support.scenes import stand_in_nodes

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z")


@pytest.fixture
def lf(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[LogRun]:
    nodes, _ = stand_in_nodes("lf", 3)
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        yield LogRun(cli, kube, kubelet, namespace, tmp_path)


def in_thread(call: Any) -> tuple[threading.Thread, list[Result]]:
    done: list[Result] = []
    thread = threading.Thread(target=lambda: done.append(call()), daemon=True)
    thread.start()
    return thread, done


def ended(thread: threading.Thread, done: list[Result], timeout: float = 120) -> Result:
    thread.join(timeout)
    assert done, "the command did not end"
    return done[0]


# -- a finished task's log is read to its end ----------------------------------------------


LONG_LINES = """
if task["type"] == "ps":
    say("ready")
    time.sleep(3600)
wait_for_marker("go")
sys.stdout.write(name + " " + "x" * 10_000_000 + "\\n")
say("after")
"""


def test_follow_reads_every_finished_tasks_10_mb_lines_to_the_end(lf: LogRun) -> None:
    """Two workers print a 10 MB line and a short one and end together (issue 23's case)."""
    lf.apply(LONG_LINES)
    thread, done = in_thread(lambda: lf.logs("-f", "--tail", "-1"))
    wait_for(lambda: lf.running("worker-0") and lf.running("worker-1"), 60, "both workers")
    lf.mark("go")
    result = ended(thread, done)
    assert result.code == 0, result.err
    by_task = prefixed(result.out)
    for task in ("worker-0", "worker-1"):
        lines = by_task[task]
        assert [len(line) for line in lines] == [len(task) + 1 + 10_000_000, len(task) + 6]
        assert lines[0] == f"{task} " + "x" * 10_000_000
        assert lines[1] == f"{task} after"
    assert by_task["ps-0"] == ["ps-0 ready"]


LATE_STREAM = """
if task["type"] == "ps":
    say("ready")
    time.sleep(3600)
if name == "worker-0":
    wait_for_marker("go")  # once worker-1 runs: on a loaded machine it may start late
    say("done")
    sys.exit(0)
# worker-1 ends once the run has ended, and what it printed keeps coming for 4 s more (a
# process it started writes it), as a slow log would after its container has ended
wait_for_marker("ended")
say("leaving")
late = "import sys, time\\nfor i in range(20):\\n    print(sys.argv[1], 'late', i, flush=True)\\n    time.sleep(0.2)"
subprocess.Popen([sys.executable, "-c", late, name])
"""


def test_follow_reads_a_finished_task_to_its_end_however_late_its_log_ends(
    lf: LogRun,
) -> None:
    """worker-1 ends after the run's verdict, its last pod update unseen by the follow, and
    its log takes longer than the 2 s grace to come: all of it is read, the ps is cut."""
    lf.apply(LATE_STREAM)
    thread, done = in_thread(lambda: lf.logs("-f", "--tail", "-1"))
    wait_for(lambda: lf.running("worker-0") and lf.running("worker-1"), 60, "both workers")
    lf.mark("go")
    wait_for(lambda: lf.job_done("worker-0"), 60, "worker-0 to succeed")
    lf.mark("ended")
    result = ended(thread, done)
    assert result.code == 0, result.err
    by_task = prefixed(result.out)
    assert by_task["worker-1"] == [
        "worker-1 leaving",
        *(f"worker-1 late {i}" for i in range(20)),
    ]
    assert by_task["worker-0"] == ["worker-0 done"]
    assert by_task["ps-0"] == ["ps-0 ready"]
    assert result.err.splitlines()[-1] == "run lf succeeded: worker-0 Succeeded"


# -- a container started again in place is streamed live ------------------------------------


RESTARTED = """
if task["type"] == "ps":
    say("ready")
    time.sleep(3600)
if name == "worker-1":
    if once("crashed"):
        say("first run")
        wait_for_marker("crash")
        say("crashing")
        sys.exit(3)
    say("second run")
    wait_for_marker("seen")
    say("done")
    sys.exit(0)
wait_for_marker("seen")  # worker-0 decides: it ends once the test has seen worker-1's second run
say("done")
"""


def test_follow_streams_a_container_started_again_in_place_live(lf: LogRun) -> None:
    lf.apply(RESTARTED, restart="OnFailure", backoff=3)
    live = Live("logs", "lf", "-f", "--role", "worker", "--kubeconfig", lf.kubeconfig)
    try:
        live.saw("worker-1 | worker-1 first run", 60)
        lf.mark("crash")
        # the new run's line comes while it runs: the run goes on only once the test saw it
        live.saw("worker-1 | worker-1 second run", 30)
        lf.mark("seen")
        result = live.finish()
    finally:
        live.proc.kill()
    assert result.code == 0, result.err
    by_task = prefixed(result.out)
    assert by_task["worker-1"] == [
        "worker-1 first run",
        "worker-1 crashing",
        "worker-1 second run",
        "worker-1 done",
    ]
    assert by_task["worker-0"] == ["worker-0 done"]


def test_run_logs_streams_a_container_started_again_in_place_live(lf: LogRun) -> None:
    nodes = ",".join(lf.kubelet.nodes)
    args = lf.args(RESTARTED, restart="OnFailure", backoff=3)
    live = Live("run", *args, "--nodes", nodes, "--logs", "worker-1", "--cleanup", "none")
    try:
        live.saw("worker-1 | worker-1 first run", 60)
        lf.mark("crash")
        live.saw("worker-1 | worker-1 second run", 30)
        lf.mark("seen")
        result = live.finish()
    finally:
        live.proc.kill()
    assert result.code == 0, result.err
    assert prefixed(result.out)["worker-1"] == [
        "worker-1 first run",
        "worker-1 crashing",
        "worker-1 second run",
        "worker-1 done",
    ]
    assert result.err.splitlines()[-1] == "run lf succeeded: worker-0 Succeeded"


# -- --previous, --since, --timestamps ---------------------------------------------------------


CRASHES_TWICE = """
if task["type"] == "ps":
    time.sleep(3600)
if name == "worker-1":
    run = sum(1 for _ in markers.glob("worker-1-run-*"))
    (markers / f"worker-1-run-{run}").touch()
    say("run", run, "line")
    if run < 2:
        time.sleep(0.5)
        say("run", run, "crashing")
        sys.exit(3)
    say("run", run, "done")
    (markers / "worker-1-done").touch()
    sys.exit(0)
wait_for_marker("worker-1-done")
say("done")
"""


def test_previous_shows_each_crashed_run_once_while_following_and_after(lf: LogRun) -> None:
    for node in lf.kubelet.nodes.values():
        node.beating = False  # nothing starts until the follower is following
    lf.apply(CRASHES_TWICE, restart="OnFailure", backoff=3)
    live = Live("logs", "lf", "worker-1", "-f", "--previous", "--kubeconfig", lf.kubeconfig)
    try:
        live.saw_part("worker-1: ", 30, stderr=True)
        for node in lf.kubelet.nodes.values():
            node.beating = True
        result = live.finish()
    finally:
        live.proc.kill()
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "worker-1 run 0 line",
        "worker-1 run 0 crashing",
        "worker-1 run 1 line",
        "worker-1 run 1 crashing",
    ]
    assert "worker-1: no previous container (it has not restarted)" in result.err.splitlines()
    after = lf.logs("worker-1", "--previous")
    assert after.code == 0, after.err
    assert after.out.splitlines() == ["worker-1 run 1 line", "worker-1 run 1 crashing"]
    now = lf.logs("worker-1")
    assert now.out.splitlines() == ["worker-1 run 2 line", "worker-1 run 2 done"]


TWO_PARTS = """
if task["type"] == "ps":
    time.sleep(3600)
if name == "worker-1":
    for i in range(3):
        say("early", i)
    wait_for_marker("late")
    for i in range(3):
        say("late", i)
    wait_for_marker("end")
    sys.exit(0)
wait_for_marker("end")
say("done")
"""


def test_since_and_timestamps_with_and_without_follow(lf: LogRun) -> None:
    lf.apply(TWO_PARTS)
    early = [f"worker-1 early {i}" for i in range(3)]
    late = [f"worker-1 late {i}" for i in range(3)]
    wait_for(lambda: lf.logs("worker-1").out.splitlines() == early, 60, "the early lines")
    time.sleep(10)
    # the early lines are 10 s old: --since 6s leaves them out, and takes the late ones
    following = Live("logs", "lf", "worker-1", "-f", "--since", "6s", "--kubeconfig", lf.kubeconfig)
    lives = [following]
    try:
        # its --since counts from when its stream comes: on a loaded machine, seconds later
        wait_for(lambda: lf.kubelet.streams() == 1, 60, "logs -f --since 6s to stream")
        lf.mark("late")
        following.saw(late[-1])
        since = lf.logs("worker-1", "--since", "6s")
        assert since.code == 0, since.err
        assert since.out.splitlines() == late
        stamped = Live("logs", "lf", "--role", "worker", "-f", "--timestamps", "--tail", "-1",
                       "--kubeconfig", lf.kubeconfig)  # fmt: skip
        plain = Live("logs", "lf", "worker-1", "-f", "--kubeconfig", lf.kubeconfig)
        lives += [stamped, plain]
        stamped.saw_part(late[-1])
        plain.saw(late[-1])
        lf.mark("end")
        results = [live.finish() for live in lives]
    finally:
        for live in lives:
            live.proc.kill()
    assert [r.code for r in results] == [0, 0, 0], [r.err for r in results]
    assert results[0].out.splitlines() == late
    by_task = prefixed(results[1].out)
    for task, lines in (("worker-1", early + late), ("worker-0", ["worker-0 done"])):
        split = [line.split(" ", 1) for line in by_task[task]]
        assert [text for _, text in split] == lines
        assert all(STAMP.fullmatch(stamp) for stamp, _ in split), by_task[task]
    # timestamps asked of the kubelet to read on across a break are not shown unless asked
    assert results[2].out.splitlines() == early + late
    plain_stamp = lf.logs("worker-1", "--timestamps", "--tail", "1").out.split(" ", 1)
    assert STAMP.fullmatch(plain_stamp[0]) and plain_stamp[1] == f"{late[-1]}\n"


# -- a run whose pods are still Pending ----------------------------------------------------------


SHORT = """
if task["type"] == "ps":
    say("ready")
    time.sleep(3600)
for i in range(3):
    say("line", i)
"""


def test_a_run_whose_pods_are_pending_shows_why_then_follows_them_once_they_start(
    lf: LogRun,
) -> None:
    for node in lf.kubelet.nodes.values():
        node.beating = False
    lf.apply(SHORT)
    wait_for(lambda: len(lf.kube.pods(lf.ns, "simpletfjob/job=lf")) == 3, 60, "the 3 pods")
    shown = lf.logs()
    assert shown.code == 0, shown.err
    assert shown.out == ""
    assert sorted(shown.err.splitlines()) == [
        f"{task}: waiting to start: ContainerCreating" for task in ("ps-0", "worker-0", "worker-1")
    ]
    live = Live("logs", "lf", "-f", "--kubeconfig", lf.kubeconfig)
    try:
        live.saw("worker-1: waiting to start: ContainerCreating", stderr=True)
        for node in lf.kubelet.nodes.values():
            node.beating = True
        result = live.finish()
    finally:
        live.proc.kill()
    assert result.code == 0, result.err
    by_task = prefixed(result.out)
    for task in ("worker-0", "worker-1"):
        assert by_task[task] == [f"{task} line {i}" for i in range(3)]
    assert by_task["ps-0"] == ["ps-0 ready"]


# -- 150 tasks -------------------------------------------------------------------------------------


MANY = """
lines = [f"{name} line {i}\\n" for i in range(200)]
if name != "worker-0":
    sys.stdout.write("".join(lines))
    sys.stdout.flush()
    (markers / name).touch()
    sys.exit(0)
# worker-0 decides: it ends last, so that every other task has finished by the verdict
end = time.monotonic() + 240
while sum(1 for _ in markers.iterdir()) < 149 and time.monotonic() < end:
    time.sleep(0.2)
sys.stdout.write("".join(lines))
"""


def test_follow_of_150_tasks_reads_every_line_of_every_task(lf: LogRun) -> None:
    lf.apply(MANY, "--psn", "0", "-N", "3", "--tasks-per-host", "50")
    result = lf.logs("-f", "--tail", "-1")
    assert result.code == 0, result.err
    by_task = prefixed(result.out)
    assert len(by_task) == 150, sorted(by_task)
    for task, lines in by_task.items():
        assert lines == [f"{task} line {i}" for i in range(200)], task
    assert sum(len(lines) for lines in by_task.values()) == 30_000


# -- finished tasks' logs over a few kept connections -------------------------------------------


FINISHED = """
sys.stdout.write("".join(f"{name} line {i}\\n" for i in range(50)))
"""


@pytest.mark.parametrize("follow", [["-f"], []], ids=["follow", "once"])
def test_finished_tasks_logs_are_read_over_fewer_connections_than_pods(
    lf: LogRun, tmp_path: Path, follow: list[str]
) -> None:
    """18 tasks that have ended: their logs end by themselves, so they are read a few at a time,
    one after another on kept connections, not each over a TLS handshake of its own."""
    lf.apply(FINISHED, "--psn", "0", "-N", "3", "--tasks-per-host", "6")

    def finished() -> bool:
        pods = lf.kube.pods(lf.ns, "simpletfjob/job=lf")
        return len([p for p in pods if p.get("status", {}).get("phase") == "Succeeded"]) == 18

    wait_for(finished, 180, "every task to end")
    with FaultProxy(lf.kube.url, ca_file=lf.kube.ca_file, tls=trustme.CA()) as proxy:
        config = proxy.kubeconfig(tmp_path / "proxied", token=lf.kube.admin_token, namespace=lf.ns)
        result = lf.cli("logs", "lf", *follow, "--tail", "-1", "--kubeconfig", str(config))
        assert result.code == 0, result.err
        by_task = prefixed(result.out)
        assert sorted(by_task) == sorted(f"worker-{i}" for i in range(18))
        for task, lines in by_task.items():
            assert lines == [f"{task} line {i}" for i in range(50)], task
        assert len(proxy.seen("get", "pods/log")) == 18
        # the readers' kept connections, and the lists' and watches' (fewer than the pods)
        assert proxy.connections <= ENDED_AT_ONCE + 2, proxy.connections


# -- a kubelet that cuts its log streams --------------------------------------------------------


THROUGH_A_CUT = """
if task["type"] == "ps":
    time.sleep(3600)
i = 0
while not (markers / "cut").exists() and i < 3000:
    say("line", i)
    i += 1
    time.sleep(0.05)
for _ in range(20):
    say("line", i)
    i += 1
    time.sleep(0.05)
say("end", i)
"""


@pytest.mark.parametrize("command", ["logs", "run"])
def test_logs_go_on_with_every_line_once_when_the_kubelet_cuts_its_streams(
    lf: LogRun, command: str
) -> None:
    """A kubelet that restarts ends the log streams it serves; the API server passes that on
    (as an answer cut short, or ended): each log is read on from its last line."""
    if command == "logs":
        lf.apply(THROUGH_A_CUT)
        live = Live("logs", "lf", "-f", "--role", "worker", "--tail", "-1",
                    "--kubeconfig", lf.kubeconfig)  # fmt: skip
    else:
        nodes = ",".join(lf.kubelet.nodes)
        live = Live("run", *lf.args(THROUGH_A_CUT), "--nodes", nodes, "--logs", "all",
                    "--cleanup", "none")  # fmt: skip
    try:
        live.saw("worker-0 | worker-0 line 20", 90)
        live.saw("worker-1 | worker-1 line 20", 30)
        assert lf.kubelet.cut_logs() >= 2
        lf.mark("cut")
        result = live.finish()
    finally:
        live.proc.kill()
    assert result.code == 0, result.err
    by_task = prefixed(result.out)
    for task in ("worker-0", "worker-1"):
        lines = by_task[task]
        assert lines[-1] == f"{task} end {len(lines) - 1}"
        assert lines[:-1] == [f"{task} line {i}" for i in range(len(lines) - 1)]
    assert "lost the API server" not in result.err


# -- a reader that goes away (| head -1) ------------------------------------------------------

CHATTY = """
if task["type"] == "ps":
    time.sleep(3600)
for i in range(6000):
    say("line", i)
    time.sleep(0.01)
"""


def into_head(*args: str) -> tuple[str, list[str]]:
    """`simpletfjob ARGS | head -1` in bash: head's one line, and stderr's lines, the last one
    the status of simpletfjob as bash has it (PIPESTATUS)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
    }
    script = '"$0" "$@" | head -1; echo "status ${PIPESTATUS[0]}" >&2'
    proc = subprocess.run(
        ["bash", "-c", script, console_script(), *args],
        capture_output=True, env=env, timeout=180, check=False,
    )  # fmt: skip
    return proc.stdout.decode(), proc.stderr.decode().splitlines()


def test_logs_follow_into_head_ends_with_141_and_no_line(lf: LogRun) -> None:
    lf.apply(CHATTY)
    wait_for(lambda: lf.running("worker-0") and lf.running("worker-1"), 60, "both workers")
    out, err = into_head("logs", "lf", "-f", "--role", "worker", "--kubeconfig", lf.kubeconfig)
    assert re.fullmatch(r"worker-\d \| worker-\d line \d+\n", out), out
    assert err == ["status 141"]


def test_run_into_head_stops_as_an_interrupt_and_says_what_it_leaves(lf: LogRun) -> None:
    """The reader of the logs gone, `run` stops as SIGPIPE stops kubectl, with 141; the run is
    left as an interrupt leaves it, and the last line says so."""
    nodes = ",".join(lf.kubelet.nodes)
    out, err = into_head("run", *lf.args(CHATTY), "--nodes", nodes, "-n", lf.ns)
    assert re.fullmatch(r"worker-0 \| worker-0 line \d+\n", out), out
    assert err[-1] == "status 141", err
    assert err[-2] == (
        f"simpletfjob: interrupted: run 'lf' is left running in namespace {lf.ns}; follow it "
        f"with simpletfjob wait lf -n {lf.ns}, or remove it with simpletfjob delete lf -n {lf.ns}"
    ), err
    assert not [line for line in err if "error" in line or "Exception" in line], err
    assert lf.running("worker-0")
