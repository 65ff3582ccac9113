"""SIGINT, SIGTERM and SIGHUP end every command that talks to a cluster, in every phase, outage or
not: promptly, with 130, 143 or 129 and one last line that says what is true.

Each command runs as the installed console script (forked by tests/support/forkserver.py)
against the loopback API server behind the fault proxy (tests/support/faultproxy.py), which
fails the requests from the start, or once the command's watches are up. What a signal does
to a run on a real cluster, phase by phase (applying, following, deleting for a restart,
applying again), is in tests/control_plane/test_run_signals.py.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, console_script, open_cluster
from tests.support import forkserver
from tests.support.faultproxy import FaultProxy, Seen
from tests.support.kubeapi import KubeAPI, make_pod, serve
from tests.support.scenes import NS, finish_job, load_run

SCRIPT = console_script()
PROMPT = 30.0  # seconds: an end well within it is prompt, even on a loaded machine
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
TRAIN = "train"  # the namespace `run` applies to


class Proxied:
    """The loopback server with a run loaded in NS, behind the fault proxy, and a kubeconfig."""

    def __init__(self, api: KubeAPI, proxy: FaultProxy, kubeconfig: Path) -> None:
        self.api, self.proxy, self.kubeconfig = api, proxy, kubeconfig

    def start(self, *args: str) -> subprocess.Popen[str]:
        return forkserver.Popen(
            [SCRIPT, *args, "--kubeconfig", str(self.kubeconfig)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def proxied(kube_env: Path, tmp_path: Path) -> Iterator[Proxied]:
    with serve(open_cluster()) as api, FaultProxy(api.url) as proxy:
        load_run(api)
        api.load(
            "namespaces", [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TRAIN}}]
        )
        kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig", namespace=NS)
        yield Proxied(api, proxy, kubeconfig)


COMMANDS = {
    "status -w": ["status", "mnist", "-w"],
    "wait": ["wait", "mnist"],
    "wait --timeout": ["wait", "mnist", "--timeout", "1h"],
    "run": ["run", str(EXAMPLES / "mnist.yaml"), "--nodes", "h1,h2,h3", "-n", TRAIN],
    # These watch nothing: only from the start.
    "status": ["status", "mnist"],
    "status (every run)": ["status"],
    "nodes": ["nodes"],
    "delete --wait": ["delete", "mnist", "--wait"],
}
WATCHING = ("status -w", "wait", "wait --timeout", "run")
# The last line, where it says more than `simpletfjob: interrupted`.
SAID = {
    ("run", "from the start"): f"nothing of run 'mnist' was applied to namespace {TRAIN}",
    ("run", "once watching"): (
        f"run 'mnist' is left running in namespace {TRAIN}; follow it with simpletfjob wait "
        f"mnist -n {TRAIN}, or remove it with simpletfjob delete mnist -n {TRAIN}"
    ),
}


def failing_requests(proxy: FaultProxy, since: int) -> int:
    return len([r for r in proxy.requests[since:] if r.done == "500"])


def ended(proc: subprocess.Popen[str], signum: int) -> tuple[int, str, str, float]:
    """Send the signal; the exit status, stdout and stderr, and how long the end took."""
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=PROMPT * 4)
    finally:
        proc.kill()
    return proc.returncode, out, err, time.monotonic() - sent


PHASES = [(c, "from the start") for c in COMMANDS] + [(c, "once watching") for c in WATCHING]


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=["INT", "TERM", "HUP"])
@pytest.mark.parametrize(("command", "phase"), PHASES, ids=[f"{c}-{p}" for c, p in PHASES])
def test_every_signal_ends_a_command_whose_server_answers_500(
    proxied: Proxied, command: str, phase: str, signum: int, code: int
) -> None:
    """The issue's case: `status -w` with the server failing from the start swallowed the first
    SIGTERM (the Jobs' list, in the caller's thread, took it for the pods' thread's error) and
    then ignored every signal; the process went on for minutes."""
    proxy = proxied.proxy
    if phase == "from the start":
        proxy.fail(500)
        proc = proxied.start(*COMMANDS[command])
    else:
        proc = proxied.start(*COMMANDS[command])
        proxy.wait_for("watch", "jobs")
        proxy.wait_for("watch", "pods")
    since = len(proxy.requests)
    if phase == "once watching":
        proxy.fail(500)
        proxy.cut_streams()
    deadline = time.monotonic() + PROMPT
    while failing_requests(proxy, since) < 2:  # the command is retrying: inside the outage
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command made no request that failed"
        time.sleep(0.05)
    status, out, err, took = ended(proc, signum)
    assert status == code, err
    assert took < PROMPT, (took, err)
    said = SAID.get((command, phase))
    assert err.splitlines()[-1] == "simpletfjob: interrupted" + (f": {said}" if said else ""), err
    assert "Traceback" not in err and "internal error" not in err, err
    if command != "status -w":
        assert out == "", out


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=["INT", "TERM", "HUP"])
def test_a_second_signal_ends_a_cleanup_that_waits_on_a_server_that_stopped_answering(
    proxied: Proxied, signum: int, code: int
) -> None:
    """Once the first signal had come, every later one was ignored: a cleanup that waited on the
    server (`--on-interrupt delete`) could only be ended by SIGKILL."""
    proxy = proxied.proxy
    proc = proxied.start(*COMMANDS["run"], "--on-interrupt", "delete")
    proxy.wait_for("watch", "jobs")
    proxy.delay(3600)  # from now on, nothing is answered
    since = len(proxy.requests)
    proc.send_signal(signum)
    deadline = time.monotonic() + PROMPT
    # the cleanup has asked (a list or a delete, not a watch that a follower reopened as the
    # first signal came), and waits
    while not [r for r in proxy.requests[since:] if r.verb in ("list", "delete")]:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the cleanup made no request"
        time.sleep(0.05)
    status, out, err, took = ended(proc, signum)
    assert status == code, err
    assert took < PROMPT, (took, err)
    assert err.splitlines()[-1] == (
        "simpletfjob: interrupted: a second signal stopped the deleting of run 'mnist' "
        f"(--on-interrupt delete); see what is left with simpletfjob status mnist -n {TRAIN}, "
        f"and remove it with simpletfjob delete mnist -n {TRAIN}"
    ), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert out == ""


# -- apply, phase by phase --------------------------------------------------------------------

APPLY = ["apply", str(EXAMPLES / "mnist.yaml"), "--nodes", "h1,h2,h3", "-n", TRAIN]
HELD = 3.0  # seconds the proxy holds a write


def out_now(
    proxy: FaultProxy,
    verb: str,
    resource: str | None,
    dry_run: bool,
    count: int = 1,
    since: int = 0,
) -> None:
    """Wait until the `count`th such request (since the `since`th) is sent and held (not yet
    answered)."""
    deadline = time.monotonic() + PROMPT
    while True:
        seen = [
            r
            for r in proxy.requests[since:]
            if r.verb == verb and resource in (None, r.resource) and r.dry_run == dry_run
        ]
        if len(seen) >= count and not seen[count - 1].done:
            return
        assert time.monotonic() < deadline, f"no {verb} held"
        time.sleep(0.02)


def names(api: KubeAPI) -> set[str]:
    return {job["metadata"]["name"] for job in api.objects("jobs", TRAIN)}


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=["INT", "TERM", "HUP"])
def test_apply_interrupted_in_its_server_dry_runs_has_applied_nothing(
    proxied: Proxied, signum: int, code: int
) -> None:
    proxied.proxy.delay(HELD, verb="apply", dry_run=True)
    proc = proxied.start(*APPLY)
    out_now(proxied.proxy, "apply", None, dry_run=True, count=1)  # one shape: one dry run
    status, out, err, took = ended(proc, signum)
    assert (status, out, err) == (code, "", "simpletfjob: interrupted\n")
    assert took < PROMPT
    time.sleep(HELD + 0.5)
    assert names(proxied.api) == set()  # a dry run changes nothing


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=["INT", "TERM", "HUP"])
def test_apply_interrupted_with_a_write_out_names_it_as_maybe_carried_out(
    proxied: Proxied, signum: int, code: int
) -> None:
    proxied.proxy.delay(HELD, verb="apply", dry_run=False)
    proc = proxied.start(*APPLY)
    out_now(proxied.proxy, "apply", "jobs", dry_run=False, count=2)
    # worker-0 decides the run: it goes alone first, and the others once it is answered.
    seen = [r for r in proxied.proxy.seen("apply", "jobs") if not r.dry_run]
    assert held_name(seen[0]) == "mnist-worker-0", seen
    held = {held_name(r) for r in seen if not r.done}
    status, _out, err, took = ended(proc, signum)
    assert status == code and took < PROMPT, err
    applied, out = cut_short(
        err.splitlines()[-1],
        "applied",
        3,
        f"; apply again to finish it, or remove it with simpletfjob delete mnist -n {TRAIN}",
    )
    # The writes go several at a time: those held when the signal came are named as out; one
    # whose thread had not sent it yet (a loaded machine) is withdrawn, and named nowhere.
    said = {ref.removeprefix("job.batch/") for ref in out}
    assert applied >= 1 and held and held <= said and applied + len(out) <= 3, (held, err)
    deadline = time.monotonic() + PROMPT  # the held writes are carried out: the line said so
    while not held <= names(proxied.api):
        assert time.monotonic() < deadline, (held, names(proxied.api))
        time.sleep(0.05)
    time.sleep(HELD + 0.5)  # any other write named as out has had its time
    assert len(names(proxied.api) - said) <= applied, (names(proxied.api), err)


def held_name(request: Seen) -> str:
    """The name of the object a request applies: the last part of its path."""
    return request.path.rstrip("/").rpartition("/")[2]


def cut_short(line: str, verb: str, total: int, ways_on: str) -> tuple[int, list[str]]:
    """'simpletfjob: interrupted: applied N of 3 objects ... (A, B were being applied, with no
    answer yet: they may still be carried out); ...': N, and the writes named as out."""
    found = re.fullmatch(
        rf"simpletfjob: interrupted: {verb} (\d+) of {total} objects of run 'mnist' in namespace "
        rf"{TRAIN} \((.+?) (?:was|were) being {verb}, with no answer yet: (?:it|they) may still "
        rf"be carried out\){re.escape(ways_on)}",
        line,
    )
    assert found, line
    return int(found[1]), found[2].split(", ")


def apply_first(proxied: Proxied) -> None:
    done = forkserver.run(
        [SCRIPT, *APPLY, "--kubeconfig", str(proxied.kubeconfig)],
        capture_output=True,
        timeout=PROMPT * 4,
    )
    assert done.returncode == 0, done.stderr
    assert len(names(proxied.api)) == 3


@pytest.mark.parametrize(("signum", "code"), SIGNALS, ids=["INT", "TERM", "HUP"])
def test_apply_replace_interrupted_while_deleting_the_old_run(
    proxied: Proxied, signum: int, code: int
) -> None:
    apply_first(proxied)
    proxied.proxy.delay(HELD, verb="delete", dry_run=False)
    proc = proxied.start(*APPLY, "--replace")
    out_now(proxied.proxy, "delete", "jobs", dry_run=False)
    status, _out, err, took = ended(proc, signum)
    assert status == code and took < PROMPT, err
    deleted, out = cut_short(
        err.splitlines()[-1],
        "deleted",
        3,
        "; nothing of this render was applied: apply again with --replace, or remove the run "
        f"with simpletfjob delete mnist -n {TRAIN}",
    )
    # The Jobs' deletes go at once (the Services' after them): held, none answered.
    assert deleted == 0 and "job.batch/mnist-ps-0" in out, err
    assert set(out) <= {
        "job.batch/mnist-ps-0",
        "job.batch/mnist-worker-0",
        "job.batch/mnist-worker-1",
    }


# -- wait, once the verdict is known ----------------------------------------------------------


def test_wait_interrupted_in_its_cleanup_says_the_verdict_and_what_is_left(
    proxied: Proxied,
) -> None:
    proxy, api = proxied.proxy, proxied.api
    proxy.delay(HELD, verb="delete")
    proc = proxied.start("wait", "mnist")
    proxy.wait_for("watch", "jobs")
    proxy.wait_for("watch", "pods")
    finish_job(api, "mnist-worker-0")
    out_now(proxy, "delete", "jobs", dry_run=False)
    status, out, err, took = ended(proc, signal.SIGTERM)
    assert (status, out) == (143, "") and took < PROMPT, err
    assert err.splitlines()[-1] == (
        "simpletfjob: interrupted: run mnist succeeded: worker-0 Succeeded; its cleanup "
        "(--cleanup running) was cut short: it deleted 0 of 4 objects (job.batch/mnist-ps-0 "
        "was being deleted, with no answer yet: it may still be carried out); "
        "job.batch/mnist-worker-1, service/mnist-ps-0, service/mnist-worker-1 are left; "
        "finish it with "
        f"simpletfjob wait mnist -n {NS}"
    )
    proxy.clear()  # and the way on it gives does finish it
    again = forkserver.run(
        [SCRIPT, "wait", "mnist", "--kubeconfig", str(proxied.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=PROMPT * 4,
    )
    assert again.returncode == 0, again.stderr
    assert {job["metadata"]["name"] for job in api.objects("jobs", NS)} == {"mnist-worker-0"}


def pods_on_a_node(proxied: Proxied) -> list[str]:
    """A Running pod on node n1 for each Job of the run: a Foreground delete waits for them."""
    api = proxied.api
    names = []
    for job in api.objects("jobs", TRAIN):
        name = f"{job['metadata']['name']}-x"
        labels = dict(job["metadata"]["labels"])
        api.load("pods", [make_pod(name, TRAIN, node="n1", owner=job, labels=labels)])
        names.append(name)
    return names


def test_apply_replace_interrupted_while_the_old_run_goes(proxied: Proxied) -> None:
    apply_first(proxied)
    pods = pods_on_a_node(proxied)
    proc = proxied.start(*APPLY, "--replace")
    # Every delete answered; the Jobs stay, being deleted, while their pods terminate.
    deadline = time.monotonic() + PROMPT
    while not (
        len(deletes := [r for r in proxied.proxy.seen("delete", "jobs") if not r.dry_run]) == 3
        and all(r.done for r in deletes)
        and proxied.proxy.seen("watch", "jobs")
    ):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    status, out, err, took = ended(proc, signal.SIGTERM)
    assert (status, out) == (143, "") and took < PROMPT, err
    assert err.splitlines()[-1] == (
        "simpletfjob: interrupted: the old run 'mnist' was deleted (--replace), and nothing of "
        "this render was applied; apply again (a plain apply, once it is gone)"
    )
    assert all(j["metadata"].get("deletionTimestamp") for j in proxied.api.objects("jobs", TRAIN))
    for pod in pods:  # the kubelet: the pods have stopped; the old run goes, as the line said
        proxied.api.force_delete(pod, TRAIN)
    assert names(proxied.api) == set()


def test_apply_replace_interrupted_while_applying_again(proxied: Proxied) -> None:
    apply_first(proxied)
    since = len(proxied.proxy.requests)
    proxied.proxy.delay(HELD, verb="apply", dry_run=False)
    proc = proxied.start(*APPLY, "--replace")
    out_now(proxied.proxy, "apply", "jobs", dry_run=False, count=2, since=since)
    status, out, err, took = ended(proc, signal.SIGHUP)
    assert (status, out) == (129, "") and took < PROMPT, err
    applied, sent = cut_short(
        err.splitlines()[-1],
        "applied",
        3,
        f"; apply again to finish it, or remove it with simpletfjob delete mnist -n {TRAIN}",
    )
    # worker-0 (the deciding Job) went alone first and was answered; the others were out (one
    # whose thread had not begun it is withdrawn, and named nowhere).
    others = {"job.batch/mnist-ps-0", "job.batch/mnist-worker-1"}
    assert applied == 1 and sent and set(sent) <= others, err


def test_signals_one_after_another_end_it_with_the_first_ones_status(proxied: Proxied) -> None:
    proxied.proxy.delay(3600)  # nothing is answered: each signal lands in a wait
    proc = proxied.start(*COMMANDS["run"], "--on-interrupt", "delete")
    deadline = time.monotonic() + PROMPT
    while not proxied.proxy.requests:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    sent = time.monotonic()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        if proc.poll() is None:
            proc.send_signal(signum)
            time.sleep(0.2)
    try:
        out, err = proc.communicate(timeout=PROMPT * 4)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert time.monotonic() - sent < PROMPT
    assert out == "" and err.splitlines()[-1].startswith("simpletfjob: interrupted"), err
    assert "Traceback" not in err, err
