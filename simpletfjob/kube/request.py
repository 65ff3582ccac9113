"""One request to the API server: retries, deadlines, TLS, and every failure as one line.

What is worth retrying is retried with backoff (5xx, 429 with its Retry-After, a
connection dropped before the answer), within the number of attempts and the
call's deadline. Everything else becomes a `ClusterError` naming the server and
context, and, where the answer was a refusal, the verb and the resource it was
about: `user 'ci' cannot list pods in namespace ml (403 Forbidden); ...`.
While a command rides out an outage on the connection (outage.py), what is worth
retrying, and no answer at all, is retried until the ride's deadline instead.

urllib3 and the client's exceptions are imported inside the functions (send.py,
which makes each try), so that importing this module costs an offline run nothing.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import ClusterError
from simpletfjob.kube.resources import Resource
from simpletfjob.kube.send import (
    Answer,
    Dropped,
    Unreachable,
    first_line,
    send,
)

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection, Target

# The user-facing verb -> the HTTP method, and the verb RBAC rules name.
_METHODS = {"list": "GET", "watch": "GET", "get": "GET", "apply": "PATCH", "delete": "DELETE"}
_RBAC_VERBS = {"apply": "patch"}


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


class Action(NamedTuple):
    """What a request is about, as its messages say it: 'list pods in namespace ml'."""

    verb: str  # list, watch, get, apply or delete
    resource: Resource
    namespace: str | None = None  # None for a cluster-scoped resource; '' for all namespaces
    name: str | None = None  # None for the collection
    alternative: str = ""  # what else the user can do when refused, for the 403 message

    @property
    def method(self) -> str:
        return _METHODS[self.verb]

    @property
    def path(self) -> str:
        return self.resource.path(self.namespace, self.name)

    @property
    def scope(self) -> str:
        if not self.resource.namespaced or self.namespace is None:
            return ""
        return f" in namespace {self.namespace}" if self.namespace else " in all namespaces"

    @property
    def what(self) -> str:
        """'nodes', 'pods in namespace ml', "job 'mnist-ps-0' in namespace ml"."""
        if self.name is None:
            return f"{self.resource.plural}{self.scope}"
        return f"{self.resource.singular} {self.name!r}{self.scope}"

    @property
    def outcome(self) -> str:
        """What the call is to bring back, for 'no ... within 60 s'."""
        if self.verb == "list":
            return f"complete {self.resource.singular} list"
        return f"answer to {self}"

    def __str__(self) -> str:
        return f"{self.verb} {self.what}"


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
) -> Answer:
    """One request for `action`, retried as needed; an error status not in `passthrough` raises.

    `body` is a JSON value, or bytes sent as they are (with a content type that is not JSON,
    such as server-side apply's YAML). With `stream`, a 200 answer is handed back unread (`Answer.stream`), for a watch.
    `read_timeout` replaces the settings' own (a watch waits longer than a list).
    While the connection rides out an outage (outage.py), what is worth retrying is retried
    past the attempts and the call's deadline, until the ride's.
    """
    settings, target = conn.settings, conn.target
    deadline = deadline or Deadline.after(settings.deadline)
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    ride = conn.ride
    riding = False  # this call is waiting for the server to come back
    problem = ""  # the last failure worth retrying
    began: float | None = None  # when this call's failures began
    failures = 0
    outage_tries = 0  # tries since the server was found away
    while True:
        remaining = deadline.remaining()
        if remaining <= 0:
            if riding and ride is not None:
                raise ride.still_away()
            raise OutOfTime(
                f"{target}: no {action.outcome} within {deadline.seconds:g} s{_last(problem)}",
                deadline,
                problem,
            )
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
            if ride is not None and status != 429 and status < 500:
                ride.back()  # an answer, good or not: the server is there
            if 200 <= status < 300 or status in passthrough:
                return answer
            reason, message, details = status_of(answer.data, answer.reason)
            if status != 429 and status < 500:
                raise ApiError(
                    refusal(target, action, status, reason, message, details),
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
            if ride is None or ride.remaining() <= 0:
                if riding and ride is not None:
                    raise ride.still_away()
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
        pause(conn, action, delay, deadline, _last(problem))


_FOREVER = Deadline(math.inf, math.inf)
OUTAGE_CAP = 5.0  # seconds: the longest wait between two tries while the server is away


def _last(problem: str) -> str:
    return f" (last: {problem})" if problem else ""


def pause(conn: Connection, action: Action, delay: float, deadline: Deadline, problem: str) -> None:
    """Wait `delay` before the next attempt, unless the deadline would pass first."""
    if time.monotonic() + delay > deadline.at:
        raise OutOfTime(
            f"{conn.target}: no {action.outcome} within {deadline.seconds:g} s{problem}",
            deadline,
            problem.removeprefix(" (last: ").removesuffix(")"),
        )
    conn.settings.sleep(delay)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def status_of(data: bytes, http_reason: str) -> tuple[str, str, Mapping[str, Any]]:
    """The reason, first message line and details of a `Status` error body; the HTTP reason if it is not one."""
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        reason = str(body.get("reason") or http_reason or "")
        message = first_line(str(body.get("message") or "").strip())
        details = body.get("details")
        return reason, message or reason, details if isinstance(details, dict) else {}
    text = data[:200].decode("utf-8", "replace").strip()
    return http_reason, first_line(text) or http_reason, {}


def refusal(
    target: Target,
    action: Action,
    status: int,
    reason: str,
    message: str,
    details: Mapping[str, Any],
) -> str:
    """The one line for an error status: what was refused, and what to do about it."""
    if status == 401:
        return (
            f"{target}: the server refused your credentials (401 Unauthorized); "
            "log in again, or fix the user's token or certificate in your kubeconfig"
        )
    if status == 403:
        return _forbidden(target, action, message)
    if status == 404 and action.name is None:
        return (
            f"{target}: {action.method} {action.path} was not found (404); "
            "is this a Kubernetes API server?"
        )
    if status == 404 and details.get("kind") in (None, action.resource.plural):
        return f"{target}: {action.what} was not found (404 NotFound)"
    if action.method != "GET" or status == 404:
        # A write the server refused (a conflict, an invalid object, a missing namespace):
        # its message says why, this line says what was being done.
        return f"{target}: cannot {action}: {message} ({status} {reason})"
    return f"{target}: the server answered {status} {reason}: {message}"


def _forbidden(target: Target, action: Action, message: str) -> str:
    found = re.search(r'User "([^"]*)"', message)
    user = f"user {found[1]!r}" if found else "your user"
    said = re.search(r'cannot (\w+) resource "', message)
    if not found and not said and re.search(r"is forbidden: \S", message):
        # Not RBAC but an admission plugin (a quota, a pod security policy), in its own words.
        return f"{target}: cannot {action}: {message} (403 Forbidden)"
    if said:
        verb = said[1]
    elif action.verb == "apply":
        # The authorizer let the patch through (its refusal says so, with the user); an
        # apply that would create the object is checked for `create` inside the handler,
        # whose refusal names neither.
        verb = "create"
    else:
        verb = _RBAC_VERBS.get(action.verb, action.verb)
    resource = action.resource
    role = "ClusterRole" if not action.scope or action.namespace == "" else "Role"
    group = f" in API group '{resource.group}'" if resource.group else ""
    otherwise = f", or {action.alternative}" if action.alternative else ""
    if resource.plural == "nodes":
        # The node messages predate the others; scripts and the README quote them as they are.
        return (
            f"{target}: {user} may not {action} (403 Forbidden); it needs RBAC permission to "
            f"{verb} {resource.plural}{action.scope} (a {role} with verb '{verb}' on "
            f"'{resource.plural}'{group}){otherwise}"
        )
    # What was refused, in RBAC's words first (`cannot delete jobs in namespace ml`), then
    # the call that met it when that says more (`apply job 'mnist-ps-0'`).
    refused = f"{verb} {resource.plural}{action.scope}"
    if action.name is not None:
        call = f", to {action.verb} {resource.singular} {action.name!r}"
    else:
        call = "" if action.verb == verb else f", to {action.verb} them"
    return (
        f"{target}: {user} cannot {refused} (403 Forbidden{call}); it needs a {role} with verb "
        f"'{verb}' on '{resource.plural}'{group}{otherwise}"
    )
