"""A container's log through pods/log: whole lines as they come, and a follow that keeps going.

`read_log` reads one answer of pods/log in batches of whole lines (each ending with a
newline; only `\\n` ends a line, as for the kubelet), in time linear in its length however
long its lines are. A connection that breaks mid-answer is `LogBroken`.

`follow_log` reads a log as watch.py reads a watch: when its connection breaks (the API
server restarts, a proxy cuts it), the log is opened again where it stopped, with no line
lost and none repeated. pods/log cannot start at a line, and its `sinceTime` is taken to the
second; so the log is read with the kubelet's timestamps (`timestamps=true`), taken off
again unless the caller keeps them, and is opened again from the second of the last line
handed over: the lines stamped before that line, and as many of its own timestamp as were
handed over, are dropped. Before any line came, a log asked whole is read whole again; one
asked with `tailLines` or `sinceSeconds` is read from a second before it was first opened.

Whether and how to read on is the caller's to say (`again`): the container may have been
started again meanwhile, so that the run that was read is now the previous one, or is gone.
A followed answer that the server ends is read on once more from its last line in the same
way: a kubelet that restarts, or a server that shuts down, ends its answers as if the log
had ended.
A log that breaks again and again with nothing read is an outage, ridden out as a watch
rides it (outage.py), or without a ride an error.
"""

from __future__ import annotations

import calendar
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from simpletfjob.errors import ClusterError
from simpletfjob.kube.refusals import first_line
from simpletfjob.kube.request import OUTAGE_CAP, Action, ApiError, Streak, request
from simpletfjob.kube.resources import PODS
from simpletfjob.kube.send import arrived

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

Query = Sequence[tuple[str, str | int]]
DAY = 24 * 3600.0  # a followed log's read timeout: a container may print nothing for hours

_STAMP = re.compile(
    rb"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) "
)
# A line with the kubelet's timestamp: what follows it (a line without one is taken whole).
_CONTENT = re.compile(rb"(?:\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d) )?([^\n]*\n)")
_LINE = re.compile(rb"[^\n]*\n")
_RESUMED = frozenset({"follow", "previous", "timestamps", "tailLines", "sinceSeconds", "sinceTime"})


class LogBroken(ClusterError):
    """The connection of a log broke before the answer's end."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


class Again(NamedTuple):
    """How to read on after a break: the run before the container's current one, or the current."""

    previous: bool
    follow: bool


def read_log(
    conn: Connection, pod: str, query: Query, *, read_timeout: float | None = None
) -> Iterator[list[bytes]]:
    """One answer of pods/log as batches of whole lines, as they come."""
    for blob in _answer_bytes(conn, pod, query, read_timeout):
        yield lines_of(blob)


def read_chunks(conn: Connection, pod: str, query: Query) -> Iterator[bytes]:
    """One answer of pods/log as its bytes arrive, not held for a newline: a progress bar's
    updates, which carriage returns join, come before the bar's line ends (`LogBroken` as
    read_log). A 5xx is the kubelet's, which the API server relays (its node unreachable): a
    LogBroken to read on after, never an outage of the API server, nor a retry here."""
    return _answer_bytes(conn, pod, query, DAY, relayed=True)


def _answer_bytes(
    conn: Connection,
    pod: str,
    query: Query,
    read_timeout: float | None,
    relayed: bool = False,
) -> Iterator[bytes]:
    """The answer's bytes: in runs of whole lines, or (`relayed`, read_chunks) as they come."""
    action = Action("get", PODS, conn.namespace, pod, subresource="log")
    passthrough = range(500, 600) if relayed else ()
    answer = request(
        conn, action, query=query, stream=True, read_timeout=read_timeout, passthrough=passthrough
    )
    if answer.status >= 500:
        if answer.stream is not None:
            answer.stream.close()
        cause = f"{answer.status} {answer.reason}"
        raise LogBroken(f"{conn.target}: {action.what} was not answered ({cause})", cause)
    response = answer.stream
    from urllib3.exceptions import HTTPError

    try:
        yield from arrived(response) if relayed else whole_lines(arrived(response))
    except (HTTPError, OSError) as e:
        cause = f"connection broken: {_broke(e)}"
        raise LogBroken(f"{conn.target}: {action.what} broke off ({cause})", cause) from e
    finally:
        response.close()


def whole_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks' bytes in runs of whole lines, one as soon as a chunk completes a line; a
    last line without its newline gets one. Each byte is looked at once, however long the line."""
    parts: list[bytes] = []  # the start of a line not yet whole: joined once, when it is
    for chunk in chunks:
        end = chunk.rfind(b"\n") + 1  # only in the new chunk
        if not end:
            if chunk:
                parts.append(chunk)
            continue
        parts.append(chunk[:end])
        yield b"".join(parts)
        parts = []
        if end < len(chunk):
            parts.append(chunk[end:])
    if parts:
        yield b"".join(parts) + b"\n"


def lines_of(blob: bytes) -> list[bytes]:
    """Whole lines, each with its newline: split at newlines only (bytes.splitlines, the
    faster, also splits at a carriage return)."""
    return blob.splitlines(keepends=True) if b"\r" not in blob else _LINE.findall(blob)


def _broke(error: BaseException) -> str:
    """A few words for what broke a connection, not urllib3's nested reprs."""
    text = first_line(error)
    if "ended prematurely" in text or "IncompleteRead" in text or "InvalidChunkLength" in text:
        return "the server stopped in the middle of its answer"
    if "timed out" in text.lower():
        return "no data within the read timeout"
    if "reset" in text.lower():
        return "connection reset"
    return text[:120]


class Mark:
    """Where the caller is in the log: the last line's timestamp, and how many lines had it."""

    def __init__(self) -> None:
        self.stamp = b""  # the raw timestamp of the last line handed over
        self.count = 0  # lines handed over with that timestamp
        self.resuming = False  # the lines of a log opened again are checked against the mark
        self.skip = 0  # lines of the mark's own timestamp still to drop

    def take(self, blob: bytes, keep: bool) -> list[bytes]:
        """The lines of a run of whole lines that were not handed over before, stripped of their
        timestamps unless kept."""
        if self.resuming:
            blob = self._unseen(blob)
        if not blob:
            return []
        last = None
        same = 0  # the lines at the end of the blob with the last one's timestamp
        start = len(blob)
        while start:
            begin = blob.rfind(b"\n", 0, start - 1) + 1
            stamp = _stamp(blob[begin : begin + 40])
            if stamp is None or (last is not None and stamp != last):
                break
            last, same, start = stamp, same + 1, begin
        if last is not None:
            if start == 0 and last == self.stamp:
                same += self.count
            self.stamp, self.count = last, same
        return lines_of(blob) if keep else _CONTENT.findall(blob)

    def resume(self) -> None:
        """The log is opened again from the mark's second: drop what was handed over."""
        self.resuming = True
        self.skip = self.count

    def _unseen(self, blob: bytes) -> bytes:
        """The blob from its first line not handed over before; b"" while all of it was."""
        mark = _key(self.stamp)
        start = 0
        while start < len(blob):
            stamp = _stamp(blob[start : start + 40])
            if stamp is None:
                break  # a line without a timestamp: no telling, so it is shown
            key = _key(stamp)
            if key > mark or (key == mark and self.skip == 0):
                break
            if key == mark:
                self.skip -= 1
            start = blob.index(b"\n", start) + 1
        else:
            return b""
        self.resuming = False
        return blob[start:]

    def since(self) -> str:
        """The last line's second, as sinceTime takes it (UTC)."""
        seconds, _ = _key(self.stamp)
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def stamped(line: bytes) -> tuple[float | None, bytes]:
    """A line's kubelet timestamp (seconds since the epoch, None without one), and the rest."""
    found = _STAMP.match(line)
    if found is None:
        return None, line
    seconds, nanoseconds = _key(found[0][:-1])
    return seconds + nanoseconds / 1e9, line[found.end() :]


def _stamp(line: bytes) -> bytes | None:
    found = _STAMP.match(line)
    return found[0][:-1] if found else None


def _key(stamp: bytes) -> tuple[int, int]:
    """(seconds since the epoch, nanoseconds) of an RFC 3339 timestamp."""
    found = _STAMP.match(stamp + b" ")
    assert found is not None
    y, mo, d, h, mi, s = (int(found[i]) for i in range(1, 7))
    seconds = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    zone = found[8]
    if zone != b"Z":
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        seconds -= offset if zone[:1] == b"+" else -offset
    return seconds, int((found[7] or b"").ljust(9, b"0"))


def follow_log(
    conn: Connection,
    pod: str,
    query: Query,
    *,
    keep_stamps: bool,
    again: Callable[[bool], Again | None],
) -> Iterator[list[bytes]]:
    """The log as `query` asks it, read on across breaks as the module says.

    `again(broke)` is asked when the answer broke (True) or a followed answer ended (False):
    how to read on, or None when the log has been read to its end; it raises when what is
    left of the log cannot be read (its pod is gone).
    """
    settings = conn.settings
    base = [(k, v) for k, v in query if k not in _RESUMED]
    whole = not any(k in ("tailLines", "sinceSeconds") for k, _ in query)
    asked = [(k, v) for k, v in query if k != "timestamps"] + [("timestamps", "true")]
    mark = Mark()
    first = time.monotonic()
    streak = Streak(conn)  # breaks in a row with no line read
    current: list[tuple[str, str | int]] = asked
    ended = False  # the answer before this one ended, unbroken: this reads on after its end
    while True:
        follow = ("follow", "true") in current
        cause = ""
        try:
            for blob in _answer_bytes(conn, pod, current, DAY if follow else None):
                lines = mark.take(blob, keep_stamps)
                if lines:
                    streak.ok()
                    yield lines
        except LogBroken as e:
            cause = e.cause
        except ApiError as e:
            if ended and e.status == 404:
                # The pod went after its log's answer ended whole (the Job controller deletes
                # a failed task's pod at its backoff limit): nothing was cut, the log has ended.
                return
            raise
        else:
            if not follow:
                return
        go_on = again(bool(cause))
        if go_on is None:
            return
        ended = not cause
        if cause:  # counted once `again`'s call has been answered (it may find the server back)
            broken = streak.failed(
                cause, lambda n: f"the log of pod {pod} broke off {n} times in a row"
            )
            if broken > 1:  # the first break is read on at once; then as a watch does
                settings.sleep(min(settings.backoff * 2 ** (broken - 2), OUTAGE_CAP))
        current = [*base, ("timestamps", "true")]
        if go_on.follow:
            current.append(("follow", "true"))
        if go_on.previous:
            current.append(("previous", "true"))
        if mark.stamp:
            mark.resume()
            current.append(("sinceTime", mark.since()))
        elif not whole:
            # Nothing came yet: what was written since it was first opened, and a second more.
            current.append(("sinceSeconds", math.ceil(time.monotonic() - first) + 1))
