"""The server's dry run of each manifest before apply changes anything, and how it differs
from the live object: what `apply` judges a run by (apply.py).

The dry runs change nothing, so they go `conn.settings.in_flight` at a time; their answers
are judged in the render's order. An apply dry-runs one object of each shape it would create
and carries that verdict to the others of the shape (`sampled_dry_runs`; shapes.py says when
that holds), having found the names that others' objects hold from one list of names
(`names_held`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from contextlib import closing
from functools import partial
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError
from simpletfjob.kube.inflight import in_order
from simpletfjob.kube.lists import list_metadata
from simpletfjob.kube.objects import Applied, apply
from simpletfjob.kube.request import ApiError, ApplyConflict
from simpletfjob.kube.resources import JOBS
from simpletfjob.runs.manifests import Manifest
from simpletfjob.runs.objects import object_name, some
from simpletfjob.runs.shapes import Expected, Shaped, sample

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


def dry_runs(
    conn: Connection,
    wanted: Sequence[Manifest],
    live: Mapping[tuple[str, str], dict[str, Any]],
    *,
    force: bool,
) -> list[tuple[Manifest, tuple[Applied | None, str] | Exception]]:
    """The server's dry run of every manifest, `in_flight` at a time (they change nothing):
    each answer, or the error it met, in the render's order."""
    runs = [partial(_dry_run, conn, m, live, force=force) for m in wanted]
    with closing(in_order(runs, conn.settings.in_flight)) as answers:
        return list(zip(wanted, answers, strict=True))


Answer = tuple[Applied | None, str] | Exception
Carried = dict[tuple[str, str], tuple[tuple[str, str], Shaped, Shaped]]


def sampled_dry_runs(
    conn: Connection,
    wanted: Sequence[Manifest],
    live: Mapping[tuple[str, str], dict[str, Any]],
    *,
    force: bool,
) -> tuple[list[tuple[Manifest, Answer]], Carried]:
    """The server's dry run of each object the run has (`live`), and of one object of each
    shape among those it would create (shapes.py), in the render's order; and for each other
    object, by key: its sample's key, and the shapes that derive its would-be object.

    The first refusal in the render's order is still the one said: an object that takes its
    sample's verdict comes after its sample."""
    chosen = sample([(m.resource, m.body) for m in wanted], lambda i: wanted[i].key in live)
    sent = [wanted[i] for i in chosen.sent]
    carried: Carried = {
        wanted[i].key: (wanted[by].key, chosen.shaped[by], chosen.shaped[i])
        for i, by in chosen.sample_of.items()
    }
    return dry_runs(conn, sent, live, force=force), carried


def expected_objects(
    judged: Sequence[tuple[Manifest, tuple[Applied | None, str]]], carried: Carried
) -> Expected:
    """Each object as the server's dry run has it (its own, or its sample's, derived)."""
    found = {m.key: applied.object for m, (applied, _) in judged if applied is not None}
    return Expected(found, carried)


def maybe_there(answer: Answer) -> bool:
    """Whether a dry run says an object may be there: it found one (the answer has a
    resourceVersion, which a dry run of a create has not), or it could not judge."""
    if isinstance(answer, Exception):
        return True
    applied, _ = answer
    return applied is not None and bool(
        (applied.object.get("metadata") or {}).get("resourceVersion")
    )


def names_held(conn: Connection, unlisted: Sequence[Manifest]) -> list[Manifest]:
    """Those of `unlisted` (objects the run's list did not have) whose name an object holds
    in the namespace: one list of names (metadata only) of each resource among them."""
    held = set()
    for resource in dict.fromkeys(m.resource for m in unlisted):
        listed = list_metadata(conn, resource)
        held |= {(resource.plural, object_name(obj)) for obj in listed.items}
    return [m for m in unlisted if m.key in held]


def judge_all(
    answers: Sequence[tuple[Manifest, tuple[Applied | None, str] | Exception]],
) -> list[tuple[Manifest, tuple[Applied | None, str]]]:
    """The dry runs judged in the render's order: the first refusal in that order is the one
    said; conflicts with other field managers, all in one line."""
    judged = []
    conflicts: list[tuple[Manifest, ApplyConflict]] = []
    for m, answer in answers:
        if isinstance(answer, ApplyConflict):
            conflicts.append((m, answer))
        elif isinstance(answer, Exception):
            raise answer
        else:
            judged.append((m, answer))
    if conflicts:
        raise ClusterError(conflicts_line(conflicts))
    return judged


def conflicts_line(
    conflicts: Sequence[tuple[Manifest, ApplyConflict]], *, halfway: bool = False
) -> str:
    """The first conflict as the server said it, how many objects met one, and the ways out
    that `kubectl apply --server-side` gives."""
    first = str(conflicts[0][1])
    if len(conflicts) > 1:
        first += f"; and {len(conflicts) - 1} more: {some([m.ref for m, _ in conflicts[1:]])}"
    managers = list(dict.fromkeys(name for _, e in conflicts for name in e.managers))
    others = " and ".join(repr(name) for name in managers)
    return (
        f"{first}; {'' if halfway else 'nothing was applied: '}to take the fields over, apply again with "
        f"--force-conflicts; to leave them to {others}, remove them from the template "
        "(or write the value they have now, to share them)"
    )


def _dry_run(
    conn: Connection,
    m: Manifest,
    live: Mapping[tuple[str, str], dict[str, Any]],
    *,
    force: bool = False,
) -> tuple[Applied | None, str]:
    """The server's dry run of one manifest, and how it differs from the live object ('' if it may be applied)."""
    before = live.get(m.key)
    try:
        applied = apply(
            conn, m.resource, m.body, namespace=conn.namespace, dry_run=True, live=before,
            force=force,
        )  # fmt: skip
    except ApiError as e:
        if before is not None and e.status == 422 and "field is immutable" in str(e):
            fields = sorted(set(re.findall(r"\b(spec(?:\.\w+)+): Invalid value", str(e))))
            return None, _immutable(fields)
        raise
    if m.resource is JOBS and before is not None:
        old, new = _template(before), _template(applied.object)
        if old != new:  # a server that would take the change; the Job's pods would not follow it
            return None, "its pod template differs"
    return applied, ""


def _immutable(fields: Sequence[str]) -> str:
    if not fields:
        return "an immutable field differs"
    if fields == ["spec.template"]:
        return "its pod template differs"
    return f"immutable {', '.join(fields)} " + ("differ" if len(fields) > 1 else "differs")


def _template(job: Mapping[str, Any]) -> Any:
    return (job.get("spec") or {}).get("template")
