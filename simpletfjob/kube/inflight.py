"""A write that an interrupt does not cut off unseen: its request goes out from a thread of its own.

The caller's thread waits for the answer (`Write.result`). An interrupt there stops the
waiting, not the request: it was sent, and the server may still carry it out (behind a slow
admission webhook, a Job is created seconds after the client stopped waiting). `settle` waits
for its answer, so that what the cluster holds is known before anything is said or deleted:
`run --on-interrupt delete` settles the writes in flight before it deletes, and the line an
interrupt leaves says which write had no answer yet.
"""

from __future__ import annotations

import functools
import os
import queue
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from simpletfjob.errors import Interrupted

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")


class _Threads:
    """Threads kept for the next write once theirs is done: each write still runs in a thread
    of its own, never queued behind another, without starting a thread per write."""

    KEPT = 16  # idle threads kept at most; one more leaves once its write is done
    IDLE = 2.0  # seconds an idle thread waits for another write (a long-lived process keeps none)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []

    def run(self, call: Callable[[], None]) -> None:
        """Run `call` (which raises nothing) in a thread other than the caller's, at once."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(
                target=self._serve, args=(inbox,), name="simpletfjob-write", daemon=True
            ).start()
        inbox.put(call)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        call = inbox.get()
        while True:
            call()
            with self._lock:
                if len(self._idle) >= self.KEPT:
                    return
                self._idle.append(inbox)
            try:
                call = inbox.get(timeout=self.IDLE)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # no write for it: it leaves
                        self._idle.remove(inbox)
                        return
                call = inbox.get()  # taken meanwhile: its write is on its way

    def forget(self) -> None:
        """In a forked child: the parent's threads are not there."""
        self._lock = threading.Lock()
        self._idle = []


_THREADS = _Threads()
os.register_at_fork(after_in_child=_THREADS.forget)


class Write(Generic[T]):
    """`call` (one request, or a few) running in its own thread; `what` names it for messages."""

    def __init__(self, what: str, call: Callable[[], T]) -> None:
        self.what = what  # 'job.batch/mnist-worker-1'
        self._call = call
        self._done = threading.Event()
        self._result: T | None = None
        self._error: BaseException | None = None
        self.started = False
        self._lock = threading.Lock()
        self._taken_up = False  # its thread has begun the call: the request may be out

    def start(self) -> Write[T]:
        """Send it; apart from making it, so the caller holds the write before an interrupt."""
        self.started = True
        _THREADS.run(self._run)
        return self

    def withdraw(self) -> bool:
        """Keep it from going if its thread has not begun it yet; whether nothing was sent."""
        with self._lock:
            if not self._taken_up:
                self.started = False
            return not self.started

    def _run(self) -> None:
        with self._lock:
            if not self.started:  # withdrawn
                return
            self._taken_up = True
        try:
            self._result = self._call()
        except BaseException as e:  # handed to the caller, in its thread
            self._error = e
        finally:
            self._done.set()

    def result(self) -> T:
        """The answer, waited for; the call's error is raised here, in the caller's thread."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]  # (set: the call returned)

    def settle(self, seconds: float) -> bool:
        """Wait up to `seconds` for the answer; whether it has come (good or not)."""
        return not self.started or self._done.wait(max(0.0, seconds))

    @property
    def answered(self) -> bool:
        """The answer has come; a write never started counts as answered (nothing is out)."""
        return self._done.is_set() or not self.started

    @property
    def landed(self) -> bool:
        """Answered, and not with an error: the write was carried out."""
        return self._done.is_set() and self._error is None


class Sending(Generic[T]):
    """Writes sent in the order given, at most `in_flight` out at a time, their answers taken
    in that order (iterate): an apply or a delete of many objects. An interrupt or an error in
    the caller's thread stops the sending; `cut_short` and `settle` say what became of those out."""

    def __init__(self, writes: Sequence[Write[T]], in_flight: int) -> None:
        self.writes = writes
        self.in_flight = max(1, in_flight)
        self.taken = 0  # answers taken, in order
        self._sent = 0

    def __iter__(self) -> Iterator[tuple[Write[T], T]]:
        while self.taken < len(self.writes):
            while self._sent < min(len(self.writes), self.taken + self.in_flight):
                self._sent += 1  # counted out first: one an interrupt keeps from going is withdrawn
                self.writes[self._sent - 1].start()
            write = self.writes[self.taken]
            answer = write.result()  # its error is raised here, and `taken` stays on it
            yield write, answer
            self.taken += 1  # once the caller has done with it: until then it is out

    def out(self) -> list[Write[T]]:
        """The writes sent whose answers were not taken: the one the caller holds until it asks
        for the next (an interrupt finds it counted by the caller or here), and one that failed."""
        return list(self.writes[self.taken : self._sent])

    def settle(self, seconds: float) -> list[Write[T]]:
        """After an error: wait up to `seconds` for the other writes out; those that landed."""
        from simpletfjob.kube.request import Deadline

        deadline = Deadline.after(seconds)
        out = self.out()
        for write in out:
            write.settle(deadline.remaining())
        return [w for w in out if w.landed]


def cut_short(
    verb: str,
    done: int,
    total: int,
    of: str,
    sending: Write[Any] | Sequence[Write[Any]] | None,
    e: Interrupted,
) -> str:
    """How far writes got when `e` stopped them: 'applied 2 of 6 objects {of} (job.batch/x was
    being applied, with no answer yet: it may still be carried out)'.

    Of `sending`, the writes out then: each carried out counts as done, each not begun is
    withdrawn, each with no answer yet goes to `e.unsettled` and is named.
    """
    out = [] if sending is None else [sending] if isinstance(sending, Write) else list(sending)
    # Each write is read once, answered or not: one answered between two separate reads
    # (landed, then answered) would be counted neither done nor pending.
    pending: list[Write[Any]] = []
    for write in out:
        if write.withdraw():
            continue  # not sent: neither done nor out
        if not write.answered:
            pending.append(write)
        elif write.landed:
            done += 1
    e.unsettled.extend(pending)
    if not pending:
        return f"{verb} {done} of {total} objects{of}"
    names = ", ".join(w.what for w in pending[:3])
    if len(pending) > 3:
        names += f" and {len(pending) - 3} more"
    one = len(pending) == 1
    being = (
        f" ({names} {'was' if one else 'were'} being {verb}, with no answer yet: "
        f"{'it' if one else 'they'} may still be carried out)"
    )
    return f"{verb} {done} of {total} objects{of}{being}"


class Pool:
    """ThreadPoolExecutor's `submit`, `map` and `shutdown`, in daemon threads: the interpreter
    waits at its end for a ThreadPoolExecutor's threads, so an unanswered read after an
    interrupt would hold the process a whole deadline."""

    def __init__(self, size: int, name: str) -> None:
        self._size = max(1, size)
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []

    def submit(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        from concurrent.futures import Future

        future: Future[T] = Future()
        self._queue.put((future, functools.partial(call, *args, **kwargs)))
        if len(self._threads) < self._size:
            name = f"{self._name}_{len(self._threads)}"
            thread = threading.Thread(target=self._work, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return future

    def map(self, call: Callable[[Any], T], items: Iterable[Any]) -> Iterator[T]:
        """Each item's answer, in order; the first error is raised as its turn comes."""
        futures = [self.submit(call, item) for item in items]
        return (future.result() for future in futures)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        """No more calls; `cancel_futures`: those not begun never are; `wait`: wait for those out."""
        while cancel_futures:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, call = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled
            try:
                answer = call()
            except BaseException as e:  # handed to the caller, in its thread
                future.set_exception(e)
            else:
                future.set_result(answer)


def in_order(
    calls: Sequence[Callable[[], T]], in_flight: int
) -> Generator[T | Exception, None, None]:
    """Each call's answer, or the error it raised, in order; at most `in_flight` out at a time.
    For reads and dry runs. Closing the iterator (or an interrupt) cancels the calls not yet
    sent and leaves those out to end by their deadline, unread."""
    if in_flight <= 1 or len(calls) <= 1:
        for call in calls:
            yield _outcome(call)
        return
    pool = Pool(min(in_flight, len(calls)), "simpletfjob-read")
    try:
        yield from pool.map(_outcome, calls)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _outcome(call: Callable[[], T]) -> T | Exception:
    try:
        return call()
    except Exception as e:  # handed to the caller, in its thread, in its turn
        return e
