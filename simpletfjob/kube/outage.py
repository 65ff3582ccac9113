"""Riding out an outage of the API server: a command that waits keeps trying until its deadline.

An API server that restarts while `wait`, `delete --wait` or `apply --replace` waits must not
end them as if the run had failed. Within `riding_out(conn, deadline, report, until)`, every
request on the connection treats no answer (refused, reset, a timeout), 429 and 5xx past the
usual attempts, and a watch that keeps dropping as an outage, and tries again, the delay
doubling up to OUTAGE_CAP seconds (request.py), until the deadline.

Answers (401, 403, 404, an invalid object) and a certificate that does not verify end the
call at once; so does a server that has not answered once since the command started (more
often a wrong context than an outage).

One line goes to `report` when the server goes away, and one when it is back:

    simpletfjob: lost the API server at https://10.0.0.1:6443 (context 'prod'): connection refused; retrying until the --timeout (1h)
    simpletfjob: the API server is back after 12s

When the deadline passes with the server still away, the call raises `StillAway`; a watch
ends then, as a quiet one does, and its caller reads `Ride.note()`. The ride belongs to the
connection in every thread while the `with` lasts, so several watches report one outage once.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

from simpletfjob.errors import ClusterError
from simpletfjob.kube.connection import RIDE, Connection
from simpletfjob.kube.request import Deadline


class StillAway(ClusterError):
    """The deadline passed while the API server was away; the message says since when."""


def still_away(error: BaseException) -> bool:
    """The error is a ride's deadline passing with the server away, or carries it."""
    return isinstance(error, StillAway) or isinstance(error.__cause__, StillAway)


class Ride:
    """One command's patience with its API server: until when, and whether it is away now."""

    def __init__(
        self,
        server: str,
        deadline: Deadline | None,
        report: Callable[[str], None],
        until: str,
    ) -> None:
        self.server = server  # as messages name it: 'https://10.0.0.1:6443 (context 'prod')'
        self.deadline = deadline  # None: as long as it takes
        self._report = report
        self._until = until  # 'the --timeout (1h)'
        self._lock = threading.Lock()
        self._since: float | None = None  # monotonic, while away
        self._since_wall = 0.0
        self._cause = ""
        self.returns = 0  # how many times the server has come back: each outage is counted anew
        self.closed = False  # the command is done with it: no line after its own last one

    def remaining(self) -> float:
        return math.inf if self.deadline is None else self.deadline.remaining()

    @property
    def away(self) -> bool:
        return self._since is not None

    def lost(self, cause: str, began: float | None = None) -> None:
        """The server failed a call, for `cause` (since `began`, monotonic): say so once."""
        now = time.monotonic()
        with self._lock:
            self._cause = cause
            if self._since is not None or self.closed:
                return
            self._since = min(now, began) if began is not None else now
            self._since_wall = time.time() - (now - self._since)
            self._report(
                f"simpletfjob: lost the API server at {self.server}: {cause}; "
                f"retrying until {self._until}"
            )

    def back(self) -> None:
        """A call was answered: the outage, if there was one, is over."""
        if self._since is None:  # the usual case, without taking the lock
            return
        with self._lock:
            if self._since is None or self.closed:
                return
            took = time.monotonic() - self._since
            self._since = None
            self.returns += 1
            self._report(f"simpletfjob: the API server is back after {go_duration(took)}")

    def note(self) -> str:
        """'the API server at ... has been unreachable since 12:03:04 (40s): connection refused'; '' when it is not away."""
        with self._lock:
            if self._since is None:
                return ""
            clock = time.strftime("%H:%M:%S", time.localtime(self._since_wall))
            took = go_duration(time.monotonic() - self._since)
            return (
                f"the API server at {self.server} has been unreachable since {clock} "
                f"({took}): {self._cause}"
            )

    def still_away(self) -> StillAway:
        return StillAway(self.note() or f"the API server at {self.server} is unreachable")


def go_duration(seconds: float) -> str:
    """'12s', '2m5s', '1h3m': how long, to the second, as Go prints a duration."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


@contextmanager
def riding_out(
    conn: Connection,
    deadline: Deadline | None,
    report: Callable[[str], None],
    until: str,
) -> Iterator[Ride]:
    """Every request on `conn` rides out an outage of the API server until `deadline`; see the module doc.
    `until` ends the first line: 'the --timeout (1h)'. A ride already under way (a command
    that calls another that rides) is kept."""
    if conn.ride is not None:
        yield cast("Ride", conn.ride)  # (the only patience a connection is given)
        return
    ride = Ride(str(conn.target), deadline, report, until)
    conn.ride = ride
    token = RIDE.set(ride)  # a connection opened meanwhile rides along (connection.py)
    try:
        yield ride
    finally:
        with ride._lock:  # a call of another thread answered late says nothing after the end
            ride.closed = True
        RIDE.reset(token)
        conn.ride = None
