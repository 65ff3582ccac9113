"""failure.py's rules, as functions: which events and pods a failed task's explanation shows, and
how repeated events read (no server)."""

from __future__ import annotations

from typing import Any

from simpletfjob.runs.failure import event_lines, own_pods, task_events
from simpletfjob.runs.state import run_state
from tests.support.recorded import job, pod


def event(
    kind: str, name: str, reason: str, *, uid: str = "", count: int = 1, at: str = "", **more: Any
) -> dict[str, Any]:
    """A Warning event about an object, as the API server lists it."""
    return {
        "metadata": {"name": f"{name}.{reason}.{at}"},
        "involvedObject": {"kind": kind, "name": name, "uid": uid},
        "reason": reason,
        "message": more.get("message", f"{reason} of {name}"),
        "type": "Warning",
        "count": count,
        "firstTimestamp": at,
        "lastTimestamp": at,
    }


def test_repeated_events_are_one_line_with_their_counts_summed_in_the_order_they_came() -> None:
    """The kubelet may record each back-off as an event of its own, each with count 1."""
    events = [
        event("Pod", "mnist-worker-1-abcde", "BackOff", at="2026-01-01T00:00:01Z"),
        event("Job", "mnist-worker-1", "BackoffLimitExceeded", at="2026-01-01T00:00:02Z"),
        event("Pod", "mnist-worker-1-abcde", "BackOff", count=2, at="2026-01-01T00:00:03Z"),
        event("Pod", "mnist-worker-1-abcde", "BackOff", at="2026-01-01T00:00:04Z"),
        event("Pod", "mnist-worker-1-abcde", "BackOff", message="other", at="2026-01-01T00:00:05Z"),
    ]
    assert event_lines(events) == [
        "  BackOff (x4) pod/mnist-worker-1-abcde: BackOff of mnist-worker-1-abcde",
        "  BackoffLimitExceeded (x1) job/mnist-worker-1: BackoffLimitExceeded of mnist-worker-1",
        "  BackOff (x1) pod/mnist-worker-1-abcde: other",
    ]


def _task(created: str) -> Any:
    made = job("worker-1", failed=1, failed_reason="BackoffLimitExceeded")
    made["metadata"]["creationTimestamp"] = created
    (task,) = run_state("mnist", "default", [made], []).tasks
    return made, task


def test_a_restarted_attempts_explanation_shows_only_its_own_pods_and_their_events() -> None:
    """`run` restarts a run whole: the new attempt's Job has the old one's name, and so do its
    pods' (JOB-xxxxx); what the old attempt's pods left is not the new one's."""
    made, task = _task("2026-01-01T01:00:00Z")
    mine = pod(made, "Failed", exit_code=1)
    older = pod(job("worker-1", name="mnist-worker-1"), "Failed", exit_code=1)
    older["metadata"]["ownerReferences"][0]["uid"] = "an-earlier-attempt"
    older["metadata"]["name"] = "mnist-worker-1-old00"
    assert own_pods([older, mine], task) == [mine]
    events = [
        # the earlier attempt's pod: before this attempt's Job was made
        event("Pod", "mnist-worker-1-old00", "BackOff", uid="u1", at="2026-01-01T00:59:00Z"),
        # this attempt's pod, gone now (its uid unknown): named as the Job controller names it
        event("Pod", "mnist-worker-1-new00", "BackOff", uid="u2", at="2026-01-01T01:00:30Z"),
        # this attempt's pod that is there: by its uid
        event("Pod", mine["metadata"]["name"], "Failed", uid=mine["metadata"]["uid"],
              at="2026-01-01T01:00:40Z"),
    ]  # fmt: skip
    shown = task_events(events, task, [mine], since=task.created)
    assert [e["involvedObject"]["name"] for e in shown] == [
        "mnist-worker-1-new00",
        mine["metadata"]["name"],
    ]
