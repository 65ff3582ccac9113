"""A watch and the outage ride it shares with every stream of the command (kube/watch.py,
kube/outage.py, kube/request.Streak): a watch that said the server away says it back at its
next event, and one that keeps failing once the server is back for others says its own outage."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from types import SimpleNamespace
from typing import Any

import pytest

from simpletfjob.kube import watch
from simpletfjob.kube.connection import Settings
from simpletfjob.kube.outage import Ride
from simpletfjob.kube.resources import JOBS

EVENT = {"metadata": {"name": "mnist-worker-0", "resourceVersion": "8"}}
LINES = [  # the ride's lines, cut before the server's name and the time
    "simpletfjob: lost the API server",
    "simpletfjob: the API server is back",
    "simpletfjob: lost the API server",
    "simpletfjob: the API server is back",
]


def _failing_watch(
    monkeypatch: pytest.MonkeyPatch, failures: int, before_open: Callable[[int], None]
) -> tuple[Ride, list[str], watch._Watch]:
    """A watch of 3 attempts whose first `failures` openings drop, then one event; its ride and
    the ride's lines. `before_open(n)` runs before the n-th opening (from 0)."""
    said: list[str] = []
    ride = Ride("https://k (context 'c')", None, said.append, "it is back")
    settings = Settings(attempts=3, sleep=lambda seconds: None)
    conn = SimpleNamespace(
        settings=settings, ride=ride, target="https://k (context 'c')", namespace="ml"
    )
    one = watch._Watch(conn, JOBS, None, threading.Event(), resource_version="7")  # type: ignore[arg-type]
    tries = iter(range(failures + 1))

    def open_(self: watch._Watch, window: float, read_timeout: float) -> object:
        n = next(tries)
        before_open(n)
        if n < failures:
            raise watch._Dropped("connection dropped: refused")
        return object()

    def read(self: watch._Watch, response: Any) -> Generator[watch.Event, None, None]:
        yield watch.Event("MODIFIED", EVENT)

    monkeypatch.setattr(watch._Watch, "open", open_)
    monkeypatch.setattr(watch._Watch, "read", read)
    return ride, said, one


def test_a_watch_that_said_the_server_away_says_it_back_at_its_next_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another stream's 'back' coming between this watch's count of the returns and its 'lost'
    (another thread, at any instruction; kube/request.Streak): the watch's next event says the
    server back, or the ride would stay away for good."""
    ride, said, one = _failing_watch(monkeypatch, 3, lambda n: None)
    lost = ride.lost

    def lost_(cause: str, began: float | None = None) -> None:
        if not said:  # another stream, just before this watch's line: the server away, then back
            lost("connection refused")
            ride.back()
        lost(cause, began)

    monkeypatch.setattr(ride, "lost", lost_)
    assert next(one.follow(fresh=False)).object == EVENT
    assert not ride.away, said
    assert [s.split(" at ")[0].split(" after ")[0] for s in said] == LINES, said


def test_a_watch_failing_on_after_another_stream_found_the_server_back_says_it_lost_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server is back for another stream (its 'back'), while this watch still cannot open:
    its failures from then on are a new outage's, said once more past the attempts, and its
    event says the server back at last; the ride is not left saying the server is there."""
    ride: Ride | None = None

    def another_stream_answered(n: int) -> None:
        if n == 3:  # after this watch's 3 failures, which said the server away
            assert ride is not None and ride.away
            ride.back()

    ride, said, one = _failing_watch(monkeypatch, 6, another_stream_answered)
    assert next(one.follow(fresh=False)).object == EVENT
    assert not ride.away, said
    assert [s.split(" at ")[0].split(" after ")[0] for s in said] == LINES, said


def test_once_the_ride_is_over_a_late_answer_of_another_thread_says_nothing() -> None:
    """The command's error is its last line: a call of another thread, answered (a 401) after
    the ride ended with that error, said 'the API server is back' under it."""
    from simpletfjob.kube.outage import riding_out

    said: list[str] = []
    conn = SimpleNamespace(ride=None, target="https://k (context 'c')")
    with riding_out(conn, None, said.append, "it is back") as ride:  # type: ignore[arg-type]
        ride.lost("connection refused")
    ride.back()
    ride.lost("connection refused")
    assert len(said) == 1 and said[0].startswith("simpletfjob: lost the API server at https://k")
    assert conn.ride is None
