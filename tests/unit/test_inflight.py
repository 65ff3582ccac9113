"""Writes sent from threads of their own (kube/inflight.py): in the order given, at most
`in_flight` out at a time, each in a thread other than the caller's, the threads kept for
the next writes and let go once idle."""

from __future__ import annotations

import threading
import time

import pytest

from simpletfjob.kube import inflight
from simpletfjob.kube.inflight import Sending, Write


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
