"""`diagnose RUN`: one bundle with what a bug report about a run needs, read once, written atomically.

RUN-diagnose-TIME.tar.gz holds RUN/summary.txt, status.json, tasks/TASK[.previous].log,
events.txt, nodes/NODE.json and manifests.yaml (docs/commands/diagnose.md says what each holds).

Only what `status` and `logs` need must be allowed (Jobs, pods, pods/log): a part another
right guards (Services, events, nodes) is left out when refused, as is the log of a pod that is
gone, and summary.txt says what and why. bundle.py makes the files: redacted, bounded.

`run --diagnose-on-failure DIR` and `wait`'s (`OnFailure`) write the same bundle at a failing
verdict, before the client deletes anything. As they follow, a `Recorder` keeps each task's
log's last lines and its Jobs and pods as last seen, since they may be gone by then
(--cleanup-after's TTL, the Job controller deleting a failed pod).
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from simpletfjob.errors import ClusterError, SimpleTFJobError, UsageError
from simpletfjob.kube.lists import list_each, list_objects
from simpletfjob.kube.request import Action, request
from simpletfjob.kube.resources import EVENTS, JOBS, NODES, PODS, SERVICES
from simpletfjob.runs import bundle
from simpletfjob.runs.failure import SEARCHED, Keeper, Kept
from simpletfjob.runs.logsources import (
    GONE,
    LogRequest,
    Merger,
    Object,
    Selection,
    Source,
    pods_gone,
    run_now,
    sources_now,
    tasks_of,
)
from simpletfjob.runs.objects import run_selector, some

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.classify import Cause
    from simpletfjob.runs.state import Run
    from simpletfjob.runs.taskstate import TaskStatus

T = TypeVar("T")


def bundle_path(name: str, output: str | None, now: datetime) -> str:
    """Where the bundle goes (`output`, else RUN-diagnose-TIME.tar.gz), checked before any read."""
    from simpletfjob.output import destination

    path = output or bundle.bundle_name(name, now)
    if destination(path).fd is not None:
        raise UsageError(f"-o {path}: the bundle is a .tar.gz archive; give a file name")
    return path


def diagnose(
    conn: Connection,
    name: str,
    path: str,
    now: datetime,
    *,
    kept: Recorder | None = None,
    last: Run | None = None,
    cause: Cause | None = None,
    verdict: str | None = None,
) -> None:
    """Read run NAME and write its bundle to `path`, all or nothing (NoRunError: no file).

    `run` and `wait` give their Recorder (`kept`: logs and objects gone since), the run as they
    `last` judged it, and the `cause` and `verdict` of its failure."""
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
    jobs, pods = jobs_read.result(), pods_read.result()
    # At a verdict, the run as `run` or `wait` judged it; else as `status` reads it now.
    run = last if last is not None else status.result()[0]  # NoRunError: no file
    logs = read_logs(conn, jobs, pods, unread)
    if kept is not None:
        logs = kept.fill(logs, unread)
        kept_jobs = [o for o in kept.alive.values() if "template" in (o.get("spec") or {})]
        kept_pods = [o for o in kept.alive.values() if "containers" in (o.get("spec") or {})]
        gone_jobs, gone_pods = _gone_since(kept_jobs, jobs), _gone_since(kept_pods, pods)
        if last is not None:  # the tasks whose Jobs were deleted first, as last seen
            run = _with_tasks_of(run, kept_jobs, kept_pods)
        if gone_jobs or gone_pods:
            unread.append(
                f"{(_some_of('Job', gone_jobs) + _some_of('pod', gone_pods)).removesuffix('; ')}: "
                "deleted before the bundle was written; in it as last seen while following"
            )
        jobs, pods = [*jobs, *gone_jobs], [*pods, *gone_pods]
    secrets = bundle.redact_env(jobs)
    files = [("status.json", (json.dumps(run.as_dict(), indent=2) + "\n").encode())]
    files += sorted(logs.items())
    events, why = events_read.result()
    if events is None:
        unread.append(f"events: {why}")
    else:
        files.append(("events.txt", bundle.events_text(events.items, jobs, pods)))
    files += sorted(read_run_nodes(conn, pods, {t.node for t in run.tasks}, unread).items())
    services, why = services_read.result()
    if services is None:
        unread.append(f"services: {why}")
    files.append(("manifests.yaml", bundle.manifests_yaml(jobs, services or [])))
    files = [(file, bundle.redact(data, secrets)) for file, data in files]
    cause = cause or bundle.first_failure(run)
    first = [f"tasks/{cause.task}.log", f"tasks/{cause.task}.previous.log"] if cause else []
    files, cut = bundle.bounded(files, first)
    if verdict is None:
        verdict = (
            failed_line(run) if run.state == FAILED
            else succeeded_line(run) if run.state == SUCCEEDED
            else undecided(run, conn.settings.context) if run.state in (AMBIGUOUS, DELETING)
            else f"run {name!r} has not ended: {run.state}"
        )  # fmt: skip
    from simpletfjob._version import __version__

    versions = f"simpletfjob {__version__}; server {version.result()}"
    text = bundle.summary(run, verdict, cause, dict(files), versions, unread, cut)
    files.insert(0, ("summary.txt", bundle.redact(text.encode(), secrets)))
    write_atomic_bytes(path, [bundle.archive(name, files, now.timestamp())])


def _gone_since(seen: Sequence[Object], now: Sequence[Object]) -> list[dict[str, Any]]:
    """Copies (redaction writes into them) of what was seen and is not among those read `now`."""
    uids = {(o.get("metadata") or {}).get("uid") for o in now}
    return [
        copy.deepcopy(dict(o)) for o in seen if (o.get("metadata") or {}).get("uid") not in uids
    ]


def _with_tasks_of(run: Run, jobs: Sequence[Object], pods: Sequence[Object]) -> Run:
    """The run with the tasks of `jobs` it lacks: the follower drops a Job being deleted."""
    from simpletfjob.runs.state import run_state

    if not jobs:
        return run
    had = {t.task for t in run.tasks}
    gone = run_state(run.name, run.namespace, jobs, pods).tasks
    return replace(run, tasks=(*run.tasks, *(t for t in gone if t.task not in had)))


def _some_of(kind: str, objects: Sequence[Object]) -> str:
    """'Jobs mnist-worker-1, mnist-ps-0; ' (objects.some's first three, then how many more)."""
    if not objects:
        return ""
    names = [str((o.get("metadata") or {}).get("name")) for o in objects]
    return f"{kind}{'s' if len(names) > 1 else ''} {some(names)}; "


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
    """Each task's current container's last lines, and the one before where the kubelet keeps it,
    by file name; what has no log goes to `unread`."""
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
    started = [source for source, readable in [*current, *before] if readable]
    for source in started:
        merger.start(source)
    lines: dict[str, list[bytes]] = {}
    broken: set[str] = set()
    refused = False  # one line for a refusal, the same for every log
    while merger.busy():
        item = merger.next(0.2)
        if item is None:
            continue
        source, batch = item
        if isinstance(batch, list):
            lines.setdefault(source.label, []).extend(batch)
        elif isinstance(batch, ClusterError):
            broken.add(source.label)
            forbidden = "(403" in str(batch)
            if not (forbidden and refused):
                unread.append(
                    f"logs: {batch}" if forbidden else f"{source.label}: its log: {batch}"
                )
            refused = refused or forbidden
        elif isinstance(batch, BaseException):
            raise batch
    for source in started:  # a container that has printed nothing yet: an empty log
        if source.label not in broken:
            lines.setdefault(source.label, [])
    return {
        f"tasks/{label}.log": b"".join(read[-bundle.LOG_LINES :]) for label, read in lines.items()
    }


def read_run_nodes(
    conn: Connection, pods: Sequence[Object], pinned: Collection[str], unread: list[str]
) -> dict[str, bytes]:
    """nodes/NODE.json for each node the run's pods are on or its tasks are `pinned` to, with every
    pod on it (only the run's own, when the others may not be listed); failures to `unread`."""
    from simpletfjob.hosts.usage import NOT_TERMINATED
    from simpletfjob.kube.lists import decode_page

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
    parse = partial(decode_page, target=conn.target, resource=PODS, path=PODS.path(""))
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


SETTLE = 2.0  # seconds the streams of containers that have ended are given to be read out


class Recorder(Keeper):
    """What `run` and `wait` keep of a run as they follow it, for its bundle (and as failure.py's
    Keeper): its Jobs and pods as last seen, and each task's last LOG_LINES lines of its newest
    container and the one before, streamed as `logs -f` reads from when it is first seen."""

    def __init__(self, conn: Connection, tail: int) -> None:
        super().__init__(conn, tail)
        self.merger = Merger(conn, LogRequest(tail=bundle.LOG_LINES, follow=True), lambda _: None)
        self.pods: Sequence[Object] = ()
        self.alive: dict[str, Object] = {}  # every Job and pod seen, by uid, as last seen alive
        self.started: dict[tuple[str, str, int], int] = {}  # (pod, container, run) -> order
        self.logs: dict[Source, deque[bytes]] = {}
        self.taking = threading.Lock()
        self.closed = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def seen(self, jobs: Sequence[Object], pods: Sequence[Object]) -> None:
        super().seen(jobs, pods)
        self.pods = pods
        for obj in (*jobs, *pods):  # a Job the cluster deletes is last seen before its deletion
            metadata = obj.get("metadata") or {}
            if not metadata.get("deletionTimestamp") or metadata.get("uid") not in self.alive:
                self.alive[str(metadata.get("uid"))] = obj
        self.merger.known = {str((p.get("metadata") or {}).get("name")): p for p in pods}
        tasks = tasks_of(jobs, pods)
        for source, readable in sources_now(tasks, list(tasks), Selection(), False, lambda _: None):
            if source.instance and not source.earlier:  # started again since the last look
                self._start(replace(source, instance=source.instance - 1, earlier=True))
            if readable:
                self._start(source)

    def _start(self, source: Source) -> None:
        key = (source.pod, source.container, source.instance)
        if key not in self.started:
            self.started[key] = len(self.started)
            self.merger.start(source)

    def _order(self, source: Source) -> int:
        return self.started[(source.pod, source.container, source.instance)]

    def _drain(self) -> None:
        while not (self.closed.is_set() or self.conn.closed):
            self._take(0.2)

    def _take(self, wait: float) -> bool:
        with self.taking:
            item = self.merger.next(wait)
            if item is None:
                return False
            source, batch = item
            if isinstance(batch, list):
                if source not in self.logs:  # a task's newest two containers only
                    mine = sorted((s for s in self.logs if s.task == source.task), key=self._order)
                    for old in mine[:-1]:
                        del self.logs[old]
                    self.logs[source] = deque(maxlen=bundle.LOG_LINES)
                self.logs[source].extend(batch)
            return True

    def _settle(self) -> None:
        """Wait (SETTLE seconds at most) until the logs of the containers that have ended are in."""
        until = time.monotonic() + SETTLE
        while time.monotonic() < until and any(
            thread.is_alive()
            and ((pod := self.merger.known.get(s.pod)) is None or run_now(pod, s) != "running")
            for s, thread in list(self.merger.open.items())
        ):
            time.sleep(0.05)
        while self._take(0):
            pass

    def newest(self) -> dict[str, list[Source]]:
        """Each task's kept containers, newest first."""
        found: dict[str, list[Source]] = {}
        for source in sorted(self.logs, key=self._order, reverse=True):
            found.setdefault(source.task, []).append(source)
        return found

    def kept_for(self, task: TaskStatus) -> Kept | None:
        found = super().kept_for(task)
        if found is not None:
            return found
        self._settle()
        with self.taking:
            mine = self.newest().get(task.task)
            if not mine:
                return None
            return Kept(mine[0].pod, mine[0].container, tuple(self.logs[mine[0]])[-SEARCHED:])

    def fill(self, logs: dict[str, bytes], unread: list[str]) -> dict[str, bytes]:
        """The logs read now, with each task that has none taken as kept, said so in `unread`."""
        self._settle()
        read = {file.removeprefix("tasks/").split(".")[0] for file in logs}
        with self.taking:
            for task, sources in self.newest().items():
                if task in read:
                    continue
                for name, source in zip(("log", "previous.log"), sources, strict=False):
                    logs[f"tasks/{task}.{name}"] = b"".join(self.logs[source])
                if f"{task}: {GONE}" in unread:
                    unread.remove(f"{task}: {GONE}")
                unread.append(
                    f"{task}: its pod is gone; its log is as kept while following the run"
                )
        return logs

    def close(self) -> None:
        """Stop reading (the attempt it followed is over)."""
        self.merger.stopped.update(self.merger.open)
        self.closed.set()


class OnFailure:
    """--diagnose-on-failure DIR: a Recorder follows each attempt (without DIR, a plain Keeper),
    and a failed run's bundle is written into DIR at the verdict, before anything is deleted;
    one that cannot be written is a warning, the verdict and exit status unchanged."""

    def __init__(self, conn: Connection, directory: str | None, say: Callable[[str], None]) -> None:
        self.conn, self.directory, self.say = conn, directory, say
        self.path: str | None = None  # the bundle of the last failure, once written
        self.pending: Callable[[], str] | None = None  # one that an interrupt cut short
        self.recorder: Recorder | None = None

    def keeper(self, tail: int) -> Keeper:
        """What follows a new attempt."""
        if self.recorder is not None:
            self.recorder.close()
        if self.directory is None:
            return Keeper(self.conn, tail)
        self.recorder = Recorder(self.conn, tail)
        return self.recorder

    def close(self) -> None:
        """Stop keeping logs: the run is over, or the caller is done with it."""
        if self.recorder is not None:
            self.recorder.close()

    def write(
        self,
        run: Run,
        cause: Cause | None,
        verdict: str,
        attempt: int | None = None,
        task: str = "",
    ) -> str:
        """Write the failed run's (or attempt's) bundle into DIR; '; bundle: PATH' for the failure's
        line, '' without DIR or when it could not be written."""
        self.path = None  # a bundle of an earlier attempt is not this failure's
        if self.directory is None:
            return ""
        self.pending = partial(self._write, run, cause, verdict, attempt, task)
        said = self.pending()
        self.pending = None
        return said

    def finish(self) -> None:
        """Write the bundle that an interrupt cut short (before --on-interrupt delete deletes)."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending()

    def _write(
        self, run: Run, cause: Cause | None, verdict: str, attempt: int | None, task: str
    ) -> str:
        assert self.directory is not None
        now = datetime.now(timezone.utc)
        path = os.path.join(self.directory, bundle.bundle_name(run.name, now, attempt, task))
        try:
            diagnose(self.conn, run.name, path, now, kept=self.recorder, last=run, cause=cause,
                     verdict=verdict)  # fmt: skip
        except (SimpleTFJobError, OSError) as e:
            self.say(f"simpletfjob: warning: the bundle could not be written: {e}")
            return ""
        self.path = path
        return f"; bundle: {path}"
