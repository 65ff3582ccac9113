"""Deletes that cannot hit the wrong object, and applies that say what they did.

`apply --replace` deletes nothing until the server's dry run has accepted every delete and
every new object; every delete (`delete`, `wait`'s cleanup, `--replace`) names the uid of
the object it listed, so a name another object took since is left alone; two applies of
one render at once behave as one after the other; an interrupted apply says how far it
got; a conflict with another field manager names it, and `--force-conflicts` takes over.

A name is taken over at a fixed point of the run: when the command prints the line of the
delete before it (the `Hooked` stderr), or, where the deletes go out several at a time, just
before they go (`run_taken_before`: after the list, and after --replace's dry runs), the test
deletes the object and creates an unlabelled one of the same name, on the real server,
through its own client.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from simpletfjob.cli import main
from tests.conftest import Result, assert_one_line_error, console_script, write
from tests.support.client import ApiFailure
from tests.support.cluster import Cluster, wait_for
from tests.support.runs import jobs, lines, services
from tests.support.templates import MNIST as TEMPLATE

NO_PODS = TEMPLATE.replace("  backoffLimit: 0\n", "  backoffLimit: 0\n  parallelism: 0\n")


def foreign_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"team": "other"}},
        "spec": {
            "parallelism": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            },
        },
    }


def take_over(cluster: Cluster, ns: str, name: str) -> Callable[[], None]:
    """Delete the run's Job `name` and create an unlabelled Job of that name in its place."""
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"

    def act() -> None:
        cluster.admin.delete(f"{path}/{name}", {"propagationPolicy": "Background"})

        def created() -> bool:
            try:
                cluster.create(path, foreign_job(name))
            except ApiFailure as e:
                if e.code != 409:  # AlreadyExists while the old one goes
                    raise
                return False
            return True

        wait_for(created, what=f"a foreign {name}")

    return act


class Hooked(io.StringIO):
    """stderr that does `action` once, as soon as `trigger` has been written."""

    def __init__(self, trigger: str, action: Callable[[], None]) -> None:
        super().__init__()
        self.trigger, self.action, self.fired = trigger, action, False

    def write(self, text: str) -> int:
        written = super().write(text)
        if not self.fired and self.trigger in self.getvalue():
            self.fired = True
            self.action()
        return written


def run_hooked(
    monkeypatch: pytest.MonkeyPatch, trigger: str, action: Callable[[], None], *args: str
) -> Result:
    """main(args) in-process, as the `cli` fixture runs it, with a Hooked stderr."""
    err = Hooked(trigger, action)
    out = io.StringIO()
    with monkeypatch.context() as m:
        m.setattr(sys, "stderr", err)
        m.setattr(sys, "stdout", out)
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
    assert err.fired, err.getvalue()
    return Result(code, out.getvalue(), err.getvalue())


def run_taken_before(
    monkeypatch: pytest.MonkeyPatch, target: str, action: Callable[[], None], *args: str
) -> Result:
    """main(args) in-process, `action` done once just before `target` (a module's function,
    'simpletfjob.runs.delete.delete_run') is called."""
    module, name = target.rsplit(".", 1)
    original = getattr(sys.modules[module], name)
    fired: list[bool] = []

    def hooked(*a: Any, **k: Any) -> Any:
        if not fired:
            fired.append(True)
            action()
        return original(*a, **k)

    out, err = io.StringIO(), io.StringIO()
    with monkeypatch.context() as m:
        m.setattr(sys.modules[module], name, hooked)
        m.setattr(sys, "stderr", err)
        m.setattr(sys, "stdout", out)
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
    assert fired, err.getvalue()
    return Result(code, out.getvalue(), err.getvalue())


def uids(cluster: Cluster, ns: str) -> dict[str, str]:
    return {name: job["metadata"]["uid"] for name, job in jobs(cluster, ns).items()}


# -- --replace checks before it deletes -----------------------------------------------------------


def test_replace_by_a_user_who_may_not_delete_services_deletes_nothing(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    assert run_in(ns)("--network", "pod").code == 0
    before = uids(cluster, ns)
    everything = ["get", "list", "watch", "create", "patch"]
    cluster.grant("carol", [*everything, "delete"], ["jobs"], namespace=ns, api_group="batch")
    cluster.grant("carol", everything, ["services"], namespace=ns)
    cluster.grant("carol", ["get", "list", "watch"], ["pods"], namespace=ns)
    refused = run_in(ns, "carol")("--network", "pod", "--replace", image="tensorflow/tensorflow")
    line = assert_one_line_error(
        refused,
        1,
        contains=(
            f"user 'carol' cannot delete services in namespace {ns}",
            "to delete service 'mnist-ps-0'",
            "(server dry run); --replace deleted nothing, and nothing of this render was applied",
        ),
    )
    assert "verb 'delete' on 'services'" in line
    assert uids(cluster, ns) == before
    assert sorted(services(cluster, ns)) == ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    for job in jobs(cluster, ns).values():
        assert not job["metadata"].get("deletionTimestamp")
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"


@pytest.mark.parametrize("cluster", ["real"], indirect=True)  # the loopback does not validate it
def test_replace_with_a_render_the_server_rejects_deletes_nothing(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    before = uids(cluster, ns)
    # The render's checks take it; the server's validation does not (an empty image).
    rejected = apply("--replace", image="")
    line = assert_one_line_error(
        rejected,
        1,
        contains=(
            "cannot apply job 'mnist-ps-0' in namespace",
            "(server dry run); --replace deleted nothing, and nothing of this render was applied",
        ),
    )
    assert "image" in line and "Required value" in line
    assert not re.search(r"mnist-ps-0\w{5}", line)  # the temporary name is not shown
    assert uids(cluster, ns) == before
    for job in jobs(cluster, ns).values():
        assert not job["metadata"].get("deletionTimestamp")
    # Nothing was made under a temporary name either.
    every = cluster.admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
    assert sorted(j["metadata"]["name"] for j in every) == sorted(before)


def test_replace_that_can_finish_still_replaces(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply("--network", "pod").code == 0
    before = uids(cluster, ns)
    replaced = apply("--network", "pod", "--replace", "--timeout", "60s", image="alpine")
    assert replaced.code == 0, replaced.err
    after = jobs(cluster, ns)
    assert sorted(after) == sorted(before) and not set(before.values()) & set(
        uids(cluster, ns).values()
    )
    assert {j["spec"]["template"]["spec"]["containers"][0]["image"] for j in after.values()} == {
        "alpine"
    }


# -- a name taken over between list and delete ---------------------------------------------------


def test_delete_leaves_alone_a_job_that_took_a_listed_name(
    cluster: Cluster, run_in: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    result = run_taken_before(
        monkeypatch,
        "simpletfjob.runs.delete.delete_run",
        take_over(cluster, ns, "mnist-worker-0"),
        "delete", "mnist", "--kubeconfig", apply.kubeconfig,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert lines(result) == [
        'job.batch "mnist-ps-0" deleted',
        "job.batch/mnist-worker-0 was replaced since it was listed; left alone",
        'job.batch "mnist-worker-1" deleted',
        f"simpletfjob: deleted run mnist in namespace {ns} (2 objects: 2 jobs, 0 services; "
        "1 left alone, replaced since listed)",
    ]
    (left,) = jobs(cluster, ns, "team=other").values()
    assert left["metadata"]["name"] == "mnist-worker-0"
    assert not left["metadata"].get("deletionTimestamp")


def test_wait_cleanup_leaves_alone_a_job_that_took_a_listed_name(
    cluster: Cluster, run_in: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    complete = {
        "type": "Complete",
        "status": "True",
        "lastProbeTime": "2026-11-26T08:00:00Z",
        "lastTransitionTime": "2026-11-26T08:00:00Z",
    }
    cluster.finish_job(
        ns, "mnist-worker-0",
        {"status": {"succeeded": 1, "startTime": "2026-11-26T07:00:00Z",
                    "completionTime": "2026-11-26T08:00:00Z", "conditions": [complete]}},
    )  # fmt: skip
    result = run_hooked(
        monkeypatch,
        "job.batch/mnist-ps-0 deleted",
        take_over(cluster, ns, "mnist-worker-1"),
        "wait", "mnist", "--kubeconfig", apply.kubeconfig, "--timeout", "60s",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "job.batch/mnist-worker-1 was replaced since it was listed; left alone" in lines(result)
    assert "job.batch/mnist-worker-1 deleted" not in lines(result)
    (left,) = jobs(cluster, ns, "team=other").values()
    assert left["metadata"]["name"] == "mnist-worker-1"
    assert not left["metadata"].get("deletionTimestamp")


def test_replace_leaves_alone_a_job_that_took_a_listed_name_and_applies_nothing(
    cluster: Cluster, run_in: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    result = run_taken_before(
        monkeypatch,
        "simpletfjob.runs.apply.delete_run",
        take_over(cluster, ns, "mnist-worker-0"),
        "apply", str(apply.template), "--nodes", "h1,h2,h3", "--set", "image=alpine",
        "--kubeconfig", apply.kubeconfig, "--replace", "--timeout", "60s",
    )  # fmt: skip
    assert result.code == 1, result.err
    *reported, error = lines(result)
    assert "job.batch/mnist-worker-0 was replaced since it was listed; left alone" in reported
    assert error.startswith("simpletfjob: error: job.batch/mnist-worker-0 replaced since listed")
    assert "nothing of this render was applied" in error
    (left,) = jobs(cluster, ns, "team=other").values()
    assert left["metadata"]["name"] == "mnist-worker-0"
    assert "simpletfjob/job" not in left["metadata"]["labels"]  # not taken over by the apply
    assert left["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"


# -- another field manager -----------------------------------------------------------------------


def test_a_conflict_with_another_field_manager_names_it_and_force_conflicts_takes_over(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    for name in ("mnist-ps-0", "mnist-worker-1"):  # as `kubectl patch job ... backoffLimit`
        cluster.admin.merge_patch(
            f"/apis/batch/v1/namespaces/{ns}/jobs/{name}",
            {"spec": {"backoffLimit": 3}},
            fieldManager="kubectl-patch",
        )
    refused = apply()
    line = assert_one_line_error(
        refused,
        1,
        contains=(
            f"cannot apply job 'mnist-ps-0' in namespace {ns}: .spec.backoffLimit is owned by "
            "field manager 'kubectl-patch' (409 Conflict)",
            "and 1 more: job.batch/mnist-worker-1",
            "nothing was applied",
            "apply again with --force-conflicts",
            "to leave them to 'kubectl-patch', remove them from the template",
        ),
    )
    assert "Apply failed" not in line
    assert {j["spec"]["backoffLimit"] for j in jobs(cluster, ns).values()} == {0, 3}

    forced = apply("--force-conflicts")
    assert forced.code == 0, forced.err
    assert lines(forced)[:3] == [
        "job.batch/mnist-ps-0 configured",
        "job.batch/mnist-worker-0 unchanged",
        "job.batch/mnist-worker-1 configured",
    ]
    assert {j["spec"]["backoffLimit"] for j in jobs(cluster, ns).values()} == {0}


# -- hints name the namespace and the context ----------------------------------------------------


def test_the_hint_of_a_run_being_deleted_names_namespace_and_context(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    held = f"/apis/batch/v1/namespaces/{ns}/jobs/mnist-worker-0"
    cluster.admin.merge_patch(held, {"metadata": {"finalizers": ["example.com/hold"]}})
    assert apply.delete().code == 0
    refused = apply("--context", cluster.name)
    assert_one_line_error(
        refused,
        1,
        contains=(f"(simpletfjob delete mnist -n {ns} --context {cluster.name} --wait)",),
    )
    cluster.admin.merge_patch(held, {"metadata": {"finalizers": None}})


# -- processes: two at once, and SIGINT -----------------------------------------------------------


def hosts(count: int) -> str:
    return ",".join(f"h{i}" for i in range(count))


# The writes an interrupt found out with no answer (the connection's in_flight at most).
IN_FLIGHT = (
    r"(?: \(((?:job\.batch/mnist-\w+-\d+(?:, )?)+(?: and \d+ more)?) (?:was|were) being "
    r"{verb}, with no answer yet: (?:it|they) may still be carried out\))?"
)


def in_flight(named: str | None) -> int:
    """How many writes 'job.batch/a, job.batch/b and 3 more' names."""
    if not named:
        return 0
    more = re.search(r" and (\d+) more$", named)
    shown = named[: more.start()] if more else named
    return len(shown.split(", ")) + (int(more[1]) if more else 0)


def start_apply(template: Path, kubeconfig: Path, count: int, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [console_script(), "apply", str(template), "--nodes", hosts(count), "--set",
         "image=busybox", "--kubeconfig", str(kubeconfig), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOME": str(template.parent)},
    )  # fmt: skip


def interrupt_once_said(proc: subprocess.Popen[str], said: int) -> tuple[str, str]:
    """SIGINT once `proc` has said `said` lines on stderr (an object each); then its output.

    The lines are read as they come, so that the signal lands while the command is still at
    work, however fast the cluster answers (a poll of the namespace's Jobs could miss it).
    """
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    enough = threading.Event()

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.append(line)
            if len(lines) >= said:
                enough.set()
        enough.set()

    reader = threading.Thread(target=read, args=(proc.stderr,), daemon=True)
    reader.start()
    assert enough.wait(timeout=120), "the command said too few lines"
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    proc.wait(timeout=60)
    reader.join(timeout=60)
    return out, "".join(lines)


def test_two_applies_of_one_render_at_once_behave_as_one_after_the_other(
    kube: Cluster, namespace: str, tmp_path: Path
) -> None:
    template = write(tmp_path / "mnist.yaml", NO_PODS)
    kubeconfig = kube.kubeconfig(tmp_path / "kc", namespace=namespace)
    first = start_apply(template, kubeconfig, 60)
    time.sleep(0.05)  # the second lists the run while the first applies it
    second = start_apply(template, kubeconfig, 60)
    said = {}
    for name, proc in (("first", first), ("second", second)):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (name, err)
        assert out == ""
        *objects, summary = err.splitlines()
        outcomes = dict(line.rsplit(" ", 1) for line in objects)
        assert len(outcomes) == 60 and set(outcomes.values()) <= {"created", "unchanged"}, err
        counts = {word: list(outcomes.values()).count(word) for word in ("created", "unchanged")}
        shown = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
        assert summary.endswith(f"({shown})"), summary
        said[name] = outcomes
    # Each object was created by exactly one of them, and found unchanged by the other.
    for ref, outcome in said["first"].items():
        assert {outcome, said["second"][ref]} == {"created", "unchanged"}, ref
    assert len(jobs(kube, namespace)) == 60


def test_sigint_during_an_apply_says_how_many_objects_were_applied_and_the_ways_on(
    kube: Cluster, namespace: str, tmp_path: Path
) -> None:
    template = write(tmp_path / "mnist.yaml", NO_PODS)
    kubeconfig = kube.kubeconfig(tmp_path / "kc", namespace=namespace)
    proc = start_apply(template, kubeconfig, 300, "--context", kube.name)
    out, err = interrupt_once_said(proc, 20)
    assert proc.returncode == 130, err
    assert out == ""
    *created, last = err.splitlines()
    found = re.fullmatch(
        r"simpletfjob: interrupted: applied (\d+) of 300 objects of run 'mnist' in namespace "
        rf"{namespace}{IN_FLIGHT.format(verb='applied')}; apply again to finish "
        rf"it, or remove it with simpletfjob delete mnist -n {namespace} --context {kube.name}",
        last,
    )
    assert found, last
    applied, out_then = int(found[1]), in_flight(found[2])
    # (20 Jobs were there: some may be those whose answers had not come)
    assert applied + out_then >= 20 and applied < 300 and out_then <= 8  # in_flight at most
    # Each said line is an object applied; the answers not yet said (at most in_flight) count.
    assert applied - 8 <= len(created) <= applied
    assert all(line.endswith(" created") for line in created)
    # Exactly so: of the writes with no answer then, any may have landed, and no other.
    time.sleep(2)
    assert applied <= len(jobs(kube, namespace)) <= applied + out_then

    again = start_apply(template, kubeconfig, 300)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert len(jobs(kube, namespace)) == 300


def test_sigint_during_a_delete_says_how_many_objects_were_deleted_and_how_to_go_on(
    kube: Cluster, namespace: str, tmp_path: Path
) -> None:
    template = write(tmp_path / "mnist.yaml", NO_PODS)
    kubeconfig = kube.kubeconfig(tmp_path / "kc", namespace=namespace)
    applied = start_apply(template, kubeconfig, 200)
    assert applied.wait(timeout=300) == 0
    proc = subprocess.Popen(
        [console_script(), "delete", "mnist", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    out, err = interrupt_once_said(proc, 20)
    assert proc.returncode == 130, err
    assert out == ""
    *deleted, last = err.splitlines()
    found = re.fullmatch(
        r"simpletfjob: interrupted: deleted (\d+) of 200 objects of run 'mnist' in namespace "
        rf"{namespace}{IN_FLIGHT.format(verb='deleted')}; delete the rest with "
        rf"simpletfjob delete mnist -n {namespace}",
        last,
    )
    assert found, last
    count, out_then = int(found[1]), in_flight(found[2])
    assert count + out_then >= 20 and count < 200 and out_then <= 8
    # Each said line is an object deleted; the answers not yet said (at most in_flight) count.
    assert count - 8 <= len(deleted) <= count
    assert all(line.endswith('" deleted') for line in deleted)
    # Exactly so: of the deletes with no answer then, any may have landed, and no other.
    time.sleep(2)
    assert count <= 200 - len(jobs(kube, namespace)) <= count + out_then
