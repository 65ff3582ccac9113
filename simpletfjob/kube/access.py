"""What the user may do, asked of the API server before a command relies on it.

`allowed()` sends a SelfSubjectAccessReview for each verb and resource, a few at a time:
the authorizer answers as for the real requests, whatever it is; no rule is judged here.
A server that cannot say gives None, and the command learns from its requests.

`refused_user()` names the user as the server knows it, from the refusal of a request that
changes nothing: a review does not say who asked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError
from simpletfjob.kube.outage import StillAway
from simpletfjob.kube.refusals import USER, status_of
from simpletfjob.kube.request import Action, Deadline, request
from simpletfjob.kube.resources import Resource

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False
)
WITHIN = 10.0  # seconds for every review together: a server slower than that is left to say it
PROBE = "simpletfjob-access-check"  # a name asked for only to be refused


def allowed(conn: Connection, actions: Sequence[Action]) -> list[bool] | None:
    """Whether the user may do each action (verb, resource and subresource, in its namespace).
    The reviews go `conn.settings.in_flight` at a time. None when the server cannot answer
    them all: not served (404), refused, not JSON, or no answer within WITHIN seconds."""
    from simpletfjob.kube.inflight import Pool

    if not actions:
        return []
    deadline = Deadline.after(min(WITHIN, conn.settings.deadline))
    workers = max(1, min(conn.settings.in_flight, len(actions)))
    pool = Pool(workers, "simpletfjob-access")
    try:
        answers = list(pool.map(lambda action: _review(conn, action, deadline), actions))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if any(answer is None for answer in answers):
        return None
    return [bool(answer) for answer in answers]


def _review(conn: Connection, action: Action, deadline: Deadline) -> bool | None:
    attributes: dict[str, str] = {
        "verb": action.verb,
        "group": action.resource.group,
        "resource": action.resource.plural,
    }
    if action.subresource:
        attributes["subresource"] = action.subresource
    if action.namespace:
        attributes["namespace"] = action.namespace
    body = {
        "apiVersion": REVIEWS.api_version,
        "kind": REVIEWS.kind,
        "spec": {"resourceAttributes": attributes},
    }
    try:
        answer = request(
            conn,
            Action("create", REVIEWS),
            body=body,
            deadline=deadline,
            passthrough=range(400, 500),
        )
    except StillAway:  # the command's --timeout passed in an outage: not an unknown answer
        raise
    except ClusterError:
        return None
    if answer.status >= 300:
        return None
    try:
        status = json.loads(answer.data).get("status")
    except (ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(status, Mapping) or not isinstance(status.get("allowed", False), bool):
        return None
    return bool(status.get("allowed"))


def refused_user(conn: Connection, actions: Sequence[Action]) -> str | None:
    """The user as the server names it in a refusal of one of `actions`; None if none says.
    The request asks for the action on a name no object has (a dry run where it writes; a
    selector nothing matches for a list): it reads and changes nothing."""
    nothing = ("labelSelector", f"{PROBE}=none")
    probes: Mapping[str, tuple[str | None, list[tuple[str, str | int]], Any]] = {
        "get": (PROBE, [], None),
        "list": (None, [("limit", 1), nothing], None),
        "watch": (None, [("watch", "true"), ("timeoutSeconds", 1), nothing], None),
        "create": (None, [("dryRun", "All")], {}),
        "patch": (PROBE, [("dryRun", "All")], {}),
        "update": (PROBE, [("dryRun", "All")], {}),
        "delete": (PROBE, [("dryRun", "All")], {"kind": "DeleteOptions", "apiVersion": "v1"}),
    }
    for action in actions:
        if action.verb not in probes:
            continue
        name, query, body = probes[action.verb]
        probe = action._replace(name=name if action.subresource == "" else PROBE)
        try:
            answer = request(
                conn,
                probe,
                query=query,
                body=body,
                content_type="application/merge-patch+json"
                if action.verb == "patch"
                else "application/json",
                deadline=Deadline.after(min(5.0, conn.settings.deadline)),
                passthrough=range(300, 600),
            )
        except StillAway:
            raise
        except ClusterError:
            return None
        if answer.status != 403:
            continue
        _, message, _ = status_of(answer.data, "Forbidden")
        found = USER.search(message)
        if found:
            return found[1]
    return None
