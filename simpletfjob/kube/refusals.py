"""What the API server's refusals say, in one line each: what was refused, and what to do.

`refusal_line()` words an error status for the action it answered: a 403 names the user as
the server gives it and the RBAC rule that would allow the call (`user 'ci' cannot list
pods in namespace ml (403 Forbidden); it needs a Role with verb 'list' on 'pods'`); a
409 from server-side apply names each field manager and the fields it owns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Target
    from simpletfjob.kube.resources import Action

_RBAC_VERBS = {"apply": "patch"}


def apply_conflicts(details: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(manager, field) of each FieldManagerConflict cause: 'conflict with "kubectl-patch" using batch/v1'."""
    found = []
    for cause in details.get("causes") or ():
        if isinstance(cause, Mapping) and cause.get("reason") == "FieldManagerConflict":
            manager = re.search(r'conflict with "([^"]*)"', str(cause.get("message") or ""))
            found.append((manager[1] if manager else "another manager", str(cause.get("field"))))
    return found


def conflict_line(target: Target, action: Action, conflicts: Sequence[tuple[str, str]]) -> str:
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


def refusal_line(
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


USER = re.compile(r'User "([^"]*)"')


def _forbidden(target: Target, action: Action, message: str) -> str:
    found = USER.search(message)
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
    # What was refused, in RBAC's words first (`cannot delete jobs in namespace ml`), then
    # the call that met it when that says more (`apply job 'mnist-ps-0'`).
    refused = f"{verb} {action.rbac_resource}{action.scope}"
    if action.subresource:
        call = f", to read {action.what.removesuffix(action.scope)}"
    elif action.name is not None:
        call = f", to {action.verb} {resource.singular} {action.name!r}"
    else:
        call = "" if action.verb == verb else f", to {action.verb} them"
    return (
        f"{target}: {user} cannot {refused} (403 Forbidden{call}); it needs a {role} with verb "
        f"'{verb}' on '{action.rbac_resource}'{group}{otherwise}"
    )


def first_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else ""
