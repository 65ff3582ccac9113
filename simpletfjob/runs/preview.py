"""`apply --dry-run=client`: the run's objects as apply would send them, and none sent.

As kubectl's client dry run does, each object gets the line apply would give it, with
`(dry run)`: `created` where the run has no such object, `unchanged` where the object
there already holds every field this render sets, `configured` where it does not, and
with --replace first `deleted` for each object of the run there. Only reads reach the
server: the connection, the nodes and pods the plan reads, and one list of the run's Jobs
and one of its Services. Whether the server would take the objects (RBAC, validation, a
run that differs or has ended) only its own dry run tells: --dry-run=server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from simpletfjob.runs.limits import add_limits
from simpletfjob.runs.objects import P, connect_for, list_run, manifests, object_name

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Settings
    from simpletfjob.runs.apply import Choices

Report = Callable[[str], None]


@dataclass(frozen=True)
class Preview(Generic[P]):
    """A run as apply would send it: its plan, its namespace, the objects, each outcome's count."""

    planned: P
    namespace: str
    objects: list[dict[str, Any]]  # in the order apply sends them
    outcomes: Counter[str]  # 'deleted', 'created', 'configured', 'unchanged'

    def counts(self) -> str:
        """'4 deleted, 1 created'."""
        words = ("deleted", "created", "configured", "unchanged")
        return ", ".join(f"{self.outcomes[w]} {w}" for w in words if self.outcomes[w])


def preview_run(
    cluster: Settings, plan: Callable[[str], P], choices: Choices, report: Report
) -> Preview[P]:
    """Connect, plan the run for its namespace, and say what apply would do; nothing is sent."""
    where = (cluster.kubeconfig, cluster.context, cluster.namespace, "apply the run to")
    with connect_for(*where) as conn:
        planned = plan(conn.namespace)
        assert planned.job is not None  # a plan to apply has its labels (the options say so)
        documents = ((d, f"document {i} ({d.id})") for i, d in enumerate(planned.documents, 1))
        wanted = manifests(documents, planned.job, conn.namespace)
        add_limits(
            wanted, deadline=choices.deadline, cleanup_after=choices.cleanup_after,
            marks=choices.marks,
        )  # fmt: skip
        old = list_run(conn, planned.job)
    outcomes: Counter[str] = Counter()
    live = {(resource.plural, object_name(obj)): obj for resource, obj in old.objects()}
    if choices.replace:
        for ref in old.refs():
            report(f"{ref} deleted (dry run)")
            outcomes["deleted"] += 1
        live = {}
    for m in wanted:
        there = live.get(m.key)
        # a listed object has no apiVersion and kind of its own: its list has them
        fields = {k: v for k, v in m.body.items() if k not in ("apiVersion", "kind")}
        outcome = (
            "created" if there is None else "unchanged" if holds(there, fields) else "configured"
        )
        report(f"{m.ref} {outcome} (dry run)")
        outcomes[outcome] += 1
    return Preview(planned, conn.namespace, [m.body for m in wanted], outcomes)


def holds(live: Any, wanted: Any) -> bool:
    """Whether `live` has every field that `wanted` sets, with its value (the fields the server
    fills in, such as defaults and status, aside), as a server-side apply that changes nothing."""
    if isinstance(wanted, dict):
        return isinstance(live, dict) and all(
            key in live and holds(live[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(live, list)
            and len(live) == len(wanted)
            and all(holds(a, b) for a, b in zip(live, wanted, strict=True))
        )
    return bool(live == wanted)
