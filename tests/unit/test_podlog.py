"""A container's log read on across a break (kube/podlog.py): whole lines from any chunks, and
the lines already handed over told apart by the kubelet's timestamps when the log is opened
again from the second of the last one."""

from __future__ import annotations

import calendar
import itertools
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.kube.podlog import Mark, lines_of, whole_lines
from simpletfjob.runs.logsources import Source, run_now


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=30))
def test_whole_lines_are_the_bytes_as_they_came_cut_only_after_each_newline(
    data: bytes, cuts: list[int]
) -> None:
    lines = [line for blob in whole_lines(split(data, cuts)) for line in lines_of(blob)]
    assert b"".join(lines) == (data if not data or data.endswith(b"\n") else data + b"\n")
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)


def test_a_10_mb_line_in_4_kb_chunks_is_one_line_and_a_carriage_return_ends_none() -> None:
    line = b"worker-1 " + b"x" * 10_000_000 + b"\n"
    chunks = [line[i : i + 4096] for i in range(0, len(line), 4096)]
    assert list(whole_lines(chunks)) == [line]
    blobs = list(whole_lines([b"10%\r20%\r", b"30%\nnext"]))
    assert [lines_of(blob) for blob in blobs] == [[b"10%\r20%\r30%\n"], [b"next\n"]]


def stamp(second: int, nanos: int) -> bytes:
    clock = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_800_000_000 + second))
    return f"{clock}.{nanos:09d}Z".encode()


# A kubelet's log: lines in order, their timestamps never going back, many in one second and
# some equal to the nanosecond (and equal lines).
LOGS = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 2), st.sampled_from([b"same", b"a", b"b c"])),
    min_size=1,
    max_size=40,
).map(
    lambda items: [
        stamp(second, nanos * 100_000_000) + b" " + text + b"\n"
        for second, nanos, text in sorted(items, key=lambda i: (i[0], i[1]))
    ]
)


def batches(lines: list[bytes], cuts: list[int]) -> list[list[bytes]]:
    points = sorted({min(c, len(lines)) for c in cuts} | {0, len(lines)})
    return [lines[a:b] for a, b in itertools.pairwise(points)]


@given(LOGS, st.data())
def test_a_log_opened_again_from_the_last_lines_second_goes_on_with_no_line_lost_or_repeated(
    log: list[bytes], data: st.DataObject
) -> None:
    broke_at = data.draw(st.integers(1, len(log)))
    mark = Mark()
    shown: list[bytes] = []
    for batch in batches(log[:broke_at], data.draw(st.lists(st.integers(0, 40)))):
        shown += mark.take(b"".join(batch), keep=False)
    # pods/log again with sinceTime: every line from the start of the last line's second
    second = mark.since()
    again = [line for line in log if line[: len(second) - 1] >= second[:-1].encode()]
    mark.resume()
    for batch in batches(again, data.draw(st.lists(st.integers(0, 40)))):
        shown += mark.take(b"".join(batch), keep=False)
    assert shown == [line.split(b" ", 1)[1] for line in log]


def test_the_mark_reads_timestamps_in_any_zone_and_precision_and_keeps_them_if_asked() -> None:
    mark = Mark()
    line = b"2026-11-27T09:00:01.5+01:00 hello\n"
    assert mark.take(line, keep=True) == [line]
    assert mark.since() == "2026-11-27T08:00:01Z"
    mark.resume()
    again = b"2026-11-27T08:00:01.500000000Z hello\n2026-11-27T08:00:01.6Z next\n"
    assert mark.take(again, keep=False) == [b"next\n"]
    assert calendar.timegm(time.strptime(mark.since(), "%Y-%m-%dT%H:%M:%SZ")) % 60 == 1


def pod(state: str, restarts: int) -> dict[str, object]:
    states = {
        "running": {"running": {}},
        "terminated": {"terminated": {"exitCode": 0}},
        "waiting": {"waiting": {"reason": "CrashLoopBackOff"}},
    }
    return {
        "metadata": {"name": "p"},
        "status": {
            "containerStatuses": [{"name": "tf", "restartCount": restarts, "state": states[state]}]
        },
    }


def test_after_a_break_the_run_read_is_found_again_or_known_lost() -> None:
    run_1 = Source("worker-0", "p", "tf", "worker-0", 1)
    assert run_now(pod("running", 1), run_1) == "running"
    assert run_now(pod("terminated", 1), run_1) == "ended"
    assert run_now(pod("waiting", 2), run_1) == "previous"  # it crashed; waits to start again
    assert run_now(pod("running", 2), run_1) == "previous"  # started again once since
    assert run_now(pod("running", 3), run_1) == "lost"  # twice: pods/log keeps only two runs


def test_an_ended_log_queued_for_a_reader_is_read_as_its_run_stands_at_its_turn() -> None:
    """A container started again in place while its ended log waited for one of the few
    readers: that run is read as `previous`, never followed into the new run."""
    from simpletfjob.runs.logsources import LogRequest, at_its_turn

    follow = LogRequest(follow=True, tail=10)
    run_1 = Source("worker-0", "p", "tf", "worker-0", 1)
    query = follow.query("tf")
    assert ("follow", "true") in query
    assert at_its_turn(follow, run_1, pod("terminated", 1), query) == query
    assert at_its_turn(follow, run_1, None, query) == query  # not told of yet: as queued
    again = at_its_turn(follow, run_1, pod("running", 2), query)
    assert again is not None
    assert dict(again) == {"container": "tf", "tailLines": 10, "previous": "true"}
    waits = at_its_turn(follow, run_1, pod("waiting", 2), query)
    assert waits is not None and dict(waits)["previous"] == "true"
    assert at_its_turn(follow, run_1, pod("running", 3), query) is None  # that run is gone
    # The run before the current one, and --previous, are read as asked.
    earlier = Source("worker-0", "p", "tf", "worker-0", 1, earlier=True)
    assert at_its_turn(follow, earlier, pod("running", 3), query) == query
    assert at_its_turn(LogRequest(previous=True), run_1, pod("running", 2), query) == query


def test_a_logs_breaks_are_counted_anew_once_the_server_was_seen_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a watch counts its failures (kube/watch.py): a log that broke a few times while the
    server was away, then broke once after another stream saw it back, is not an outage of its
    own. Counted on, that one break said 'lost the API server' with the server answering."""
    from types import SimpleNamespace

    from simpletfjob.kube import podlog
    from simpletfjob.kube.connection import Settings
    from simpletfjob.kube.outage import Ride

    said: list[str] = []
    ride = Ride("https://k (context 'c')", None, said.append, "it is back")
    settings = Settings(attempts=3, sleep=lambda seconds: None)
    conn = SimpleNamespace(settings=settings, ride=ride, target="https://k (context 'c')")
    line = b"2027-01-15T08:00:00.000000000Z step 1\n"

    def broken() -> Iterator[bytes]:
        raise podlog.LogBroken("the log broke off", "connection broken")
        yield b""  # (a generator)

    def answered() -> Iterator[bytes]:
        yield line

    # The server goes (another stream says so), the log breaks twice, the server is back (another
    # stream says so), the log is read on, then breaks once: a single break, not an outage.
    answers = iter([broken, broken, "back", broken, answered])

    def read(*args: object, **kwargs: object) -> Iterator[bytes]:
        answer = next(answers)
        if answer == "back":
            ride.back()
            answer = next(answers)
        return answer()  # type: ignore[operator]

    monkeypatch.setattr(podlog, "_answer_bytes", read)
    ride.lost("connection refused")
    lines = podlog.follow_log(
        conn,  # type: ignore[arg-type]
        "p",
        [("follow", "true")],
        keep_stamps=False,
        again=lambda broke: podlog.Again(previous=False, follow=True) if broke else None,
    )
    assert next(lines) == [b"step 1\n"]
    assert [s.split(" at ")[0].split(" after ")[0] for s in said] == [
        "simpletfjob: lost the API server",
        "simpletfjob: the API server is back",
    ], said


def test_a_log_that_said_the_server_away_says_it_back_at_its_next_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The breaks are counted anew where the log decides, after `again`, whose own request may
    ride the outage out and see the server back: counted before it, the log said 'lost' once
    the server was back, and its count, made anew at its next break, left the ride (shared by
    every stream) away for good. A log that said 'lost' says 'back' at its next line."""
    from types import SimpleNamespace

    from simpletfjob.kube import podlog
    from simpletfjob.kube.connection import Settings
    from simpletfjob.kube.outage import Ride

    said: list[str] = []
    ride = Ride("https://k (context 'c')", None, said.append, "it is back")
    settings = Settings(attempts=3, sleep=lambda seconds: None)
    conn = SimpleNamespace(settings=settings, ride=ride, target="https://k (context 'c')")

    def broken() -> Iterator[bytes]:
        raise podlog.LogBroken("the log broke off", "connection broken")
        yield b""  # (a generator)

    def answered() -> Iterator[bytes]:
        yield b"2027-01-15T08:00:00.000000000Z step 1\n"

    answers = iter([broken] * 4 + [answered])
    monkeypatch.setattr(podlog, "_answer_bytes", lambda *args, **kwargs: next(answers)())
    breaks = 0

    def again(broke: bool) -> podlog.Again | None:
        nonlocal breaks
        if not broke:
            return None
        breaks += 1
        if breaks == 3:  # read_pod, on the same connection, rides out the outage meanwhile
            ride.lost("connection refused")
            ride.back()
        return podlog.Again(previous=False, follow=True)

    lines = podlog.follow_log(
        conn,  # type: ignore[arg-type]
        "p",
        [("follow", "true")],
        keep_stamps=False,
        again=again,
    )
    assert next(lines) == [b"step 1\n"]
    assert not ride.away, said
    # read_pod's outage only: the log's 3rd break came after the server was seen back
    assert [s.split(" at ")[0].split(" after ")[0] for s in said] == [
        "simpletfjob: lost the API server",
        "simpletfjob: the API server is back",
    ], said
