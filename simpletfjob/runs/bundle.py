"""The files of `diagnose`'s bundle, from what was read of a run: pure, no server.

Secrets stay out. Secret objects are never read, and a `valueFrom` is written as the
reference it is. A literal env value whose name holds TOKEN, PASSWORD, SECRET or KEY (in any
case) is `<redacted>` in the manifests, and so is the same value wherever a file of the
bundle holds it (a log line that prints it); a value of fewer than SHORTEST characters is
redacted in the manifests only, as replacing it in text would cut up every line.

The bundle is bounded: each log is read as its last LOG_LINES lines, and the whole bundle is
cut at LIMIT bytes before compression, its parts kept in order of use (the status, events,
nodes and manifests, then the failing task's logs, then the others by task); a log that
does not fit whole keeps its last lines that do, and summary.txt names what was cut.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from simpletfjob.hosts.requested import pod_units
from simpletfjob.hosts.usage import TERMINATED_PHASES
from simpletfjob.quantity import units_text
from simpletfjob.runs.classify import STALLED, Cause, run_failure, task_error, task_failure
from simpletfjob.runs.failure import event_lines, event_time
from simpletfjob.runs.state import FAILED, Run

Object = Mapping[str, Any]

LOG_LINES = 10_000
LIMIT = 100_000_000  # bytes of the whole bundle before compression (100 MB)
SUMMARY_ROOM = 1_000_000  # bytes kept for summary.txt within LIMIT
TAIL = 20  # the failing task's last lines in summary.txt, as `wait` shows them
SECRET_NAME = re.compile(r"(?i)TOKEN|PASSWORD|SECRET|KEY")
REDACTED = "<redacted>"
SHORTEST = 4
CONTAINERS = ("initContainers", "containers", "ephemeralContainers")
NEWLINE = b"\n"


def bundle_name(run: str, now: datetime, attempt: int | None = None, task: str = "") -> str:
    """'mnist-diagnose-20261129T071500Z.tar.gz': a UTC time with no colons (tar reads a colon
    as a host); 'mnist-attempt-1-diagnose-...' for `run`'s attempt that failed and was restarted
    (attempts count from 1, as `attempt N resumed` counts them), 'mnist-attempt-1-evaluator-0-...'
    for a task of it restarted alone."""
    which = "" if attempt is None else f"-attempt-{attempt}" + (f"-{task}" if task else "")
    return f"{run}{which}-diagnose-{now:%Y%m%dT%H%M%SZ}.tar.gz"


def redact_env(jobs: Iterable[Any]) -> set[str]:
    """Make each secret-named literal env value in the Jobs `<redacted>`, in place; the values."""
    values: set[str] = set()
    for job in jobs:
        pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
        for key in CONTAINERS:
            for container in pod.get(key) or ():
                for item in container.get("env") or ():
                    if "value" in item and SECRET_NAME.search(str(item.get("name"))):
                        values.add(str(item["value"]))
                        item["value"] = REDACTED
    return values - {"", REDACTED}


def redact(data: bytes, values: Collection[str]) -> bytes:
    """`data` with every secret value of SHORTEST characters or more `<redacted>`."""
    for value in sorted(values, key=len, reverse=True):  # a value inside another goes after it
        if len(value) >= SHORTEST:
            data = data.replace(value.encode(), REDACTED.encode())
    return data


def manifests_yaml(jobs: Sequence[Object], services: Sequence[Object]) -> bytes:
    """The run's Jobs and Services as YAML documents, without managedFields."""
    import yaml

    def doc(api_version: str, kind: str, obj: Object) -> dict[str, Any]:
        metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
        return {"apiVersion": api_version, "kind": kind, **obj, "metadata": metadata}

    docs = [
        *(doc("batch/v1", "Job", job) for job in jobs),
        *(doc("v1", "Service", svc) for svc in services),
    ]
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    # No folding of long strings, so that a value stays whole on its line (for `redact`).
    text = yaml.dump_all(docs, Dumper=dumper, sort_keys=False, width=1 << 30)
    return str(text).encode()


def events_text(events: Iterable[Object], jobs: Iterable[Object], pods: Iterable[Object]) -> bytes:
    """The events of the run's Jobs and pods (a gone pod by its Job's name), oldest first."""
    job_names = {str((j.get("metadata") or {}).get("name")) for j in jobs}
    pod_names = {str((p.get("metadata") or {}).get("name")) for p in pods}
    made = re.compile(r"(.+)-[a-z0-9]{5}")
    mine = []
    for event in events:
        about = event.get("involvedObject") or {}
        kind, name = about.get("kind"), str(about.get("name") or "")
        if (kind == "Job" and name in job_names) or (
            kind == "Pod"
            and (name in pod_names or ((m := made.fullmatch(name)) and m.group(1) in job_names))
        ):
            mine.append(event)
    mine.sort(key=event_time)
    return "".join(
        f"{event_time(e)} {e.get('type')} {event_lines([e])[0].lstrip()}\n" for e in mine
    ).encode()


def node_json(node: Object, pods: Iterable[Object]) -> bytes:
    """A node's conditions and allocatable, and what each of its pods that has not ended
    requests of each allocatable resource, summed as `kubectl describe node` sums them."""
    status = node.get("status") or {}
    allocatable = dict(status.get("allocatable") or {})
    resources = [r for r in allocatable if r != "pods"]
    total = [0] * len(resources)
    listed = []
    for pod in sorted(pods, key=lambda p: (p["metadata"].get("namespace"), p["metadata"]["name"])):
        phase = (pod.get("status") or {}).get("phase")
        if phase in TERMINATED_PHASES:
            continue
        units = pod_units(pod.get("spec") or {}, resources)
        total = [a + b for a, b in zip(total, units, strict=True)]
        listed.append(
            {
                "namespace": pod["metadata"].get("namespace"),
                "name": pod["metadata"]["name"],
                "phase": phase,
                "requests": {
                    r: units_text(u, r) for r, u in zip(resources, units, strict=True) if u
                },
            }
        )
    data = {
        "name": (node.get("metadata") or {}).get("name"),
        "conditions": status.get("conditions") or [],
        "allocatable": allocatable,
        "requested": {r: units_text(u, r) for r, u in zip(resources, total, strict=True)},
        "pods": listed,
    }
    return (json.dumps(data, indent=2) + "\n").encode()


def first_failure(run: Run) -> Cause | None:
    """The cause of the run's failure, else of its first task that failed (by when), else None.
    (A stall is known only to the `run` or `wait` that judged it: they pass its Cause.)"""
    if run.state == FAILED:
        return run_failure(run)
    failed = [t for t in run.tasks if t.state == FAILED]
    failed.sort(key=lambda t: t.ended.timestamp() if t.ended else float("inf"))
    return task_failure(failed[0]) if failed else None


def summary(
    run: Run,
    verdict: str,
    cause: Cause | None,
    logs: Mapping[str, bytes],
    versions: str,
    unread: Sequence[str],
    cut: Sequence[str],
) -> str:
    """summary.txt: the run, its verdict, its first failure with the failing task's error and
    last lines, its tasks, the versions, the bounds, and what could not be read and why."""
    lines = [
        f"run: {run.name}",
        f"namespace: {run.namespace}",
        f"state: {run.state}",
        f"verdict: {verdict}",
    ]
    if cause is not None:
        said = [f"exit code {cause.exit_code}"] if cause.exit_code is not None else []
        said += [f"reason {cause.reason}"] if cause.reason else []
        words = cause.kind_words
        if cause.kind == STALLED:  # its own class in words; run restarts it as a disruption
            said, words = [cause.text], f"a stall ({words})"
        lines.append(f"first failure: {', '.join([cause.task or cause.text, *said])}: {words}")
        lines += failing_log(cause.task, logs)
    done, limit = run.restarts
    in_a_row = "" if run.in_a_row == done else f", {run.in_a_row} in a row without progress"
    lines.append(f"restarts of the whole run: {done} of {limit}{in_a_row} (run --max-restarts)")
    lines += ["", "tasks:", *_table(run)]
    lines += ["", f"versions: {versions}"]
    lines.append(
        f"bounds: each log its last {LOG_LINES:,} lines; the bundle {LIMIT // 1_000_000} MB "
        "before compression" + (", reached: " + "; ".join(cut) if cut else ", not reached")
    )
    lines += ["", "could not be read:" if unread else "could not be read: nothing"]
    lines += [f"  {line}" for line in unread]
    return "\n".join(lines) + "\n"


def failing_log(task: str, logs: Mapping[str, bytes]) -> list[str]:
    """The failing task's error and last lines, from its current log, else (or when only that one
    has an error) from the one before."""
    names = [name for name in (f"tasks/{task}.log", f"tasks/{task}.previous.log") if name in logs]
    if not names:
        return [f"{task}'s error: its log could not be read (below)"] if task else []
    texts = [logs[name].decode("utf-8", "replace").splitlines() for name in names]
    errors = [task_error(text) for text in texts]
    i = next((i for i, error in enumerate(errors) if error), 0)
    name, text, error = names[i], texts[i], errors[i]
    said = (
        [f"{task}'s error, from {name}:", *(f"  {line}" for line in error)]
        if error
        else [f"{task}'s error: no line of {name} reads as one"]
    )
    last = [f"{task}'s last {min(TAIL, len(text))} lines:", *(f"  {x}" for x in text[-TAIL:])]
    return said + last


def _table(run: Run) -> list[str]:
    rows = [("TASK", "NODE", "STATE", "RESTARTS", "REASON")]
    for t in run.tasks:
        restarts = "-" if t.restarts is None else str(t.restarts)
        rows.append((t.task, t.node or "<none>", t.state, restarts, t.reason))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def bounded(
    files: Sequence[tuple[str, bytes]], first: Sequence[str], limit: int = LIMIT
) -> tuple[list[tuple[str, bytes]], list[str]]:
    """The files (in their order) within `limit` bytes less SUMMARY_ROOM, and what was cut: first
    what is not a log, then the logs in `first`, then the others; a log that does not fit keeps
    its last whole lines that do; a file with no room left is left out."""
    room = max(0, limit - SUMMARY_ROOM)
    order = sorted(
        range(len(files)),
        key=lambda i: (files[i][0].startswith("tasks/"), files[i][0] not in first, i),
    )
    kept: dict[int, bytes] = {}
    cut: list[str] = []
    for i in order:
        name, data = files[i]
        tail = data[len(data) - room :] if room and name.startswith("tasks/") else b""
        whole_lines = (
            tail[tail.find(NEWLINE, 0, len(tail) - 1) + 1 :] if NEWLINE in tail[:-1] else b""
        )
        if len(data) <= room:
            kept[i] = data
        elif whole_lines:
            kept[i] = whole_lines
            cut.append(f"{name} cut to its last {whole_lines.count(NEWLINE):,} lines")
        else:
            cut.append(f"{name} left out")
        room -= len(kept.get(i, b""))
    return [(files[i][0], kept[i]) for i in range(len(files)) if i in kept], cut


def archive(folder: str, files: Sequence[tuple[str, bytes]], mtime: float) -> bytes:
    """A .tar.gz of the files, each FOLDER/NAME, in their order."""
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for name, data in files:
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size, info.mtime, info.mode = len(data), int(mtime), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
