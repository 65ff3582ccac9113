"""What `run` and `wait` will need to be allowed, asked of the server before they rely on it.

`run` applies a run and may stay with it for hours; `wait` may follow one for as long,
and then clean it up. A right that is missing would otherwise be met half-way: a restart
that cannot delete the run, a cleanup refused once the run has ended. So, before `run`
applies anything and before `wait` follows, every verb either will use is asked of the
server at once (kube/access.py: one SelfSubjectAccessReview each, several at a time):

- what the command cannot do without is refused in one line, naming every missing verb
  and resource, what each is for, and the Role that would allow them; nothing is applied;
- what it can do without is one warning line each, saying what it will not do:
  `node loss not watched: cannot get nodes` (`run` then restarts only on a Job's failure
  or a refused pod), `logs not streamed: cannot get pods/log`, and a run whose node is
  lost, which is not restarted without `delete` on pods (its pods there must go first);
- a server that cannot answer the reviews changes nothing: the command learns what it
  may do from its requests, and says each refusal as it meets it.

What `run` plans with (nodes, and the pods and Jobs that use them) is read before this,
with its own refusals and warnings (plan/eligibility.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simpletfjob.errors import ClusterError
from simpletfjob.kube.resources import JOBS, NODES, PODS, SERVICES, Action, Resource

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.options.runs import RunOptions

Say = Callable[[str], None]

FOLLOW = "to follow the run"
APPLY = "to apply the run"
RESTART = "to restart the run"


@dataclass(frozen=True)
class Need:
    """One verb on one resource (in the run's namespace, unless the resource is cluster-wide),
    and what for."""

    verb: str
    resource: Resource
    why: str
    subresource: str = ""

    @property
    def rbac_resource(self) -> str:
        plural = self.resource.plural
        return f"{plural}/{self.subresource}" if self.subresource else plural

    @property
    def words(self) -> str:
        """'delete jobs', 'get pods/log'."""
        return f"{self.verb} {self.rbac_resource}"

    def action(self, namespace: str) -> Action:
        where = namespace if self.resource.namespaced else None
        return Action(self.verb, self.resource, where, subresource=self.subresource)


@dataclass(frozen=True)
class Access:
    """What `run` may do beyond what it needs: each False was said in one warning line."""

    nodes: bool = True  # get nodes: node loss is watched
    pod_deletes: bool = True  # delete pods: a run whose node is lost can be restarted
    logs: bool = True  # get pods/log: the tasks' logs are streamed


def run_needs(options: RunOptions, services: bool) -> list[Need]:
    """Every verb `run` uses in the run's namespace with these options (the plan's reads aside);
    `services`: the run has Services (pod networking), which it applies as it applies Jobs."""
    applied = (JOBS, SERVICES) if services else (JOBS,)
    needs = [
        Need("list", JOBS, FOLLOW),
        Need("watch", JOBS, FOLLOW),
        Need("list", PODS, FOLLOW),
        Need("watch", PODS, FOLLOW),
        Need("list", SERVICES, APPLY),  # a run is its Jobs and its Services, listed as one
        *(Need(verb, r, APPLY) for r in applied for verb in ("get", "create", "patch")),
    ]
    deleting = []
    if options.replace_run:
        deleting.append("for --replace")
    if options.max_restarts:
        deleting.append(RESTART)
    if options.cleanup != "none":
        deleting.append(f"for --cleanup {options.cleanup}")
    if options.on_interrupt == "delete":
        deleting.append("for --on-interrupt delete")
    for why in deleting:
        needs.append(Need("delete", JOBS, why))
        if services or why == "for --replace":  # (the run it replaces may have some)
            needs.append(Need("delete", SERVICES, why))
        if why in ("for --replace", RESTART):  # then it waits until the run is gone
            needs += [Need("watch", JOBS, why), Need("watch", SERVICES, why)]
    return needs


def wait_needs(cleanup: str) -> list[Need]:
    """Every verb `wait` relies on: following the run, and its cleanup."""
    needs = [Need(verb, r, FOLLOW) for r in (JOBS, PODS) for verb in ("list", "watch")]
    if cleanup != "none":
        why = f"for --cleanup {cleanup}"
        needs += [
            Need("list", SERVICES, why),
            Need("delete", JOBS, why),
            Need("delete", SERVICES, why),
        ]
    return needs


def check_run(conn: Connection, options: RunOptions, services: bool, say: Say) -> Access:
    """Refuse (ClusterError) what `run` cannot do without; warn of what it will not do."""
    optional = [Need("get", NODES, "to watch the run's nodes")]
    if options.logs != "none":
        optional.append(Need("get", PODS, "to stream the logs", subresource="log"))
    if options.max_restarts:
        optional.append(Need("delete", PODS, "to restart a run whose node is lost"))
    needs = run_needs(options, services)
    answers = _ask(conn, [*needs, *optional])
    if answers is None:
        return Access()
    _refuse(conn, [n for n in needs if not answers[n]], "run", "nothing was applied")
    missing = {n.words for n in optional if not answers[n]}
    ns = conn.namespace
    if "get nodes" in missing:
        say(
            "simpletfjob: warning: node loss not watched: cannot get nodes (a ClusterRole with "
            "verb 'get' on 'nodes' allows it); a task's node that is lost is not noticed"
        )
    if "get pods/log" in missing:
        say(
            f"simpletfjob: warning: logs not streamed: cannot get pods/log in namespace {ns} "
            "(a Role with verb 'get' on 'pods/log' allows it)"
        )
    if "delete pods" in missing and "get nodes" not in missing:
        say(
            "simpletfjob: warning: a run whose node is lost is not restarted: cannot delete "
            f"pods in namespace {ns}, and its pods on that node must be deleted first (a Role "
            "with verb 'delete' on 'pods' allows it)"
        )
    return Access(
        nodes="get nodes" not in missing,
        pod_deletes="delete pods" not in missing,
        logs="get pods/log" not in missing,
    )


def check_wait(conn: Connection, cleanup: str) -> None:
    """Refuse (ClusterError) a wait whose following or cleanup would be refused."""
    needs = wait_needs(cleanup)
    answers = _ask(conn, needs)
    if answers is not None:
        _refuse(conn, [n for n in needs if not answers[n]], "wait", "the run was not followed")


def _ask(conn: Connection, needs: Sequence[Need]) -> dict[Need, bool] | None:
    from simpletfjob.kube.access import allowed

    unique = list(dict.fromkeys((n.verb, n.resource, n.subresource) for n in needs))
    actions = [Need(verb, r, "", sub).action(conn.namespace) for verb, r, sub in unique]
    answers = allowed(conn, actions)
    if answers is None:
        return None
    found = dict(zip(unique, answers, strict=True))
    return {n: found[(n.verb, n.resource, n.subresource)] for n in needs}


def _refuse(conn: Connection, missing: Sequence[Need], command: str, done: str) -> None:
    """One line naming every missing verb and resource, what for, and the rules that allow them."""
    if not missing:
        return
    from simpletfjob.kube.access import refused_user

    whys: dict[Need, list[str]] = {}
    for need in missing:
        key = Need(need.verb, need.resource, "", need.subresource)
        whys.setdefault(key, [])
        if need.why not in whys[key]:
            whys[key].append(need.why)
    ns = conn.namespace

    def said(namespaced: bool) -> str:
        """'list jobs, watch jobs (to follow the run), delete jobs (for --cleanup running)'."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for n, w in whys.items():
            if n.resource.namespaced == namespaced:
                groups.setdefault(tuple(w), []).append(n.words)
        return ", ".join(f"{', '.join(words)} ({', '.join(w)})" for w, words in groups.items())

    local, wide = said(True), said(False)
    what = local + (f" in namespace {ns}" if local else "")
    what += (" and " if local and wide else "") + wide
    user = refused_user(conn, [n.action(ns) for n in whys])
    who = f"user {user!r}" if user else "your user"
    rules = []
    for kind, namespaced in (("Role", True), ("ClusterRole", False)):
        by_resource: dict[tuple[str, str], list[str]] = {}
        for n in whys:
            if n.resource.namespaced == namespaced:
                by_resource.setdefault((n.rbac_resource, n.resource.group), []).append(n.verb)
        if by_resource:
            rules.append(f"a {kind} with " + _and([_rule(*k, v) for k, v in by_resource.items()]))
    raise ClusterError(
        f"{conn.target}: {who} cannot {what}, which {command} needs, so {done}; it needs "
        f"{' and '.join(rules)}"
    )


def _and(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _rule(resource: str, group: str, verbs: Sequence[str]) -> str:
    """The rule for one resource: verbs 'list', 'watch' on 'jobs' in API group 'batch'."""
    listed = _and([f"'{v}'" for v in verbs])
    where = f" in API group '{group}'" if group else ""
    return f"verb{'s' if len(verbs) > 1 else ''} {listed} on '{resource}'{where}"
