"""Writes sent from threads of their own (kube/inflight.py): in the order given, at most
`in_flight` out at a time, each in a thread other than the caller's, the threads kept for
the next writes and let go once idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from simpletfjob.errors import Interrupted
from simpletfjob.kube import inflight
from simpletfjob.kube.inflight import Sending, Write, cut_short


def test_writes_run_in_order_outside_the_callers_thread_on_a_few_threads() -> None:
    ran: list[threading.Thread] = []
    lock = threading.Lock()

    def call(i: int) -> int:
        with lock:
            ran.append(threading.current_thread())
        time.sleep(0.002)
        return i

    writes = [Write(f"w{i}", lambda i=i: call(i)) for i in range(60)]  # type: ignore[misc]
    answers = [answer for _, answer in Sending(writes, 4)]
    assert answers == list(range(60))
    assert threading.current_thread() not in ran
    # One thread a write, before: starting one waits until it runs, seconds on a loaded machine.
    assert len(set(ran)) <= 4 + inflight._Threads.KEPT


def test_a_write_never_waits_behind_another_that_is_still_out() -> None:
    release = threading.Event()
    slow = Write("slow", lambda: release.wait(30)).start()
    fast = Write("fast", lambda: "done").start()
    assert fast.settle(10) and fast.result() == "done"  # while the slow one is out
    release.set()
    assert slow.result() is True


def test_idle_threads_leave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inflight._Threads, "IDLE", 0.05)
    Write("w", lambda: None).start().result()
    time.sleep(0.05)  # the thread that ran it may still be waiting from before
    Write("w", lambda: None).start().result()

    def ours() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "simpletfjob-write"]

    deadline = time.monotonic() + 10
    while ours() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ours() == []


def test_an_interrupt_withdraws_the_writes_whose_thread_had_not_begun_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a loaded machine a write's thread may not have run when the interrupt comes: that
    write is never sent, so the line names only those whose request may be out."""
    release = threading.Event()
    calls: list[str] = []

    def begun() -> bool:
        calls.append("out")
        return release.wait(30)

    out = Write("job.batch/out", begun).start()
    deadline = time.monotonic() + 10
    while not calls and time.monotonic() < deadline:  # its thread has begun it
        time.sleep(0.01)
    queued: list[Callable[[], None]] = []
    monkeypatch.setattr(inflight._THREADS, "run", queued.append)  # threads that have not run
    late = Write("job.batch/late", lambda: calls.append("late")).start()
    e = Interrupted(130)
    line = cut_short("applied", 1, 3, " of run 'mnist'", [out, late], e)
    assert line == (
        "applied 1 of 3 objects of run 'mnist' (job.batch/out was being applied, with no "
        "answer yet: it may still be carried out)"
    )
    assert e.unsettled == [out]
    assert late.answered and not late.landed and not late.started
    for call in queued:  # its thread runs at last: the withdrawn write is not sent
        call()
    assert calls == ["out"]
    release.set()
    assert out.result() is True
