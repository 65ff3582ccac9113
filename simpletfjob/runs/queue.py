"""The queue (--queue): nothing installed on the cluster; a run is applied at the head once it fits.

An entry is a Lease `simpletfjob-queue-<queue>-<number>` (six digits or more), labelled with
the queue: the server's AlreadyExists on a taken name orders them, so the lowest live number
is the head. The lock is the Lease `simpletfjob-queue-<queue>.lock` (no entry can be named so);
its holder is the entry being admitted.

A run asks for the rights first, creates its entry, then watches the Leases and renews its own
(a thread each). At the head, every RETRY seconds, it reads the lock, lists the entries again,
takes the lock by an update on its resourceVersion (of two clients, one wins), and plans the
run as the cluster is now: applied, or SelectionError and it waits, blocking those behind.
Once its Jobs exist the entry is deleted, then the lock given back. A timeout, an interrupt
or an error gives the lock back and deletes the entry; after SIGKILL the entry expires.

Expiry is judged as client-go's leader election judges a lease: by how long this client has
seen it unchanged, on its own monotonic clock, never by the Lease's renewTime.
"""

from __future__ import annotations

import json
import math
import queue as queues
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from simpletfjob.errors import ClusterError, Interrupted, SelectionError, TimedOut
from simpletfjob.kube.leases import Seen, holder_of, lease_body, renewed
from simpletfjob.kube.lists import list_objects
from simpletfjob.kube.objects import get
from simpletfjob.kube.request import ApiError, Deadline, request
from simpletfjob.kube.resources import LEASES, Action
from simpletfjob.options.rules import format_duration
from simpletfjob.quantity import units_text
from simpletfjob.runs.watch import Store

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
    """The options of a plan on empty nodes (what a run asks; whether it could ever fit); --port
    auto, which reads the pods, plans at the framework's default."""
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
    """`queue NAME`: its entries in order (listing), from one list of its Leases."""
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
    """An attempt of `run` sent, and its plan: with --queue at its turn, planned then by
    `replan(restart)` (`planned` is the run on empty nodes); without, `planned` as it is."""
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
    """Enter the queue, wait for the run's turn, and `send` it as `plan()` plans it then.

    `first` is the run planned on `empty_nodes` (its name and asks); `waiting` is given the
    waiting line as it changes. TimedOut when `deadline` passes first, nothing applied.
    """
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
        self.view = Store(())  # the queue's Leases, as watched
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
        self.view = Store(listed.items)
        number = max((e.number for e in entries_of(self.queue, listed.items)), default=0) + 1
        notes = entry_annotations(self.run, self.conn.namespace, self.asks)
        while True:
            name = entry_name(self.queue, number)
            body = lease_body(name, name, self.seconds, {QUEUE_LABEL: self.queue}, notes)
            with self.writing:
                self.entry, self.lost = self._send("create", None, body, (409,)), False
            if self.entry is not None:
                self.view.objects[name] = self.entry
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
                        answer = self._send("update", self.name, renewed(self.entry), (404,))
                        self.lost = answer is None
                        self.entry = answer or self.entry
                    if self.held is not None:
                        self.held = self._send("update", lock_name(self.queue), renewed(self.held))
            except ClusterError:
                pass  # the next renewal tries again; the waiting loop meets a server away

    def _fold(self, wait: float) -> None:
        """The watch's events so far (waiting up to `wait` seconds for one) into `view`."""
        try:
            event = self.events.get(timeout=wait)
            while True:
                if isinstance(event, Exception):
                    raise event
                self.view.apply(event)
                event = self.events.get_nowait()
        except queues.Empty:
            pass

    def _live(self, now: float) -> list[WaitingRun]:
        """The entries in order; those of other clients seen unchanged for their lease deleted."""
        for name, lease in self.view.objects.items():
            self.seen.saw(name, str(lease["metadata"].get("resourceVersion")), now)
        live = []
        for entry in entries_of(self.queue, self.view.objects.values()):
            if entry.name != self.name and self.seen.expired(
                entry.name, entry.version, entry.lease, now
            ):
                body = {"preconditions": {"resourceVersion": entry.version}}
                self._send("delete", entry.name, body, (404, 409))
                self.view.objects.pop(entry.name, None)
                self.seen.forget(entry.name)
                continue
            live.append(entry)
        return live

    def _admit(self, admit: Callable[[], R]) -> tuple[R] | None:
        """At the head: take the lock and admit the run under it; None if the lock is not free or
        the run is not the head. Entries are listed after the lock is read, so its holder's is in."""
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
        """Take the lock (`lock` as read; None: create it) by an update on its resourceVersion, so
        only one of two clients does; not while a live entry holds it and it has not expired."""
        lock_id = lock_name(self.queue)
        if lock is None:
            body = lease_body(lock_id, self.name, self.seconds, {QUEUE_LABEL: self.queue}, {})
            taken = self._send("create", None, body, (409,))
        else:
            holder, version = holder_of(lock), str(lock["metadata"]["resourceVersion"])
            lease = float(lock["spec"].get("leaseDurationSeconds") or self.seconds)
            held = holder in live and holder != self.name
            if held and not self.seen.expired(lock_id, version, lease, time.monotonic()):
                return False
            mine = {**lock, "spec": {**lock["spec"], "holderIdentity": self.name}}
            taken = self._send("update", lock_id, renewed(mine, acquired=True), (409,))
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


PREFIX = "simpletfjob-queue-"
QUEUE_LABEL = "simpletfjob/queue"
RUN = "simpletfjob/queue-run"  # annotations: the run's name and namespace, and what it asks
NAMESPACE = "simpletfjob/queue-namespace"
ASKS = "simpletfjob/queue-asks"
DIGITS = 6


def entry_name(queue: str, number: int) -> str:
    """`simpletfjob-queue-team-000042`."""
    return f"{PREFIX}{queue}-{number:0{DIGITS}d}"


def lock_name(queue: str) -> str:
    return f"{PREFIX}{queue}.lock"


def number_of(queue: str, name: str) -> int | None:
    """The entry's number, from its name; None for a name that is no entry of the queue."""
    rest = name.removeprefix(f"{PREFIX}{queue}-") if name.startswith(PREFIX) else ""
    return int(rest) if len(rest) >= DIGITS and rest.isascii() and rest.isdigit() else None


TIMES = "×"


@dataclass(frozen=True)
class Ask:
    """What a run asks for, for one role: its tasks, and each task's requests (as quantities)."""

    role: str
    tasks: int
    requests: Mapping[str, str] = field(default_factory=dict)

    def text(self, role: bool = True) -> str:
        """'2 worker × cpu 10', '1 chief × (cpu 2, memory 1Gi)', '1 ps'; without the role
        (the run's only one), '2 × cpu 10'."""
        each = ", ".join(f"{r} {q}" for r, q in self.requests.items())
        if len(self.requests) > 1:
            each = f"({each})"
        who = f"{self.tasks} {self.role}" if role else str(self.tasks)
        return who + (f" {TIMES} {each}" if each else "" if role else f" {self.role}")


def asks_of(
    roles: Iterable[str], asks: Sequence[tuple[str, Sequence[tuple[str, int]]]]
) -> list[Ask]:
    """Each role's Ask, from the plan's tasks' roles and what one task of each asks (its fit)."""
    counts = Counter(roles)
    per_role = dict(asks)
    return [
        Ask(role, n, {r: units_text(a, r) for r, a in per_role.get(role, ())})
        for role, n in counts.items()
    ]


@dataclass(frozen=True)
class WaitingRun:
    """One waiting run, as its Lease says."""

    name: str
    number: int
    run: str
    namespace: str
    since: str  # the Lease's creationTimestamp, as Kubernetes writes it
    asks: tuple[Ask, ...]
    version: str  # resourceVersion
    lease: float  # seconds its client lets pass between renewals, at most

    def as_dict(self, position: int, state: str) -> dict[str, Any]:
        """As `queue NAME -o json` gives it."""
        asks = [asdict(a) for a in self.asks]
        return {"position": position, "run": self.run, "namespace": self.namespace,
                "since": self.since, "asks": asks, "state": state}  # fmt: skip


def entry_annotations(run: str, namespace: str, asks: Sequence[Ask]) -> dict[str, str]:
    listed = json.dumps([asdict(a) for a in asks], separators=(",", ":"))
    return {RUN: run, NAMESPACE: namespace, ASKS: listed}


def entries_of(queue: str, leases: Iterable[Mapping[str, Any]]) -> list[WaitingRun]:
    """The queue's entries among its Leases, in order (by number); a Lease that is none is left out."""
    found = []
    for lease in leases:
        metadata = lease.get("metadata") or {}
        number = number_of(queue, str(metadata.get("name", "")))
        if number is None:
            continue
        notes = metadata.get("annotations") or {}
        found.append(
            WaitingRun(
                name=metadata["name"],
                number=number,
                run=str(notes.get(RUN, "")),
                namespace=str(notes.get(NAMESPACE, "")),
                since=str(metadata.get("creationTimestamp", "")),
                asks=_asks(notes.get(ASKS)),
                version=str(metadata.get("resourceVersion", "")),
                lease=float((lease.get("spec") or {}).get("leaseDurationSeconds") or 0),
            )
        )
    return sorted(found, key=lambda e: e.number)


def _asks(text: object) -> tuple[Ask, ...]:
    """What an entry's annotation says it asks; nothing, when it cannot be read."""
    try:
        asks = tuple(Ask(**ask) for ask in json.loads(str(text)))
    except (ValueError, TypeError):
        return ()
    return asks if all(isinstance(a.requests, dict) for a in asks) else ()


def listing(queue: str, leases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`queue NAME -o json`: the queue's entries in order, each with its position and its state:
    Admitting while it holds the queue's lock, else Waiting."""
    lock = next((x for x in leases if x["metadata"]["name"] == lock_name(queue)), None)
    states = {True: "Admitting", False: "Waiting"}
    entries = enumerate(entries_of(queue, leases), start=1)
    return [e.as_dict(i, states[holder_of(lock) == e.name]) for i, e in entries]


def place_in(
    leases: Sequence[Mapping[str, Any]], run: str, namespace: str
) -> dict[str, Any] | None:
    """Where a run waits among the Leases of every queue: {name, position, of}; None if nowhere."""
    for queue in sorted({str(x["metadata"]["labels"].get(QUEUE_LABEL)) for x in leases}):
        ours = [x for x in leases if x["metadata"]["labels"].get(QUEUE_LABEL) == queue]
        entries = entries_of(queue, ours)
        for i, entry in enumerate(entries, start=1):
            if (entry.run, entry.namespace) == (run, namespace):
                return {"name": queue, "position": i, "of": len(entries)}
    return None


def ordinal(n: int) -> str:
    """'1st', '2nd', '3rd', '4th', '11th', '22nd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def waiting_line(
    queue: str,
    position: int,
    of: int,
    asks: Sequence[Ask],
    nodes: int,
    why: str = "",
    most_free: tuple[str, str] | None = None,
) -> str:
    """`waiting in queue "team": 2nd of 3; needs 2 × cpu 10 on 1 node`; at the head, what it is
    short of (`, the most free on one node is cpu 2`), or else why it waits."""
    line = f'waiting in queue "{queue}": {ordinal(position)} of {of}'
    needs = ", ".join(a.text(role=len(asks) > 1) for a in asks)
    if needs:
        line += f"; needs {needs} on {nodes} {'node' if nodes == 1 else 'nodes'}"
    if most_free is not None:
        return f"{line}, the most free on one node is {most_free[0]} {most_free[1]}"
    return f"{line}; {why}" if why else line
