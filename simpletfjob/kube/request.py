"""One request to the API server: retries, deadlines, TLS, and every failure as one line.

What is worth retrying is retried with backoff (5xx, 429 with its Retry-After, a
connection dropped before the answer), within the number of attempts and the
call's deadline. Everything else becomes a `ClusterError` naming the server and
context, and, where the answer was a refusal, the verb and the resource it was
about: `user 'ci' cannot list pods in namespace ml (403 Forbidden); ...`.

urllib3 and the client's exceptions are imported inside the functions, so that
importing this module costs an offline run nothing.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import ClusterError
from simpletfjob.kube.resources import Resource

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
        conflicts = _apply_conflicts(details) if status == 409 and action.verb == "apply" else []
        if conflicts:
            raise ApplyConflict(_conflict_line(target, action, conflicts), action, conflicts)
        raise ApiError(
            refusal(target, action, status, reason, message, details), status, reason, action
        )
    raise ClusterError(
        f"{target}: the server kept failing after {settings.attempts} attempts{problem}"
    )


def _apply_conflicts(details: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(manager, field) of each FieldManagerConflict cause: 'conflict with "kubectl-patch" using batch/v1'."""
    found = []
    for cause in details.get("causes") or ():
        if isinstance(cause, Mapping) and cause.get("reason") == "FieldManagerConflict":
            manager = re.search(r'conflict with "([^"]*)"', str(cause.get("message") or ""))
            found.append((manager[1] if manager else "another manager", str(cause.get("field"))))
    return found


def _conflict_line(target: Target, action: Action, conflicts: Sequence[tuple[str, str]]) -> str:
    """'...: cannot apply job 'x' in namespace ml: .spec.backoffLimit is owned by field manager
    'kubectl-patch' (409 Conflict)', one clause per manager, as kubectl lists them."""
    fields: dict[str, list[str]] = {}
    for manager, field in conflicts:
        fields.setdefault(manager, []).append(field)
    owned = "; ".join(
        f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} owned by field manager {manager!r}"
        for manager, names in fields.items()
    )
    return f"{target}: cannot {action}: {owned} (409 Conflict)"


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


def first_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else ""
