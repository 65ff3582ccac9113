"""The files of `diagnose`'s bundle (runs/bundle.py), as functions: its name, its bound, the
secrets kept out. tests/control_plane/test_diagnose.py reads whole bundles of a real run."""

from __future__ import annotations

import tarfile
from datetime import datetime, timezone
from io import BytesIO

from simpletfjob.runs.bundle import (
    SUMMARY_ROOM,
    archive,
    bounded,
    bundle_name,
    redact,
    redact_env,
)


def test_the_name_is_a_utc_time_with_no_colon() -> None:
    now = datetime(2026, 11, 29, 7, 15, 0, tzinfo=timezone.utc)
    assert bundle_name("mnist", now) == "mnist-diagnose-20261129T071500Z.tar.gz"


def test_the_bound_keeps_the_failing_task_s_log_first_and_cuts_a_log_at_a_whole_line() -> None:
    files = [
        ("status.json", b"{}\n" * 10),  # 30 bytes
        ("tasks/ps-0.log", b"p" * 40 + b"\n"),
        ("tasks/worker-1.log", b"".join(b"line %02d\n" % i for i in range(10))),  # 80 bytes
        ("manifests.yaml", b"m" * 20),
    ]
    kept, cut = bounded(files, ["tasks/worker-1.log"], limit=SUMMARY_ROOM + 100)
    assert kept == [
        ("status.json", files[0][1]),
        ("tasks/worker-1.log", b"line 04\nline 05\nline 06\nline 07\nline 08\nline 09\n"),
        ("manifests.yaml", b"m" * 20),
    ]
    assert cut == ["tasks/worker-1.log cut to its last 6 lines", "tasks/ps-0.log left out"]
    assert bounded(files, [], limit=SUMMARY_ROOM + 1000) == (files, [])


def test_secret_named_env_values_are_redacted_in_the_jobs_and_in_text() -> None:
    env = [
        {"name": "TF_CONFIG", "value": "{}"},
        {"name": "hf_token", "value": "hf_abcdef"},
        {"name": "USE_KEY", "value": "1"},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
    ]
    job = {"spec": {"template": {"spec": {"initContainers": [{"env": env}], "containers": [{}]}}}}
    assert redact_env([job]) == {"hf_abcdef", "1"}
    assert [e.get("value") for e in env] == ["{}", "<redacted>", "<redacted>", None]
    assert env[3]["valueFrom"] == {"secretKeyRef": {"name": "db", "key": "pw"}}
    # in text, a value too short to be told from other words stays
    assert redact(b"login hf_abcdef at step 1\n", {"hf_abcdef", "1"}) == (
        b"login <redacted> at step 1\n"
    )


def test_the_archive_holds_each_file_in_one_folder_in_order() -> None:
    data = archive("mnist", [("summary.txt", b"run: mnist\n"), ("tasks/a.log", b"x\n")], 0)
    with tarfile.open(fileobj=BytesIO(data), mode="r:gz") as tar:
        assert tar.getnames() == ["mnist/summary.txt", "mnist/tasks/a.log"]
        assert tar.extractfile("mnist/summary.txt").read() == b"run: mnist\n"  # type: ignore[union-attr]


def test_a_task_whose_job_the_cluster_deleted_first_is_in_the_bundle_as_last_seen() -> None:
    """--diagnose-on-failure: the follower drops a Job being deleted (--cleanup-after's TTL),
    the Recorder keeps it as last seen; the bundle's table and manifests have it again."""
    from simpletfjob.runs.diagnose import _gone_since, _some_of, _with_tasks_of
    from simpletfjob.runs.state import run_state
    from tests.support.scenes import task_job

    running = task_job("worker", 0, active=1)
    failed = task_job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded")
    judged = run_state("mnist", "ml", [running], [])
    assert [t.task for t in judged.tasks] == ["worker-0"]
    whole = _with_tasks_of(judged, [running, failed], [])
    assert [(t.task, t.state) for t in whole.tasks] == [
        ("worker-0", judged.tasks[0].state),
        ("worker-1", "Failed"),
    ]
    assert _with_tasks_of(judged, [], []) is judged
    gone = _gone_since([running, failed], [running])
    assert gone == [failed] and gone[0] is not failed  # a copy: redaction writes into it
    assert _some_of("Job", gone) == "Job mnist-worker-1; "
    assert _some_of("pod", [running] * 5) == (
        "pods mnist-worker-0, mnist-worker-0, mnist-worker-0 and 2 more; "
    )
    assert _some_of("pod", []) == ""
