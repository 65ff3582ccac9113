"""apply's requests a few at a time: the reads, the server's dry runs and the real writes go
out `in_flight` at once (counted at the loopback server), and what apply says is as it was:
its lines in the render's order, 429s with Retry-After ridden out, the first refusal in
the render's order said, nothing changed before every dry run has passed, and a refusal
half-way counting every write that landed.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import assert_one_line_error, write
from tests.support.kubeapi import ApiError, KubeAPI, write_kubeconfig
from tests.support.templates import MNIST as TEMPLATE

NS = "train"
HOSTS = 20
SPEC = {
    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}
}


def namespace(kubeapi: KubeAPI) -> None:
    if not any(n["metadata"]["name"] == NS for n in kubeapi.objects("namespaces")):
        kubeapi.create("namespaces", {"metadata": {"name": NS}})


def apply(cli: Any, kubeapi: KubeAPI, tmp_path: Path, *args: str) -> Any:
    namespace(kubeapi)
    template = write(tmp_path / "mnist.yaml", TEMPLATE)
    kubeconfig = write_kubeconfig(tmp_path / "kc", kubeapi.url, namespace=NS)
    hosts = ",".join(f"h{i}" for i in range(HOSTS))
    return cli(
        "apply", str(template), "--nodes", hosts, "--set", "image=busybox",
        "--kubeconfig", str(kubeconfig), *args,
    )  # fmt: skip


def objects(err: str) -> list[str]:
    """apply's line for each object, in the order said (on stderr, as kubectl's go to stdout)."""
    return [line for line in err.splitlines() if line.startswith("job.batch/")]


def in_render_order() -> list[str]:
    """What `render` makes of those hosts: a ps on the first, a worker on each other one."""
    return ["job.batch/mnist-ps-0"] + [f"job.batch/mnist-worker-{i}" for i in range(HOSTS - 1)]


def before_each_job_write(kubeapi: KubeAPI, call: Callable[[str], None]) -> None:
    """`call` with the Job's name before the server carries out each real (not dry-run) write
    of a Job; it may raise the server's refusal (an ApiError)."""
    original = kubeapi.store.patch

    def patch(name: str, namespace: str | None, obj_name: str, *a: Any, **k: Any) -> Any:
        if name == "jobs" and not k.get("dry_run"):
            call(obj_name)
        return original(name, namespace, obj_name, *a, **k)

    kubeapi.store.patch = patch  # type: ignore[method-assign]


def test_requests_go_a_few_at_a_time_and_the_lines_keep_the_renders_order(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeapi.add_faults(resource="jobs", delay=0.05)  # long enough for requests to meet
    result = apply(cli, kubeapi, tmp_path)
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created" for ref in in_render_order()]
    assert 1 < kubeapi.peak_in_flight <= 8  # the connection's in_flight, by default
    assert len(kubeapi.objects("jobs", NS)) == HOSTS


def test_a_new_run_is_dry_run_once_for_each_shape_and_names_held_are_listed_once(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """Every task's Job of this template differs from the others only in the task's values
    (runs/judge.py): one dry run judges them all, where there was one each. The names that
    others' objects hold come from one list of names, not from each object's dry run."""
    result = apply(cli, kubeapi, tmp_path)
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created" for ref in in_render_order()]
    dry_runs = [r for r in kubeapi.requests_for("jobs", "patch") if r.query.get("dryRun")]
    assert [r.name for r in dry_runs] == ["mnist-ps-0"]  # the first of the render's shape
    lists = kubeapi.requests_for("jobs", "list")
    names_only = [r for r in lists if "as=PartialObjectMetadataList" in r.accept]
    assert len(names_only) == 1 and not names_only[0].query.get("labelSelector")
    assert kubeapi.requests_for("jobs", "get") == []
    # The same run again: each object the run has is judged against itself, every one.
    kubeapi.requests.clear()
    again = apply(cli, kubeapi, tmp_path)
    assert again.code == 0, again.err
    assert objects(again.err) == [f"{ref} unchanged" for ref in in_render_order()]
    dry_runs = [r for r in kubeapi.requests_for("jobs", "patch") if r.query.get("dryRun")]
    assert sorted(r.name or "" for r in dry_runs) == sorted(
        ref.removeprefix("job.batch/") for ref in in_render_order()
    )


def test_dry_runs_throttled_with_retry_after_are_ridden_out(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeapi.add_faults(resource="jobs", verb="patch", throttle_first=3, retry_after=1)
    result = apply(cli, kubeapi, tmp_path, "--dry-run=server")
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created (server dry run)" for ref in in_render_order()]
    patches = kubeapi.requests_for("jobs", "patch")
    assert len(patches) == HOSTS + 3  # each throttled one sent again
    assert kubeapi.objects("jobs", NS) == []


def test_the_first_name_taken_in_the_renders_order_is_said_and_nothing_is_applied(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeapi.add_faults(resource="jobs", delay=0.05)
    namespace(kubeapi)
    for name in ("mnist-worker-12", "mnist-worker-2"):  # another's Jobs, the later one first
        kubeapi.create("jobs", {"metadata": {"name": name, "namespace": NS}, "spec": SPEC})
    result = apply(cli, kubeapi, tmp_path)
    assert_one_line_error(result, 1, contains=["job.batch/mnist-worker-2 "])
    assert "mnist-worker-12" not in result.err
    assert sorted(j["metadata"]["name"] for j in kubeapi.objects("jobs", NS)) == [
        "mnist-worker-12",
        "mnist-worker-2",
    ]


def test_the_real_applies_go_a_few_at_a_time_in_order_with_no_read_before_each(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """They went one after the other, each after a GET of its object (4 requests an object)."""
    kubeapi.add_faults(resource="jobs", verb="patch", delay=0.2)
    real_peak: list[int] = []
    stop = threading.Event()

    def measure() -> None:  # the dry runs are all answered before the first real apply
        while not stop.is_set():
            patches = kubeapi.requests_for("jobs", "patch")
            if any(not r.query.get("dryRun") for r in patches):
                kubeapi.peak_in_flight = 0
                real_peak.append(0)
                return
            time.sleep(0.001)

    watcher = threading.Thread(target=measure, daemon=True)
    watcher.start()
    try:
        result = apply(cli, kubeapi, tmp_path)
    finally:
        stop.set()
        watcher.join()
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created" for ref in in_render_order()]
    assert real_peak and 1 < kubeapi.peak_in_flight <= 8  # (reset at the first real apply)
    assert kubeapi.requests_for("jobs", "get") == []  # no object read: none was taken
    real = [r for r in kubeapi.requests_for("jobs", "patch") if not r.query.get("dryRun")]
    assert sorted(r.name or "" for r in real) == sorted(
        ref.removeprefix("job.batch/") for ref in in_render_order()
    )  # one write each (they reach the server in the order their threads get there)
    assert len(kubeapi.objects("jobs", NS)) == HOSTS


def test_the_deciding_job_is_applied_before_any_other_and_the_lines_keep_the_renders_order(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """worker-0 decides this run (runs/judge.py): no other Job of it is written before
    worker-0's is, so no apply, cut short or beside another, leaves them without it."""
    kubeapi.add_faults(resource="jobs", verb="patch", delay=0.1)
    namespace(kubeapi)
    seen: list[tuple[str, bool]] = []  # each real write, and whether worker-0 was there then

    def note(obj_name: str) -> None:
        jobs = {j["metadata"]["name"] for j in kubeapi.objects("jobs", NS)}
        seen.append((obj_name, "mnist-worker-0" in jobs))

    before_each_job_write(kubeapi, note)
    result = apply(cli, kubeapi, tmp_path)
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created" for ref in in_render_order()]
    assert seen[0] == ("mnist-worker-0", False)
    assert len(seen) == HOSTS and all(there for _, there in seen[1:]), seen


def test_a_refusal_half_way_counts_the_writes_that_were_out_and_landed(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """A quota that the 5th Job exceeds: the writes sent with it land, and are counted."""
    kubeapi.add_faults(resource="jobs", verb="patch", delay=0.1)
    namespace(kubeapi)
    refused = "mnist-worker-3"

    def refuse(obj_name: str) -> None:
        if obj_name == refused:
            raise ApiError(403, "Forbidden", f'jobs.batch "{refused}" is forbidden: exceeded quota')

    before_each_job_write(kubeapi, refuse)
    result = apply(cli, kubeapi, tmp_path)
    assert result.code == 1 and result.out == "", result.err
    *said, error = result.err.splitlines()
    assert error.startswith("simpletfjob: error: ") and "exceeded quota" in error, result.err
    found = re.search(
        r"; applied (\d+) of 20 objects of run 'mnist' \(listed above\), not (.+); ", error
    )
    assert found, result.err
    created = {j["metadata"]["name"] for j in kubeapi.objects("jobs", NS)}
    assert int(found[1]) == len(said) == len(created)  # exactly those said, all on the server
    assert {line.split()[0].removeprefix("job.batch/") for line in said} == created
    assert f"job.batch/{refused}" in found[2]
    assert len(created) > 4  # the writes out beside the refused one landed, and are said


def test_under_all_workers_every_worker_is_applied_before_the_ps(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """Every worker decides: the ps goes once all of them are answered; the lines keep the
    render's order (the ps's first)."""
    namespace(kubeapi)
    seen: list[tuple[str, int]] = []  # each real write, and how many Jobs were there then
    before_each_job_write(
        kubeapi, lambda name: seen.append((name, len(kubeapi.objects("jobs", NS))))
    )
    result = apply(cli, kubeapi, tmp_path, "--success-policy", "all-workers")
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created" for ref in in_render_order()]
    assert seen[-1] == ("mnist-ps-0", HOSTS - 1), seen


def test_a_conflict_after_the_deciding_job_landed_counts_it_and_says_it_in_order(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """worker-0 goes first and lands; ps-0, before it in the render, then meets a field
    manager's conflict: worker-0 is said and counted, and the line does not say that nothing
    was applied."""
    namespace(kubeapi)

    def conflict(obj_name: str) -> None:
        if obj_name == "mnist-ps-0":
            cause = {"reason": "FieldManagerConflict", "message": 'conflict with "helm"'}
            cause["field"] = '.spec.template.spec.containers[name="c"].image'
            raise ApiError(409, "Conflict", "Apply failed with 1 conflict", {"causes": [cause]})

    before_each_job_write(kubeapi, conflict)
    result = apply(cli, kubeapi, tmp_path)
    assert result.code == 1 and result.out == "", result.err
    *said, error = result.err.splitlines()
    assert said[0] == "job.batch/mnist-worker-0 created", result.err
    assert "nothing was applied" not in error and "--force-conflicts" in error, error
    found = re.search(r"; applied (\d+) of 20 objects of run 'mnist' \(listed above\)", error)
    created = {j["metadata"]["name"] for j in kubeapi.objects("jobs", NS)}
    assert found and int(found[1]) == len(said) == len(created), result.err
    assert "mnist-ps-0" not in created and "mnist-worker-0" in created


def test_every_service_is_made_before_a_job_is_sent(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """With pod networking, the Services (the tasks' DNS names) come first: the Jobs' writes
    go once every Service's has been answered (the store's revisions say which came first)."""
    kubeapi.add_faults(resource="services", verb="patch", delay=0.3)
    result = apply(cli, kubeapi, tmp_path, "--network", "pod")
    assert result.code == 0, result.err
    services = [int(s["metadata"]["resourceVersion"]) for s in kubeapi.objects("services", NS)]
    jobs = [int(j["metadata"]["resourceVersion"]) for j in kubeapi.objects("jobs", NS)]
    assert len(services) == len(jobs) == HOSTS
    assert max(services) < min(jobs)


def test_the_objects_a_sample_judged_are_not_derived_from_its_answer_unless_one_is_needed(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path, monkeypatch: Any
) -> None:
    """An object its shape's sample judged is what the sample's dry run says with its own values
    in (judge.derived), which is looked at only where another writer made the object
    meanwhile: a new run's writes derive none (each was a JSON copy of a whole answer)."""
    from simpletfjob.runs import judge

    derived: list[str] = []
    real = judge.derived

    def counted(answer: Any, sample: Any, other: Any) -> Any:
        derived.append(other.values.get(("metadata", "name"), "?"))
        return real(answer, sample, other)

    monkeypatch.setattr(judge, "derived", counted)
    result = apply(cli, kubeapi, tmp_path)
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created" for ref in in_render_order()]
    assert derived == []
