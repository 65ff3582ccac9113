"""Waiting in a queue with nothing installed: a run is applied at the head, once all of it fits.

rights  get, list, watch, create, update, delete on leases, asked first (kube/access.py)
enter   one list of the queue's Leases, then the entry created with the next number
        (AlreadyExists: the one after), holding the run and what it asks (entries.py)
wait    one watch of the Leases and the entry's renewals (a thread each); an entry seen
        unchanged for its lease (entries.Seen) is deleted on its resourceVersion
admit   the head, every RETRY seconds: the lock read, the entries listed again (still the
        head?), the lock taken by an update on its resourceVersion (of two clients, one), the
        run planned as the cluster is now (plan/fit.py counts the pods that Jobs have yet to
        make) and applied, or SelectionError: it waits, and blocks those behind it. Once its
        Jobs exist, the entry is deleted, then the lock given back.
leave   --timeout (exit 3), an interrupt or an error: the lock given back and the entry
        deleted, nothing applied; SIGKILL leaves the entry, which expires
"""

from __future__ import annotations

import json
import math
import queue as queues
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from simpletfjob.errors import ClusterError, Interrupted, SelectionError, TimedOut
from simpletfjob.kube.lists import list_objects
from simpletfjob.kube.objects import get
from simpletfjob.kube.request import ApiError, Deadline, request
from simpletfjob.kube.resources import LEASES, Action
from simpletfjob.options.rules import format_duration
from simpletfjob.runs.entries import (
    QUEUE_LABEL,
    Ask,
    Entry,
    Seen,
    asks_of,
    entries_of,
    entry_annotations,
    entry_name,
    holder_of,
    lease_body,
    listing,
    lock_name,
    micro_time,
    place_in,
    waiting_line,
)

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection, Settings
    from simpletfjob.options.queue import QueueOptions
    from simpletfjob.options.runs import ApplyOptions, RunOptions
    from simpletfjob.runs.apply import AppliedRun
    from simpletfjob.runs.objects import P, Plan

R = TypeVar("R")
RETRY = 5.0  # seconds between the head's tries while the run does not fit
WATCH_SPAN = 60.0  # seconds a watch is read before it is opened again (its thread can then end)
VERBS = ("get", "list", "watch", "create", "update", "delete")


def empty_nodes(options: Any) -> Any:
    """The options of a plan on the nodes as if nothing ran there (what a run asks, and whether
    it could ever fit); --port auto, which reads the pods, plans at the framework's default."""
    from simpletfjob.frameworks import framework
    from simpletfjob.options.rules import AUTO_PORT

    port = options.port
    if port is AUTO_PORT:
        port = framework(options.framework).default_port
    return options.replace(usage=False, port=port)


def check_rights(conn: Connection, namespace: str) -> None:
    """Refuse in one line a queue whose Leases the user may not use (kube/access.py)."""
    from simpletfjob.kube.access import allowed, refused_user

    actions = [Action(verb, LEASES, namespace) for verb in VERBS]
    answers = allowed(conn, actions)
    missing = [a for a, ok in zip(actions, answers or (), strict=False) if not ok]
    if not missing:
        return
    user = refused_user(conn, missing)
    verbs = ", ".join(a.verb for a in missing)
    quoted = ", ".join(f"'{a.verb}'" for a in missing)
    raise ClusterError(
        f"{conn.target}: {f'user {user!r}' if user else 'your user'} cannot {verbs} leases in "
        f"namespace {namespace}, which --queue needs, so nothing was applied; it needs a Role "
        f"with verb{'s' if len(missing) > 1 else ''} {quoted} on 'leases' in API group "
        "'coordination.k8s.io'"
    )


def read_queue(conn: Connection, queue: str) -> list[dict[str, Any]]:
    """`queue NAME`: its entries in order (entries.listing), from one list of its Leases."""
    return listing(queue, list_objects(conn, LEASES, label_selector=f"{QUEUE_LABEL}={queue}").items)


def place_of(conn: Connection, run: str, namespace: str | None) -> dict[str, Any] | None:
    """`status RUN` of a run with no Jobs: where it waits, from one list of the Leases in
    `namespace` (default: the run's); None when nowhere, or when they may not be listed."""
    try:
        listed = list_objects(conn, LEASES, namespace=namespace, label_selector=QUEUE_LABEL)
    except ApiError as e:
        if e.status in (403, 404):  # not allowed, or no Leases served: not queued
            return None
        raise
    return place_in(listed.items, run, conn.namespace)


def apply_queued(
    cluster: Settings,
    options: ApplyOptions,
    plan: Callable[[ApplyOptions], P],
    report: Callable[[str], None],
    waiting: Callable[[str], None],
    warn: Callable[[str], None] | None = None,
) -> AppliedRun[P]:
    """`apply --queue`: connect, plan the run on empty nodes, wait for its turn, and apply it
    there, planned as the cluster is now (runs/apply.py's apply_planned)."""
    from simpletfjob.runs.apply import AppliedRun, Choices, apply_planned
    from simpletfjob.runs.objects import connect_for

    where = (cluster.kubeconfig, cluster.context, cluster.namespace, "apply the run to", warn)
    with connect_for(*where) as conn:
        options = options.replace(namespace=conn.namespace)
        send = partial(apply_planned, conn, choices=Choices.of(options), report=report)
        deadline = None if options.timeout is None else Deadline.after(options.timeout)
        first, now = plan(empty_nodes(options)), partial(plan, options)
        planned, done = wait_turn(conn, options, first, now, send, waiting, deadline)
    return AppliedRun(planned, conn.namespace, Counter(outcome for _, outcome in done))


def queued(
    conn: Connection,
    options: RunOptions,
    planned: P,
    replan: Callable[[int], P] | None,
    restart: int,
    send: Callable[[P], object],
    waiting: Callable[[str], None] | None,
    deadline: Deadline | None,
) -> P:
    """An attempt of `run` (runs/run.py) sent, and its plan. With --queue, at its turn in the
    queue: `planned` is the run on empty nodes, and `replan(restart)` plans it as the cluster
    is now; without, `planned` is sent as it is."""
    if options.queue is None:
        send(planned)
        return planned
    assert replan is not None  # (the CLI and the API give it)
    now = partial(replan, restart)
    return wait_turn(conn, options, planned, now, send, waiting or (lambda line: None), deadline)[0]


def wait_turn(
    conn: Connection,
    options: QueueOptions,
    first: Plan,
    plan: Callable[[], P],
    send: Callable[[P], R],
    waiting: Callable[[str], None],
    deadline: Deadline | None,
) -> tuple[P, R]:
    """Enter the queue, wait for the run's turn, and there `send` it as `plan()` plans it (as the
    cluster is now; SelectionError: it does not fit yet); see the module doc. `first` is the run
    planned on empty nodes (`empty_nodes`): its name and what it asks. `waiting` is given the
    waiting line as it changes. TimedOut when `deadline` passes first, nothing applied."""
    assert options.queue is not None and first.job is not None  # (a run to apply has its labels)
    namespace = options.queue_namespace or conn.namespace
    check_rights(conn, namespace)
    asks = asks_of((t.role for t in first.tasks), first.asks)
    turn = _Turn(conn, options.queue, namespace, options.queue_lease, first.job, asks)
    turn.nodes = len({t.host for t in first.tasks})
    try:
        return turn.wait(lambda: (planned := plan(), send(planned)), waiting, deadline)
    except Interrupted as e:
        left = turn.leave()
        if not e.detail and not e.progress:
            entry = "its entry removed" if left else "its entry left to expire"
            e.detail = (
                f"left queue {options.queue!r} ({entry}); nothing of run {first.job!r} was applied "
                f"to namespace {conn.namespace}"
            )
        raise
    finally:
        turn.leave()


class _Turn:
    """One run's place in a queue: its entry, the queue as watched, the lock while it holds it."""

    def __init__(
        self, conn: Connection, queue: str, namespace: str, lease: float, run: str, asks: list[Ask]
    ) -> None:
        self.conn, self.queue, self.namespace = conn, queue, namespace
        self.run, self.asks = run, asks
        self.nodes = 1  # how many nodes the run's tasks take
        self.seconds = max(1, math.ceil(lease))
        self.selector = f"{QUEUE_LABEL}={queue}"
        self.entry: dict[str, Any] | None = None  # as last written
        self.held: dict[str, Any] | None = None  # the lock, while this run holds it
        self.view: dict[str, dict[str, Any]] = {}  # the queue's Leases, as watched
        self.seen = Seen()
        self.events: queues.Queue[Any] = queues.Queue()
        self.stop = threading.Event()
        self.writing = threading.Lock()  # this client's writes of its entry and the lock
        self.lost = False  # another client deleted the entry (it judged it expired)

    @property
    def name(self) -> str:
        return str((self.entry or {}).get("metadata", {}).get("name", ""))

    def wait(
        self, admit: Callable[[], R], waiting: Callable[[str], None], deadline: Deadline | None
    ) -> R:
        version = self.enter()
        for target in (lambda: self._watch(version), self._renew):
            threading.Thread(target=target, daemon=True, name="simpletfjob-queue").start()
        said, why, tried = "", "", -math.inf
        most_free: tuple[str, str] | None = None
        while True:
            self._fold(1.0)
            now = time.monotonic()
            if self.lost:  # deleted by another client, which judged it expired: enter again
                self.enter()
            names = [e.name for e in self._live(now)]
            if self.name not in names:  # not yet seen in the watch: it was just made
                names.append(self.name)
            position = names.index(self.name) + 1
            if position > 1:
                why, most_free = "", None
            elif now - tried >= RETRY:
                tried = now
                try:
                    done = self._admit(admit)
                except SelectionError as e:
                    why, most_free = str(e), e.most_free
                else:
                    if done is not None:
                        return done[0]
            line = waiting_line(
                self.queue, position, len(names), self.asks, self.nodes, why, most_free
            )
            if line != said:
                waiting(line)
                said = line
            if deadline is not None and deadline.remaining() <= 0:
                removed = self.leave()
                raise TimedOut(
                    f"run {self.run!r} was not admitted within {format_duration(deadline.seconds)}"
                    f" ({line.removeprefix('waiting ')}); nothing was applied, and its entry was "
                    + ("removed" if removed else "left to expire")
                )

    def enter(self) -> str:
        """Create the run's entry, numbered after the highest; the list's resourceVersion."""
        listed = list_objects(
            self.conn, LEASES, namespace=self.namespace, label_selector=self.selector
        )
        self.view = {str(o["metadata"]["name"]): o for o in listed.items}
        number = max((e.number for e in entries_of(self.queue, listed.items)), default=0) + 1
        notes = entry_annotations(self.run, self.conn.namespace, self.asks)
        while True:
            name = entry_name(self.queue, number)
            body = lease_body(name, self.queue, name, self.seconds, notes)
            with self.writing:
                self.entry, self.lost = self._send("create", None, body, (409,)), False
            if self.entry is not None:
                self.view[name] = self.entry
                return listed.resource_version
            number += 1  # AlreadyExists: another client took the number

    def _send(
        self, verb: str, name: str | None, body: Any, passthrough: tuple[int, ...] = ()
    ) -> dict[str, Any] | None:
        """One write of a Lease; None when the server answered one of `passthrough`."""
        action = Action(verb, LEASES, self.namespace, name)
        answer = request(self.conn, action, body=body, passthrough=passthrough)
        if answer.status in passthrough:
            return None
        found: dict[str, Any] = json.loads(answer.data)
        return found

    def _watch(self, version: str) -> None:
        """The queue's Leases' events to `events`, until `stop` (thread). Each watch is read for
        WATCH_SPAN seconds, then opened again from the last resourceVersion it brought."""
        from simpletfjob.kube.watch import watch

        since: str | None = version
        try:
            while not self.stop.is_set():
                span = Deadline.after(WATCH_SPAN)
                for event in watch(
                    self.conn, LEASES, namespace=self.namespace, label_selector=self.selector,
                    resource_version=since, deadline=span,
                ):  # fmt: skip
                    self.events.put(event)
                    # A RELIST says no version: the next watch lists first, missing nothing.
                    since = (event.object or {}).get("metadata", {}).get("resourceVersion")
                    if self.stop.is_set():
                        return
        except Exception as e:  # raised in the waiting loop
            self.events.put(e)

    def _renew(self) -> None:
        """The entry renewed every third of its lease, and the lock while held (thread)."""
        while not self.stop.wait(self.seconds / 3):
            try:
                with self.writing:
                    if self.entry is not None:
                        renewed = self._send("update", self.name, _renewed(self.entry), (404,))
                        self.lost = renewed is None
                        self.entry = renewed or self.entry
                    if self.held is not None:
                        self.held = self._send("update", lock_name(self.queue), _renewed(self.held))
            except ClusterError:
                pass  # the next renewal tries again; the waiting loop meets a server away

    def _fold(self, wait: float) -> None:
        """The watch's events so far (waiting up to `wait` seconds for one) into `view`."""
        try:
            event = self.events.get(timeout=wait)
            while True:
                if isinstance(event, Exception):
                    raise event
                if event.type == "RELIST":
                    self.view = {str(o["metadata"]["name"]): o for o in event.objects}
                elif event.type in ("ADDED", "MODIFIED"):
                    self.view[str(event.object["metadata"]["name"])] = event.object
                elif event.type == "DELETED":
                    self.view.pop(str(event.object["metadata"]["name"]), None)
                event = self.events.get_nowait()
        except queues.Empty:
            pass

    def _live(self, now: float) -> list[Entry]:
        """The entries in order; those of other clients seen unchanged for their lease deleted."""
        for name, lease in self.view.items():
            self.seen.saw(name, str(lease["metadata"].get("resourceVersion")), now)
        live = []
        for entry in entries_of(self.queue, self.view.values()):
            if entry.name != self.name and self.seen.expired(
                entry.name, entry.version, entry.lease, now
            ):
                body = {"preconditions": {"resourceVersion": entry.version}}
                self._send("delete", entry.name, body, (404, 409))
                self.view.pop(entry.name, None)
                self.seen.forget(entry.name)
                continue
            live.append(entry)
        return live

    def _admit(self, admit: Callable[[], R]) -> tuple[R] | None:
        """At the head: take the lock, and admit the run under it; None when the lock is not free
        or the run is not the head after all. The entries are listed after the lock is read, so
        that the entry of a client that took it before is among them."""
        lock = get(
            self.conn, LEASES, lock_name(self.queue), namespace=self.namespace, missing_ok=True
        )
        listed = list_objects(
            self.conn, LEASES, namespace=self.namespace, label_selector=self.selector
        )
        entries = entries_of(self.queue, listed.items)
        if not entries or entries[0].name != self.name:
            return None
        if not self._take(lock, {e.name for e in entries}):
            return None
        try:
            done = admit()
            with self.writing:  # the Jobs exist: the run is counted by the fit from now on
                self._send("delete", self.name, None, (404,))
                self.entry = None
            return (done,)
        finally:
            self._release()

    def _take(self, lock: dict[str, Any] | None, live: set[str]) -> bool:
        """Take the lock, read as `lock` (None: there is none yet), by a create, or by an update
        on its resourceVersion: of two clients, one only takes it. Not while another live entry
        holds it and this client has not seen it unchanged for its lease."""
        lock_id = lock_name(self.queue)
        if lock is None:
            body = lease_body(lock_id, self.queue, self.name, self.seconds, {})
            taken = self._send("create", None, body, (409,))
        else:
            holder, version = holder_of(lock), str(lock["metadata"]["resourceVersion"])
            lease = float(lock["spec"].get("leaseDurationSeconds") or self.seconds)
            held = holder in live and holder != self.name
            if held and not self.seen.expired(lock_id, version, lease, time.monotonic()):
                return False
            mine = {**lock, "spec": {**lock["spec"], "holderIdentity": self.name}}
            taken = self._send("update", lock_id, _renewed(mine, acquired=True), (409,))
        with self.writing:
            self.held = taken  # None: another client took it first
        return taken is not None

    def _release(self) -> None:
        """Give the lock back, if held."""
        with self.writing:
            held, self.held = self.held, None
            if held is not None:
                spec = {k: v for k, v in held["spec"].items() if k != "holderIdentity"}
                self._send("update", lock_name(self.queue), {**held, "spec": spec}, (404, 409))

    def leave(self) -> bool:
        """Stop the threads, give the lock back, delete the entry; whether the entry is gone."""
        self.stop.set()
        try:
            self._release()
            with self.writing:
                if self.entry is not None:
                    self._send("delete", self.name, None, (404,))
                    self.entry = None
        except ClusterError:
            return False
        return True


def _renewed(lease: Mapping[str, Any], acquired: bool = False) -> dict[str, Any]:
    now = micro_time()
    spec = {**lease["spec"], "renewTime": now, **({"acquireTime": now} if acquired else {})}
    return {**lease, "spec": spec}
