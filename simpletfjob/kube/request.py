"""One request to the API server: retries, deadlines, TLS, and every failure as one line.

5xx, 429 (with its Retry-After) and a connection dropped before the answer are retried
with backoff, within the attempts and the call's deadline (during a ride, outage.py, until
the ride's). Everything else is a `ClusterError` naming the server and context and, for a
refusal, the verb and resource (refusals.py words them). An apply refused `create` names
no user, so a server dry run of a create follows, whose refusal does.

urllib3 and the client are imported only inside send.py's functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, NamedTuple

from simpletfjob.errors import ClusterError
from simpletfjob.kube.refusals import (
    USER,
    apply_conflicts,
    conflict_line,
    refusal_line,
    status_of,
)
from simpletfjob.kube.resources import Action as Action
from simpletfjob.kube.send import Answer as Answer
from simpletfjob.kube.send import Dropped, send
from simpletfjob.kube.send import Unreachable as Unreachable

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection, Patience


class Deadline(NamedTuple):
    """When a call must be done by: `seconds` as given (for messages), `at` on the monotonic clock."""

    seconds: float
    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(seconds, time.monotonic() + seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def sooner(self, seconds: float) -> Deadline:
        """This deadline, or one `seconds` from now if that comes first."""
        return self if self.remaining() <= seconds else Deadline.after(seconds)


class KeptFailing(ClusterError):
    """5xx, 429 or dropped connections, attempt after attempt; `cause` is the last of them."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


class OutOfTime(ClusterError):
    """The call's deadline came before a good answer did (the server kept failing meanwhile)."""

    def __init__(self, message: str, deadline: Deadline, cause: str = "") -> None:
        super().__init__(message)
        self.deadline = deadline
        self.cause = cause


class ApiError(ClusterError):
    """The server answered with an error it meant (not one worth retrying)."""

    def __init__(self, message: str, status: int, reason: str, action: Action) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.action = action


class ApplyConflict(ApiError):
    """Server-side apply met fields that another field manager owns (409, FieldManagerConflict)."""

    def __init__(self, message: str, action: Action, conflicts: Sequence[tuple[str, str]]) -> None:
        super().__init__(message, 409, "Conflict", action)
        self.conflicts = list(conflicts)  # (manager, field) as the server names them

    @property
    def managers(self) -> list[str]:
        return list(dict.fromkeys(manager for manager, _ in self.conflicts))


def request(
    conn: Connection,
    action: Action,
    *,
    query: Sequence[tuple[str, str | int]] = (),
    body: object = None,
    content_type: str = "application/json",
    deadline: Deadline | None = None,
    passthrough: Collection[int] = (),
    stream: bool = False,
    read_timeout: float | None = None,
    accept: str = "application/json",
) -> Answer:
    """One request for `action`, retried as needed; an error status not in `passthrough` raises.

    `body` is a JSON value, or bytes sent as they are (server-side apply's YAML). With
    `stream`, a 200 answer is handed back unread (`Answer.stream`). `read_timeout` replaces
    the settings' own, and a stream's body waits it past the deadline; `accept` is the Accept
    header. During a ride (outage.py), what is worth retrying is retried until the ride's
    deadline.
    """
    settings, target = conn.settings, conn.target
    deadline = deadline or Deadline.after(settings.deadline)
    headers = {"Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type
    ride = conn.ride
    riding = False  # this call is waiting for the server to come back
    problem = ""  # the last failure worth retrying
    began: float | None = None  # when this call's failures began
    failures = 0
    outage_tries = 0  # tries since the server was found away
    while True:
        if getattr(conn, "closed", False):  # its command has ended: nobody waits for this
            raise ClusterError(f"{target}: the connection was closed before {action} was answered")
        remaining = deadline.remaining()
        if remaining <= 0:
            if ride is not None and (riding or (problem and ride.remaining() <= 0)):
                raise _timed_out(ride, problem, began)
            raise _out_of_time(conn, action, deadline, problem)
        connect_timeout = min(settings.connect_timeout, remaining)
        wait = min(settings.read_timeout if read_timeout is None else read_timeout, remaining)
        retry_after: float | None = None
        try:
            answer = send(
                conn,
                action.method,
                action.path,
                query,
                headers,
                body,
                stream,
                connect_timeout,
                wait,
            )
        except Dropped as e:  # the connection was reset or closed with no answer: retry
            problem = f"connection dropped: {e}"
        except Unreachable as e:
            if ride is None or e.lasting or not conn.answered:
                raise
            if ride.remaining() <= 0:
                if ride.away:
                    raise ride.still_away() from e
                raise
            problem = e.cause
            began = time.monotonic() if began is None else began
            failures = max(failures + 1, settings.attempts)  # no answer at all: away at once
        else:
            conn.answered = True
            status = answer.status
            if riding and ride is not None and status != 429 and status < 500:
                # An answer, good or not, to a call that waited out the outage: the server is
                # back. Another call's answer is not enough: while one call is throttled or
                # failing, the others may be answered, and the outage would flap.
                ride.back()
            if 200 <= status < 300 or status in passthrough:
                if answer.stream is not None and hasattr(conn, "streaming"):
                    conn.streaming(answer.stream)
                if answer.stream is not None and read_timeout is not None:
                    # Its headers came within the deadline; its body waits its own timeout (a
                    # watch's window), or a quiet watch broke at the deadline every minute.
                    with suppress(AttributeError, OSError):
                        answer.stream.connection.sock.settimeout(read_timeout)
                return answer
            reason, message, details = status_of(answer.data, answer.reason)
            if status != 429 and status < 500:
                conflicts = (
                    apply_conflicts(details) if status == 409 and action.verb == "apply" else []
                )
                if conflicts:
                    raise ApplyConflict(conflict_line(target, action, conflicts), action, conflicts)
                if status == 403 and action.verb == "apply" and not USER.search(message):
                    message = _who_may_not_create(conn, action, deadline) or message
                raise ApiError(
                    refusal_line(target, action, status, reason, message, details),
                    status,
                    reason,
                    action,
                )
            problem = f"{status} {reason}: {message}"
            retry_after = _retry_after(answer.headers)
        if began is None:
            began = time.monotonic()
        if failures < settings.attempts:
            failures += 1
        delay = min(settings.backoff * 2 ** (failures - 1), settings.max_delay)
        if retry_after is not None:
            delay = retry_after
        if failures >= settings.attempts:
            if ride is not None and ride.remaining() <= 0:
                # the ride's deadline passed with the server failing: its error, not a retry
                # count, whether or not another call had found the server away
                raise _timed_out(ride, problem, began)
            if ride is None:
                raise KeptFailing(
                    f"{target}: the server kept failing after {settings.attempts} attempts"
                    f"{_last(problem)}",
                    problem,
                )
            ride.lost(problem, began)
            riding = True
            deadline = ride.deadline or _FOREVER
            # Our own delay doubles up to the cap; a longer Retry-After is the server's to ask.
            delay = max(retry_after or 0.0, min(settings.backoff * 2**outage_tries, OUTAGE_CAP))
            outage_tries += 1
            settings.sleep(max(0.0, min(delay, ride.remaining())))
            continue
        if ride is not None and ride.remaining() <= delay and deadline.remaining() <= delay:
            # Both run out before the next attempt: the --timeout passes first, as it says.
            settings.sleep(max(0.0, ride.remaining()))
            raise _timed_out(ride, problem, began)
        if time.monotonic() + delay > deadline.at:  # the deadline would pass first
            raise _out_of_time(conn, action, deadline, problem)
        settings.sleep(delay)


_FOREVER = Deadline(math.inf, math.inf)


def _timed_out(ride: Patience, problem: str, began: float | None) -> ClusterError:
    """The ride's deadline (the command's --timeout) has come while the server kept failing,
    so the command ends as its --timeout says (wait and run: exit 3)."""
    if problem:
        ride.lost(problem, began)  # says so once, if the attempts had not said it yet
    return ride.still_away()


OUTAGE_CAP = 5.0  # seconds: the longest wait between two tries while the server is away


class Streak:
    """A stream's failures in a row (a watch, a followed log). Past the settings' attempts, with
    a ride under way (outage.py), the stream says the server is away, once, and at its next
    success that it is back; without a ride, or past its deadline, KeptFailing. Only the stream
    that said the server away says it back: another call's answer is not enough while this one
    keeps failing. A failure after the ride saw the server back (since the last) starts anew."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.count = 0
        self.returns = 0  # the ride's count of the server's returns at the last failure
        self.away = False  # this stream said the server was away

    def ok(self) -> None:
        """The stream read something: its streak is over, and the outage it said."""
        ride = self.conn.ride  # (read once: the ride ends in another thread)
        if self.away and ride is not None:
            ride.back()
        self.count, self.away = 0, False

    def failed(self, problem: str, kept: Callable[[int], str]) -> int:
        """One failure more, for `problem`: the count. `kept(count)`, what kept failing, begins
        KeptFailing's message."""
        ride, attempts = self.conn.ride, self.conn.settings.attempts
        returns = ride.returns if ride is not None else 0  # read once: another thread adds
        if returns > self.returns:
            self.count = 0
        self.returns = returns
        self.count += 1
        if self.count >= attempts:
            if ride is None or ride.remaining() <= 0:
                raise KeptFailing(
                    f"{self.conn.target}: {kept(self.count)}{_last(problem)}", problem
                )
            if self.count == attempts:  # one line for the streak
                ride.lost(problem)
                self.away = True
        return self.count


def _last(problem: str) -> str:
    return f" (last: {problem})" if problem else ""


def _out_of_time(conn: Connection, action: Action, deadline: Deadline, problem: str) -> OutOfTime:
    return OutOfTime(
        f"{conn.target}: no {action.outcome} within {deadline.seconds:g} s{_last(problem)}",
        deadline,
        problem,
    )


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def _who_may_not_create(conn: Connection, action: Action, deadline: Deadline) -> str | None:
    """The server's refusal of a create like the apply's, which names the user; None if it
    does not refuse it. A dry run of an empty body: authorized before the body is read."""
    probe = Action("create", action.resource, action.namespace)
    try:
        answer = request(
            conn,
            probe,
            query=[("dryRun", "All")],
            body={},
            deadline=deadline.sooner(5.0),
            passthrough=range(400, 600),
        )
    except ClusterError:
        return None
    if answer.status != 403:
        return None
    _, message, _ = status_of(answer.data, "Forbidden")
    return message if USER.search(message) else None
