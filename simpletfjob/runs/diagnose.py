"""`diagnose RUN`: one bundle with what a bug report about a run needs, read once, written atomically.

    RUN-diagnose-20261129T071500Z.tar.gz
      RUN/summary.txt            the run, its verdict, its first failure with the failing task's
                                 error, each task's node and state, the versions, what could
                                 not be read and why
      RUN/status.json            what `status RUN -o json` prints
      RUN/tasks/TASK.log         each task's current container: its last 10,000 lines
      RUN/tasks/TASK.previous.log  the container before, where the kubelet keeps one
      RUN/events.txt             the events of the run's Jobs and pods, oldest first
      RUN/nodes/NODE.json        each node the run's pods are on: conditions, allocatable, and
                                 what its pods request
      RUN/manifests.yaml         the run's Jobs and Services as the cluster has them

The run's status, its Jobs, pods and Services, the namespace's events and the server's
version are read at the same time; then the logs, every task's at once as `logs` reads them
(logstreams.Merger), and the nodes with their pods. Only what `status` and `logs` need must
be allowed (the Jobs and pods, pods/log): a part that another right guards (Services, events,
nodes, the other pods on a node) is left out when refused, as is the log of a pod that is
gone, and summary.txt says what and why. bundle.py makes the files: redacted, bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from simpletfjob.errors import ClusterError, UsageError
from simpletfjob.kube.lists import list_each, list_objects, without_managed_fields
from simpletfjob.kube.request import Action, request
from simpletfjob.kube.resources import EVENTS, JOBS, NODES, PODS, SERVICES
from simpletfjob.runs import bundle
from simpletfjob.runs.logsources import (
    LogRequest,
    Merger,
    Object,
    Selection,
    pods_gone,
    sources_now,
    tasks_of,
)
from simpletfjob.runs.objects import run_selector

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

T = TypeVar("T")


def bundle_path(name: str, output: str | None, now: datetime) -> str:
    """Where the bundle goes: `output`, else RUN-diagnose-TIME.tar.gz in the current directory;
    checked before anything is read (a directory that is missing, a stream)."""
    from simpletfjob.output import destination

    path = output or bundle.bundle_name(name, now)
    if destination(path).fd is not None:
        raise UsageError(f"-o {path}: the bundle is a .tar.gz archive; give a file name")
    return path


def diagnose(conn: Connection, name: str, path: str, now: datetime) -> None:
    """Read run NAME and write its bundle to `path` (bundle_path), all or nothing; NoRunError
    when there is no such run, and no file."""
    from simpletfjob.output import write_atomic_bytes
    from simpletfjob.runs.ending import failed_line, read_status, succeeded_line, undecided
    from simpletfjob.runs.state import AMBIGUOUS, DELETING, FAILED, SUCCEEDED

    unread: list[str] = []
    with ThreadPoolExecutor(6) as pool:
        status = pool.submit(read_status, conn, name, None)
        jobs_read = pool.submit(_listed, conn, JOBS, name)
        pods_read = pool.submit(_listed, conn, PODS, name)
        services_read = pool.submit(_or_none, _listed, conn, SERVICES, name)
        events_read = pool.submit(_or_none, list_objects, conn, EVENTS)
        version = pool.submit(_server_version, conn)
    run, _ = status.result()  # NoRunError: no file
    jobs, pods = jobs_read.result(), pods_read.result()
    secrets = bundle.redact_env(jobs)
    files = [("status.json", (json.dumps(run.as_dict(), indent=2) + "\n").encode())]
    files += sorted(read_logs(conn, jobs, pods, unread).items())
    events, why = events_read.result()
    if events is None:
        unread.append(f"events: {why}")
    else:
        files.append(("events.txt", bundle.events_text(events.items, jobs, pods)))
    files += sorted(read_nodes(conn, pods, {t.node for t in run.tasks}, unread).items())
    services, why = services_read.result()
    if services is None:
        unread.append(f"services: {why}")
    files.append(("manifests.yaml", bundle.manifests_yaml(jobs, services or [])))
    files = [(file, bundle.redact(data, secrets)) for file, data in files]
    cause = bundle.first_failure(run)
    first = [f"tasks/{cause.task}.log", f"tasks/{cause.task}.previous.log"] if cause else []
    files, cut = bundle.bounded(files, first)
    if run.state == FAILED:
        verdict = failed_line(run)
    elif run.state == SUCCEEDED:
        verdict = succeeded_line(run)
    elif run.state in (AMBIGUOUS, DELETING):
        verdict = undecided(run, conn.settings.context)
    else:
        verdict = f"run {name!r} has not ended: {run.state}"
    from simpletfjob import __version__

    versions = f"simpletfjob {__version__}; server {version.result()}"
    text = bundle.summary(run, verdict, cause, dict(files), versions, unread, cut)
    files.insert(0, ("summary.txt", bundle.redact(text.encode(), secrets)))
    write_atomic_bytes(path, [bundle.archive(name, files, now.timestamp())])


def _listed(conn: Connection, resource: Any, name: str) -> list[dict[str, Any]]:
    """The run's objects of a kind as the cluster has them (manifests.yaml drops managedFields)."""
    return list_objects(conn, resource, label_selector=run_selector(name)).items


def _or_none(read: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | None, str]:
    """What `read` reads, or (None, why it could not)."""
    try:
        return read(*args, **kwargs), ""
    except ClusterError as e:
        return None, str(e)


def _server_version(conn: Connection) -> str:
    """The API server's version ('v1.20.2'), or why it is not known."""
    from simpletfjob.kube.send import Dropped, send

    settings = conn.settings
    try:
        answer = send(conn, "GET", "/version", (), {"Accept": "application/json"}, None, False,
                      settings.connect_timeout, settings.read_timeout)  # fmt: skip
        return str(json.loads(answer.data)["gitVersion"])
    except (ClusterError, Dropped, ValueError, KeyError, TypeError) as e:
        return f"not known ({e})"


def read_logs(
    conn: Connection, jobs: Sequence[Object], pods: Sequence[Object], unread: list[str]
) -> dict[str, bytes]:
    """Each task's current container's last lines, and its container before where the kubelet
    keeps one, all read at once as `logs` reads them; by file name. What has no log (a pod that
    is gone, a container that never started) goes to `unread`."""
    tasks = tasks_of(jobs, pods)
    chosen = list(tasks)
    current = sources_now(tasks, chosen, Selection(), False, unread.append, pods_gone(jobs, tasks))
    crashed = {source.task for source, _ in current if source.earlier}  # its log is the one before
    before = [
        (replace(source, label=f"{source.task}.previous"), readable)
        for source, readable in sources_now(tasks, chosen, Selection(), True, lambda _: None)
        if readable and source.task not in crashed
    ]
    merger = Merger(conn, LogRequest(tail=bundle.LOG_LINES), lambda _: None)
    merger.known = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    for source, readable in [*current, *before]:
        if readable:
            merger.start(source)
    lines: dict[str, list[bytes]] = {}
    refused = False  # one line for a refusal, the same for every log
    while merger.busy():
        item = merger.next(0.2)
        if item is None:
            continue
        source, batch = item
        if isinstance(batch, list):
            lines.setdefault(source.label, []).extend(batch)
        elif isinstance(batch, ClusterError):
            forbidden = "(403" in str(batch)
            if not (forbidden and refused):
                unread.append(
                    f"logs: {batch}" if forbidden else f"{source.label}: its log: {batch}"
                )
            refused = refused or forbidden
        elif isinstance(batch, BaseException):
            raise batch
    return {
        f"tasks/{label}.log": b"".join(read[-bundle.LOG_LINES :]) for label, read in lines.items()
    }


def read_nodes(
    conn: Connection, pods: Sequence[Object], pinned: Collection[str], unread: list[str]
) -> dict[str, bytes]:
    """nodes/NODE.json for each node the run's pods are on or its tasks are `pinned` to, with
    every pod on it (the run's own only, when the others may not be listed); what could not
    be read goes to `unread`."""
    from simpletfjob.hosts.usage import NOT_TERMINATED
    from simpletfjob.kube.lists import Page, decode_page

    names = sorted(
        {str(n) for p in pods if (n := (p.get("spec") or {}).get("nodeName"))}
        | {n for n in pinned if n}
    )
    with ThreadPoolExecutor(conn.settings.in_flight) as pool:
        read = list(pool.map(lambda node: _or_none(request, conn, Action("get", NODES, None, node), passthrough=(404,)), names))  # fmt: skip
    found: dict[str, Object] = {}
    refused = False  # one line for a refusal, the same for every node
    for node, (answer, why) in zip(names, read, strict=True):
        if answer is None and not (refused and "(403" in why):
            unread.append(f"nodes: {why}" if "(403" in why else f"node {node}: {why}")
            refused = refused or "(403" in why
        elif answer is not None and answer.status == 404:
            unread.append(f"node {node}: it is gone")
        elif answer is not None:
            found[node] = json.loads(answer.data)
    on: dict[str, list[Object]] = {node: [] for node in found}
    path = PODS.path("")

    def parse(data: bytes) -> Page[list[Any]]:
        return decode_page(data, conn.target, PODS, path, without_managed_fields)

    try:
        selectors = [f"spec.nodeName={node},{NOT_TERMINATED}" for node in found]
        for pages, node in zip(
            list_each(conn, PODS, parse, selectors, namespace=""), found, strict=True
        ):
            on[node] = [pod for page in pages for pod in page]
    except ClusterError as e:
        unread.append(f"the other pods on the run's nodes (only the run's own are counted): {e}")
        on = {node: [] for node in found}
        for pod in pods:
            on.get(str((pod.get("spec") or {}).get("nodeName")), []).append(pod)
    return {f"nodes/{node}.json": bundle.node_json(found[node], on[node]) for node in found}
