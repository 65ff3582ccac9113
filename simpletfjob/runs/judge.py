"""The server's dry run of each manifest before apply changes anything, and how it differs
from the live object: what `apply` judges a run by (apply.py).

The dry runs change nothing, so they go `conn.settings.in_flight` at a time; their answers
are judged in the render's order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from contextlib import closing
from functools import partial
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError
from simpletfjob.kube.inflight import in_order
from simpletfjob.kube.objects import Applied, apply
from simpletfjob.kube.request import ApiError, ApplyConflict
from simpletfjob.kube.resources import JOBS
from simpletfjob.runs.manifests import Manifest
from simpletfjob.runs.objects import some

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
