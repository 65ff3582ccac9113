"""SIGINT, SIGTERM and SIGHUP in every phase of `run`, on the real control plane with the kubelet
stand-in, behind the fault proxy (tests/support/faultproxy.py), which makes a phase last: writes
held as by a slow admission webhook, deletes that take their time, pods that stop only at the
end of their grace period.

The phases: applying (the first attempt, and a restart's), following, deleting for a restart
(the deletes out, then waiting for the run to be gone), and once the verdict is known (the
cleanup, the logs read out). In each, the last line must be true when the process has ended,
and `--on-interrupt delete` must leave nothing of the run, or only what the cleanup keeps once
the run has ended. runs/interventions.py says what each phase says.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.conftest import console_script, write
from tests.support import forkserver
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.faultproxy import FaultProxy, Seen
from tests.support.kubelet import Kubelet
from tests.support.scenes import stand_in_nodes
from tests.support.templates import SIGNALLED as TEMPLATE

SCRIPT = """\
import json, os, pathlib, signal, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}-{task['index']}"
markers, mode, seconds = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
if "stubborn" in mode:  # stops only when its grace period is over (SIGKILL)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(name, "started", flush=True)
if task["type"] == "ps":
    time.sleep(3600)
if name == "worker-1" and "fail-once" in mode and not (markers / "failed").exists():
    (markers / "failed").write_text("x")
    time.sleep(1)
    print(name, "failing", flush=True)
    sys.exit(1)
time.sleep(seconds)
print(name, "done", flush=True)
"""

SCRIPT_PATH = console_script()
PROMPT = 60.0  # seconds: an end within it is prompt here, with a settle and a delete to do
HELD = 5.0  # seconds the proxy holds a write
SELECTOR = "app.kubernetes.io/managed-by=simpletfjob,simpletfjob/job=rs"


class Signalled:
    """The test's nodes, template and proxy; `run` as a user starts it, through the proxy."""

    def __init__(
        self, kube: ControlPlane, proxy: FaultProxy, ns: str, tmp: Path, label: str
    ) -> None:
        self.kube, self.proxy, self.ns, self.label = kube, proxy, ns, label
        self.template = write(tmp / "rs.yaml", TEMPLATE)
        self.script = write(tmp / "task.py", SCRIPT)
        self.markers = tmp / "markers"
        self.markers.mkdir()
        self.kubeconfig = proxy.kubeconfig(
            tmp / "kc", token=kube.admin_token, namespace=ns, context="proxied"
        )

    def start(self, *args: str, mode: str = "ok", seconds: float = 3600) -> subprocess.Popen[str]:
        return forkserver.Popen(
            [
                SCRIPT_PATH, "run", str(self.template), "-l", f"rs={self.label}",
                "--address", "internal-ip", "--kubeconfig", str(self.kubeconfig),
                "--set", f"script={self.script}", "--set", f"markers={self.markers}",
                "--set", f"mode={mode}", "--set", f"seconds={seconds}", *args,
            ],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def jobs(self) -> dict[str, dict[str, Any]]:
        answer = self.kube.admin.get(
            f"/apis/batch/v1/namespaces/{self.ns}/jobs", labelSelector="simpletfjob/job=rs"
        )
        return {job["metadata"]["name"]: job for job in answer["items"]}

    def pods(self) -> list[dict[str, Any]]:
        answer = self.kube.admin.get(
            f"/api/v1/namespaces/{self.ns}/pods", labelSelector="simpletfjob/job=rs"
        )
        return list(answer["items"])

    def out_now(self, verb: str, resource: str, since: int = 0, count: int = 1) -> Seen:
        """Wait until the `count`th real (not dry-run) `verb` of `resource` since `since` is out,
        its answer not yet come; that request."""

        def found() -> Seen | None:
            seen = [
                r
                for r in self.proxy.requests[since:]
                if (r.verb, r.resource) == (verb, resource) and not r.dry_run
            ]
            return seen[count - 1] if len(seen) >= count and not seen[count - 1].done else None

        return wait_for(found, timeout=120, what=f"a {verb} of {resource} out")


@pytest.fixture
def signalled(kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Signalled]:
    nodes, label = stand_in_nodes("rs", 3, label_key="rs")
    with (
        Kubelet(kube, nodes, tmp_path / "kubelet"),
        FaultProxy(kube.url, ca_file=kube.ca_file, tls=trustme.CA()) as proxy,
    ):
        yield Signalled(kube, proxy, namespace, tmp_path, label)


def ended(proc: subprocess.Popen[str], signum: int) -> tuple[int, str, float]:
    """Send the signal: the exit status, stderr, and how long the end took."""
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=PROMPT * 3)
    finally:
        proc.kill()
    assert "Traceback" not in err and "internal error" not in err, err
    return proc.returncode, err, time.monotonic() - sent


def last_line(err: str) -> str:
    line = err.splitlines()[-1]
    assert line.startswith("simpletfjob: interrupted: "), err
    return line.removeprefix("simpletfjob: interrupted: ")


# The writes an interrupt found out with no answer: 'job.batch/a was' or 'job.batch/a, job.batch/b were'.
OUT = (
    r"\(((?:job\.batch/rs-\w+-\d+(?:, )?)+) (?:was|were) being {verb}, with no answer yet: "
    r"(?:it|they) may still be carried out\)"
)


def hold_the_restarts_applies(s: Signalled) -> int:
    """Once the first attempt's applies of its 2 Jobs are answered, the proxy holds every later
    real apply of a Job (HELD s): set before the restart begins, however fast it then goes (held
    only once its deletes were seen answered, its applies had sometimes passed already); where
    the requests were then."""

    def applied() -> bool:
        return sum(1 for r in s.proxy.seen("apply", "jobs") if not r.dry_run and r.done) >= 2

    wait_for(applied, timeout=120, what="the first attempt's applies answered")
    since = len(s.proxy.requests)
    s.proxy.delay(HELD, verb="apply", resource="jobs", dry_run=False)
    return since


def restarted(s: Signalled) -> int:
    """Wait until the restart's deletes have all been answered, one for each of the run's Jobs
    (each goes out from a thread of its own: on a loaded machine one may come after another's
    answer); where the requests were then."""
    wait_for(lambda: s.proxy.seen("delete", "jobs"), timeout=120, what="the restart's deletes")

    def answered() -> bool:
        deletes = s.proxy.seen("delete", "jobs")
        return len(deletes) >= len(s.jobs()) and all(r.done for r in deletes)

    wait_for(answered, timeout=120, what="answers to a delete of each Job")
    return len(s.proxy.requests)


# -- applying ----------------------------------------------------------------------------------


@pytest.mark.parametrize("attempt", ["first", "restart"])
def test_on_interrupt_delete_during_a_slow_apply_settles_it_and_leaves_nothing(
    signalled: Signalled, attempt: str
) -> None:
    """The issue's case: the run was listed and deleted while a Job's apply was still held;
    that Job was created afterwards and kept running, and the line said `1 objects`."""
    s = signalled
    if attempt == "first":
        s.proxy.delay(HELD, verb="apply", resource="jobs", dry_run=False)
        proc = s.start("-N", "2", "--psn", "0", "--on-interrupt", "delete")
        since = 0
    else:
        proc = s.start(
            "-N", "2", "--psn", "0", "--max-restarts", "1", "--on-interrupt", "delete",
            mode="fail-once",
        )  # fmt: skip
        since = hold_the_restarts_applies(s)
        restarted(s)
    s.out_now("apply", "jobs", since, count=2)  # one Job applied, the other one's apply held
    code, err, took = ended(proc, signal.SIGTERM)
    assert code == 143, err
    assert took < PROMPT, (took, err)
    assert last_line(err) == (
        f"run 'rs' deleted (--on-interrupt delete): 2 Jobs in namespace {s.ns}; none of its "
        "Jobs and Services is left (the garbage collector stops their pods)"
    )
    assert s.jobs() == {}  # true when it was said
    time.sleep(HELD + 1)  # and no write that was held lands afterwards
    assert s.jobs() == {}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_an_interrupt_during_a_slow_apply_says_what_was_applied_and_what_may_still_be(
    signalled: Signalled, signum: int, code: int
) -> None:
    s = signalled
    s.proxy.delay(HELD, verb="apply", resource="jobs", dry_run=False)
    proc = s.start("-N", "2", "--psn", "0")
    s.out_now("apply", "jobs", count=2)
    status, err, took = ended(proc, signum)
    assert status == code and took < PROMPT, (took, err)
    found = re.fullmatch(
        rf"applied (\d) of 2 objects of run 'rs' in namespace {s.ns} {OUT.format(verb='applied')}; "
        f"run it again to finish it, or remove it with simpletfjob delete rs -n {s.ns}",
        last_line(err),
    )
    assert found, err
    # The writes go several at a time: each is either said applied, or named as out.
    out = found[2].split(", ")
    assert "job.batch/rs-worker-1" in out and int(found[1]) + len(out) == 2, err
    wait_for(lambda: len(s.jobs()) == 2, timeout=60, what="the held applies carried out")
    assert set(s.jobs()) == {"rs-worker-0", "rs-worker-1"}


def test_an_interrupt_during_a_restarts_apply_says_the_run_was_deleted_for_it(
    signalled: Signalled,
) -> None:
    s = signalled
    proc = s.start("-N", "2", "--psn", "0", "--max-restarts", "1", mode="fail-once")
    since = hold_the_restarts_applies(s)
    restarted(s)
    s.out_now("apply", "jobs", since, count=2)
    status, err, _ = ended(proc, signal.SIGHUP)
    assert status == 129, err
    found = re.fullmatch(
        r"run 'rs' was deleted for restart 1/1 \((.+)\); of its next attempt, applied (\d) of 2 "
        rf"objects of run 'rs' in namespace {s.ns} {OUT.format(verb='applied')}; run it again "
        rf"to finish it, or remove it with simpletfjob delete rs -n {s.ns}",
        last_line(err),
    )
    assert found, err
    assert found[1].startswith("worker-1 "), err
    out = found[3].split(", ")
    assert "job.batch/rs-worker-1" in out and int(found[2]) + len(out) == 2, err


# -- following -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_on_interrupt_delete_while_following_says_so_once_nothing_is_left(
    signalled: Signalled, signum: int, code: int
) -> None:
    s = signalled
    proc = s.start("-N", "3", "--on-interrupt", "delete")
    s.proxy.wait_for("watch", "pods")
    status, err, took = ended(proc, signum)
    assert status == code and took < PROMPT, (took, err)
    assert last_line(err) == (
        f"run 'rs' deleted (--on-interrupt delete): 3 Jobs in namespace {s.ns}; none of its "
        "Jobs and Services is left (the garbage collector stops their pods)"
    )
    assert s.jobs() == {}


# -- deleting for a restart -------------------------------------------------------------------


def test_an_interrupt_while_the_restarts_deletes_are_out_says_how_far_they_got(
    signalled: Signalled,
) -> None:
    """It said `run 'intr' is left running ...; follow it with simpletfjob wait intr`, while the
    run was being deleted and was soon gone."""
    s = signalled
    s.proxy.delay(HELD, verb="delete", resource="jobs")
    proc = s.start("-N", "2", "--psn", "0", "--max-restarts", "1", mode="fail-once")
    s.out_now("delete", "jobs")
    status, err, _ = ended(proc, signal.SIGINT)
    assert status == 130, err
    found = re.fullmatch(
        r"run 'rs' was being deleted for restart 1/1 \((.+)\): deleted 0 of 2 objects of run "
        rf"'rs' in namespace {s.ns} {OUT.format(verb='deleted')}; nothing of its next attempt "
        rf"was applied; remove the rest with simpletfjob delete rs -n {s.ns} --wait, "
        r"then run it again",
        last_line(err),
    )
    assert found, err
    # The deletes go several at a time, all held: a Job not named as out was not deleted.
    held = {name.removeprefix("job.batch/") for name in found[2].split(", ")}
    assert held <= {"rs-worker-0", "rs-worker-1"}, err
    for other in {"rs-worker-0", "rs-worker-1"} - held:
        assert not s.jobs()[other]["metadata"].get("deletionTimestamp")


def test_an_interrupt_before_the_restarts_first_delete_says_nothing_was_deleted(
    signalled: Signalled,
) -> None:
    s = signalled
    proc = s.start("-N", "2", "--psn", "0", "--max-restarts", "1", mode="fail-once")
    s.proxy.wait_for("watch", "pods")  # applied; the next list of Services is the restart's
    since = len(s.proxy.requests)
    s.proxy.delay(HELD, verb="list", resource="services")
    wait_for(
        lambda: [
            r
            for r in s.proxy.requests[since:]
            if r.verb == "list" and r.resource == "services" and not r.done
        ],  # not another list under way then (the failed task's pods, say)
        timeout=120,
        what="the restart's list held",
    )
    status, err, _ = ended(proc, signal.SIGINT)
    assert status == 130, err
    found = re.fullmatch(
        r"run 'rs' was to be deleted for restart 1/1 \((.+)\), and nothing of it was deleted: "
        rf"it is left as it is; remove it with simpletfjob delete rs -n {s.ns} --wait, then "
        "run it again",
        last_line(err),
    )
    assert found, err
    jobs = s.jobs()
    assert set(jobs) == {"rs-worker-0", "rs-worker-1"}
    assert not any(job["metadata"].get("deletionTimestamp") for job in jobs.values())


def test_on_interrupt_delete_while_the_restarts_deletes_are_out_finishes_the_delete(
    signalled: Signalled,
) -> None:
    s = signalled
    s.proxy.delay(HELD, verb="delete", resource="jobs")
    bundles = s.markers.parent / "bundles"
    bundles.mkdir()
    proc = s.start(
        "-N", "2", "--psn", "0", "--max-restarts", "1", "--on-interrupt", "delete",
        "--diagnose-on-failure", str(bundles), mode="fail-once",
    )  # fmt: skip
    s.out_now("delete", "jobs")
    # the failed attempt's bundle is written before the restart deletes anything
    (bundle,) = bundles.iterdir()
    assert re.fullmatch(r"rs-attempt-1-diagnose-\d{8}T\d{6}Z\.tar\.gz", bundle.name), bundle
    status, err, took = ended(proc, signal.SIGHUP)
    assert status == 129 and took < PROMPT, (took, err)
    # The restart's deletes, settled, may have deleted them all (Background) before it lists.
    assert re.fullmatch(
        rf"run 'rs' deleted \(--on-interrupt delete\): (nothing|1 Job|2 Jobs) in namespace "
        rf"{s.ns}; none of its Jobs and Services is left \(the garbage collector stops their "
        r"pods\)",
        last_line(err),
    ), err
    assert s.jobs() == {}


def test_a_restart_starts_no_task_while_a_pod_of_the_old_attempt_is_still_stopping(
    signalled: Signalled,
) -> None:
    """The old attempt's Jobs go at once (Background), its pods take their grace period (the
    stubborn tasks ignore SIGTERM): no Job of the new attempt may exist while one of those
    pods does, as it holds its port."""
    s = signalled
    proc = s.start(
        "-N", "2", "--psn", "0", "--max-restarts", "1", mode="fail-once stubborn", seconds=10
    )  # fmt: skip

    # Both of the first attempt's Jobs: apply sends the deciding one (worker-0) alone first.
    def both() -> set[str]:
        uids = {job["metadata"]["uid"] for job in s.jobs().values()}
        return uids if len(uids) == 2 else set()

    old_jobs = wait_for(both, timeout=120, what="both of the first attempt's Jobs")
    old_pods: set[str] = set()
    gone_at = new_at = 0.0
    while proc.poll() is None:
        jobs = s.jobs()  # the Jobs first, then the pods: a new Job seen before an old pod is
        pods = s.pods()  # one made while that pod was there
        new = [job for job in jobs.values() if job["metadata"]["uid"] not in old_jobs]
        alive = [pod for pod in pods if pod["metadata"]["uid"] in old_pods]
        if not new:
            old_pods |= {pod["metadata"]["uid"] for pod in pods}
            old_jobs |= {job["metadata"]["uid"] for job in jobs.values()}
        if not new and not jobs and alive:
            gone_at = gone_at or time.monotonic()  # the old Jobs gone, their pods not yet
        assert not (new and alive), (new, alive)
        if new and not new_at:
            new_at = time.monotonic()
        time.sleep(0.1)
    _out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert "restarting run rs (1/1) after" in err, err
    # It was the pods that were waited for: their Jobs were gone seconds before.
    assert gone_at and new_at - gone_at > 3, (gone_at, new_at, err)


@pytest.mark.parametrize("on_interrupt", ["leave", "delete"])
def test_an_interrupt_while_waiting_for_the_run_to_go_for_a_restart(
    signalled: Signalled, on_interrupt: str
) -> None:
    s = signalled  # the pods ignore SIGTERM: they stay, stopping, for their grace period
    proc = s.start(
        "-N", "2", "--psn", "0", "--max-restarts", "1", "--on-interrupt", on_interrupt,
        mode="fail-once stubborn",
    )  # fmt: skip
    restarted(s)
    # Background: the Jobs are gone at once; the restart waits for their pods.
    wait_for(lambda: s.jobs() == {}, timeout=60, what="the Jobs gone")
    wait_for(
        lambda: (pods := s.pods()) and all(p["metadata"].get("deletionTimestamp") for p in pods),
        timeout=60,
        what="the pods stopping (the garbage collector deletes them)",
    )
    status, err, took = ended(proc, signal.SIGTERM)
    assert status == 143 and took < PROMPT, (took, err)
    if on_interrupt == "leave":
        found = re.fullmatch(
            r"run 'rs' is being deleted for restart 1/1 \((.+)\): each of its Jobs and Services "
            "was deleted, and its pods are stopping; nothing of its next attempt was applied; "
            rf"once they are gone \(kubectl get pods -l {re.escape(SELECTOR)} -n {s.ns}\), run "
            "it again",
            last_line(err),
        )
        assert found, err
    else:
        # Nothing of the run is left to delete: its pods were stopping already.
        assert last_line(err) == (
            f"run 'rs' deleted (--on-interrupt delete): nothing in namespace {s.ns}; none of "
            "its Jobs and Services is left (the garbage collector stops their pods)"
        ), err
    assert s.jobs() == {}  # nothing of the next attempt was applied


# -- once the verdict is known ------------------------------------------------------------------


@pytest.mark.parametrize("on_interrupt", ["leave", "delete"])
def test_an_interrupt_during_the_cleanup_reports_the_verdict_and_keeps_what_the_cleanup_keeps(
    signalled: Signalled, on_interrupt: str
) -> None:
    """It said `run 'e24' is left running ...` of a run that had succeeded, and with
    --on-interrupt delete deleted the finished worker-0 and its logs."""
    s = signalled
    s.proxy.delay(HELD, verb="delete", resource="jobs")  # only the cleanup deletes here
    proc = s.start("-N", "3", "--on-interrupt", on_interrupt, "--logs", "none", seconds=2)
    s.out_now("delete", "jobs")
    status, err, took = ended(proc, signal.SIGTERM)
    assert status == 143 and took < PROMPT, (took, err)
    verdict = "run rs succeeded: worker-0 Succeeded; its cleanup (--cleanup running) was cut short"
    if on_interrupt == "leave":
        found = re.fullmatch(
            rf"{re.escape(verdict)}: it deleted 0 of \d objects \(job\.batch/rs-ps-0 was being "
            r"deleted, with no answer yet: it may still be carried out\)(; (.*) (is|are) left)?; "
            rf"finish it with simpletfjob wait rs -n {s.ns}",
            last_line(err),
        )
        assert found, err
        # What it says is left is there (worker-1, if it had not finished at the verdict).
        left = [ref.removeprefix("job.batch/") for ref in (found[2] or "").split(", ") if ref]
        assert set(left) <= set(s.jobs()), (left, s.jobs().keys())
    else:
        assert last_line(err) == (
            f"{verdict} and then finished: --on-interrupt delete deletes no more than the "
            "cleanup, once the run has ended"
        )
        assert "rs-ps-0" not in s.jobs()
    # The task that decided is kept, with its pod and logs: the cleanup keeps finished tasks.
    assert "rs-worker-0" in s.jobs()
    assert not s.jobs()["rs-worker-0"]["metadata"].get("deletionTimestamp")


def test_an_interrupt_while_the_logs_are_read_out_reports_the_verdict(
    signalled: Signalled,
) -> None:
    s = signalled
    s.proxy.delay(3600, verb="get", resource="pods/log")  # the logs never come
    proc = s.start("-N", "3", "--on-interrupt", "delete", seconds=2)
    wait_for(lambda: s.proxy.seen("delete", "jobs"), timeout=120, what="the cleanup")
    wait_for(
        lambda: all(r.done for r in s.proxy.seen("delete", "jobs")), timeout=60, what="answers"
    )
    time.sleep(1)  # the cleanup is done: run waits for the logs to be read out
    status, err, _ = ended(proc, signal.SIGTERM)
    assert status == 143, err
    assert last_line(err) == (
        "run rs succeeded: worker-0 Succeeded; its cleanup (--cleanup running) was done, and "
        f"its logs were cut short (simpletfjob logs rs -n {s.ns} reads them)"
    )
    assert "rs-worker-0" in s.jobs()
