"""One request to the API server: retries, deadlines, TLS, and every failure as one line.

What is worth retrying is retried with backoff (5xx, 429 with its Retry-After, a
connection dropped before the answer), within the number of attempts and the
call's deadline. Everything else becomes a `ClusterError` naming the server and
context, and, where the answer was a refusal, the verb and the resource it was
about: `user 'ci' cannot list pods in namespace ml (403 Forbidden); ...`. Every RBAC
refusal has that one form, nodes' included, and names the user as the server does
(`user 'system:serviceaccount:ci:runner'`). The one refusal whose message names no
user, an apply that would create the object (the server checks `create` inside the
handler), is followed by a server dry run of a create, whose refusal names the user.

urllib3 and the client's exceptions are imported inside the functions, so that
importing this module costs an offline run nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import ClusterError
from simpletfjob.kube.refusals import (
    USER,
    apply_conflicts,
    conflict_line,
    first_line,
    refusal,
    status_of,
)
from simpletfjob.kube.resources import Action as Action

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


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


class Answer(NamedTuple):
    """The server's answer: its status and body, or for an open watch, the stream to read."""

    status: int
    data: bytes
    headers: Mapping[str, str]
    stream: Any = None  # the urllib3 response of an open stream (status 200), else None


class Unreachable(ClusterError):
    """No answer from the server at all: refused, timed out, TLS, a name that does not resolve."""


class OutOfTime(ClusterError):
    """The call's deadline came before a good answer did (the server kept failing meanwhile)."""

    def __init__(self, message: str, deadline: Deadline) -> None:
        super().__init__(message)
        self.deadline = deadline


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
) -> Answer:
    """One request for `action`, retried as needed; an error status not in `passthrough` raises.

    `body` is a JSON value, or bytes sent as they are (with a content type that is not JSON,
    such as server-side apply's YAML). With `stream`, a 200 answer is handed back unread (`Answer.stream`), for a watch.
    `read_timeout` replaces the settings' own (a watch waits longer than a list).
    """
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import (
        ConnectTimeoutError,
        HTTPError,
        MaxRetryError,
        NameResolutionError,
        NewConnectionError,
        ProtocolError,
        ProxyError,
        ReadTimeoutError,
        SSLError,
    )

    settings, target, client = conn.settings, conn.target, conn.client
    deadline = deadline or Deadline.after(settings.deadline)
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    problem = ""
    for attempt in range(max(1, settings.attempts)):
        remaining = deadline.remaining()
        if remaining <= 0:
            raise OutOfTime(
                f"{target}: no {action.outcome} within {deadline.seconds:g} s{problem}", deadline
            )
        connect_timeout = min(settings.connect_timeout, remaining)
        wait = min(settings.read_timeout if read_timeout is None else read_timeout, remaining)
        delay = min(settings.backoff * 2**attempt, settings.max_delay)
        try:
            serialized = client.param_serialize(
                method=action.method,
                resource_path=action.path,
                query_params=list(query),
                header_params=dict(headers),
                body=body,
                auth_settings=["BearerToken"],
            )
            response = client.call_api(*serialized, _request_timeout=(connect_timeout, wait))
            status = int(response.status)
            if stream and status == 200:
                return Answer(status, b"", response.headers, response.response)
            data = response.read()
        except ApiException as e:  # the REST layer reports TLS failures this way
            raise Unreachable(
                f"{target}: TLS error: {tls_detail(str(e.reason or e))}{_TLS_HINT}"
            ) from e
        except ProxyError as e:  # ('Unable to connect to proxy', the cause)
            cause = e.args[-1] if e.args else e
            raise Unreachable(
                f"{target}: cannot reach the proxy: {_connect_detail(cause)}; "
                "check $HTTPS_PROXY or the cluster's proxy-url"
            ) from e
        except MaxRetryError as e:  # only when a proxy or redirect is involved
            raise Unreachable(f"{target}: cannot reach the server: {first_line(e.reason)}") from e
        except SSLError as e:
            raise Unreachable(f"{target}: TLS error: {tls_detail(str(e))}{_TLS_HINT}") from e
        except NameResolutionError as e:
            raise Unreachable(
                f"{target}: unreachable: cannot resolve the server's host name; check the server in your kubeconfig"
            ) from e
        except NewConnectionError as e:
            raise Unreachable(
                f"{target}: unreachable: {_connect_detail(e)}; is the cluster up, and is this the right context?"
            ) from e
        except ConnectTimeoutError as e:
            raise Unreachable(
                f"{target}: unreachable: no answer from the server within {connect_timeout:g} s; "
                "is the cluster up and reachable from here?"
            ) from e
        except ReadTimeoutError as e:
            raise Unreachable(
                f"{target}: unreachable: the server took the request but sent no answer within {wait:g} s"
            ) from e
        except ProtocolError as e:  # the connection was reset or closed with no answer: retry
            problem = f" (last: connection dropped: {first_line(e)})"
            if attempt + 1 < settings.attempts:
                pause(conn, action, delay, deadline, problem)
            continue
        except HTTPError as e:
            raise Unreachable(f"{target}: cannot reach the server: {first_line(e)}") from e

        data = data if isinstance(data, bytes) else bytes(data)
        if 200 <= status < 300 or status in passthrough:
            return Answer(status, data, response.headers)
        reason, message, details = status_of(data, str(response.reason or ""))
        if status == 429 or status >= 500:
            problem = f" (last: {status} {reason}: {message})"
            retry_after = _retry_after(response.headers)
            if retry_after is not None:
                delay = retry_after
            if attempt + 1 < settings.attempts:
                pause(conn, action, delay, deadline, problem)
            continue
        conflicts = apply_conflicts(details) if status == 409 and action.verb == "apply" else []
        if conflicts:
            raise ApplyConflict(conflict_line(target, action, conflicts), action, conflicts)
        if status == 403 and action.verb == "apply" and not USER.search(message):
            message = _who_may_not_create(conn, action, deadline) or message
        raise ApiError(
            refusal(target, action, status, reason, message, details), status, reason, action
        )
    raise ClusterError(
        f"{target}: the server kept failing after {settings.attempts} attempts{problem}"
    )


def pause(conn: Connection, action: Action, delay: float, deadline: Deadline, problem: str) -> None:
    """Wait `delay` before the next attempt, unless the deadline would pass first."""
    if time.monotonic() + delay > deadline.at:
        raise OutOfTime(
            f"{conn.target}: no {action.outcome} within {deadline.seconds:g} s{problem}", deadline
        )
    conn.settings.sleep(delay)


_TLS_HINT = "; check certificate-authority in your kubeconfig, or that the server address is right"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def _who_may_not_create(conn: Connection, action: Action, deadline: Deadline) -> str | None:
    """The server's refusal of a create like the apply's, which names the user; None if it
    does not refuse it so (then the apply's refusal was not for `create`).

    A dry run (dryRun=All) of an empty body: the server authorizes the request before it
    reads the body, and changes nothing whatever it answers.
    """
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


def tls_detail(text: str) -> str:
    text = " ".join(text.split())
    found = re.search(r"certificate verify failed: ([^(]*)", text)
    if found:
        return f"certificate verify failed: {found[1].strip()}"
    found = re.search(r"\[SSL: [A-Z_]+\] ([^(]*)", text)
    if found:
        return found[1].strip()
    return re.sub(r"^SSLError ", "", text)[:200]


def _connect_detail(error: Exception) -> str:
    text = str(error)
    if "refused" in text.lower():
        return "connection refused"
    found = re.search(r"\[Errno -?\d+\] ([^')]*)", text)
    return found[1].strip() if found else first_line(text)
