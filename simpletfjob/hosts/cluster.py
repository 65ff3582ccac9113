"""Reading nodes, and the pods that use them, from a live cluster, through kube/, as kubectl would.

Nodes are listed in pages of 500 from the raw JSON, parsed while the next page comes, keeping
only what a `Node` needs. Every wait is bounded, transient failures are retried, and every
failure is one `ClusterError` line naming the server and context.

Every Job of the cluster is read first: the Jobs that have yet to make their pods hold room
for them, and the run's own pods are those of its live Jobs (usage.py). Pods are reduced at
once to what the counting rules need, read one of two ways:

- **one list**: the non-terminated pods of every namespace, paginated;
- **per node**: each candidate node's non-terminated pods, in order
  (`fieldSelector=spec.nodeName=N,status.phase!=Succeeded,status.phase!=Failed`,
  `resourceVersion=0` so that the API server's cache answers), several at a time,
  stopping once enough nodes have room, as kubectl-node-resource reads them.

An offline render never imports this module, nor kube/'s client-facing parts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any, TypeVar

from simpletfjob.errors import ClusterError, InputError
from simpletfjob.hosts.nodes import GPU_RESOURCE, Node, node_from_object
from simpletfjob.hosts.usage import (
    NOT_TERMINATED,
    JobUse,
    NodeUsage,
    Own,
    PodUse,
    Tally,
    job_use,
    pinned_jobs,
    pod_use,
)
from simpletfjob.identity import JOB_LABEL
from simpletfjob.kube.connection import Connection, Settings, Target, connect
from simpletfjob.kube.lists import Page, decode_page, list_each, list_pages
from simpletfjob.kube.resources import JOBS, NODES, PODS, Resource

# What a user can do instead of reading the cluster, in the messages that refuse it.
INSTEAD = "give the hosts with --nodes H1,H2,... or --nodes-file FILE"
INSTEAD_OF_RBAC = "give the hosts with --nodes or --nodes-file"

U = TypeVar("U")  # what a node, a Job or a pod is read as


class Cluster:
    """One connection for a run: its nodes, then, when the run needs them, its pods."""

    def __init__(
        self,
        settings: Settings,
        warn: Callable[[str], None] | None = None,
        alternative: str = INSTEAD,
    ) -> None:
        """Connect; `alternative` is what the user can do instead, for a refusal's message."""
        self.conn: Connection = connect(
            settings, purpose="read nodes from", alternative=alternative
        )
        self.alternative = alternative
        if self.conn.target.insecurity and warn is not None:
            warn(self.conn.target.insecurity)

    @property
    def target(self) -> Target:
        return self.conn.target

    @property
    def namespace(self) -> str:
        """The namespace kubectl would apply to (the context's, or default)."""
        return self.conn.namespace

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def nodes(self, selector: str | None = None, gpu_resource: str = GPU_RESOURCE) -> list[Node]:
        """Every node the cluster lists (matching the label selector), sorted by name."""
        target = self.target

        def read_node(item: Any, origin: str, index: int) -> Node:
            return node_from_object(item, f"{origin}[{index}]", gpu_resource)

        parse = _parser(target, NODES, NODES.path(), "node", read_node)
        # The refusal's advice: INSTEAD words it for a message that already named the cluster.
        instead = INSTEAD_OF_RBAC if self.alternative == INSTEAD else self.alternative
        listed = list_pages(self.conn, NODES, parse, label_selector=selector, alternative=instead)
        nodes = [node for page in listed.pages for node in page]
        first: dict[str, int] = {}
        for i, node in enumerate(nodes):
            seen = first.setdefault(node.name, i)
            if seen != i:
                # A node name is unique in a cluster: two tasks would share one name:port.
                raise ClusterError(
                    f"{target}: the node list names {node.name!r} twice (items {seen} and {i}); "
                    "a node name is unique, so the list cannot be used"
                )
        return sorted(nodes, key=lambda n: n.name)

    def _pod_parser(
        self, resource: str, others: Sequence[str]
    ) -> Callable[[bytes], Page[list[PodUse]]]:
        def read_pod(item: Any, origin: str, _: int) -> PodUse:
            return pod_use(item, resource, JOB_LABEL, origin, others)

        return _parser(self.target, PODS, PODS.path(""), "pod", read_pod)

    def jobs(self, resource: str, alternative: str, others: Sequence[str] = ()) -> list[JobUse]:
        """Every namespace's Jobs, reduced to what the counting rules need.
        `others` are the resources besides `resource` that a run's fit asks about."""

        def read_job(item: Any, origin: str, _: int) -> JobUse:
            return job_use(item, resource, JOB_LABEL, origin, others)

        parse = _parser(self.target, JOBS, JOBS.path(""), "job", read_job)
        listed = list_pages(self.conn, JOBS, parse, namespace="", alternative=alternative)
        return [job for page in listed.pages for job in page]

    def run_jobs(
        self, resource: str, own: Own, others: Sequence[str] = ()
    ) -> tuple[Own, list[JobUse], str | None]:
        """The cluster's Jobs, and the run knowing its own among them; or, when listing Jobs is
        refused, no Jobs, the run as it was, and the refusal, for a warning."""
        from simpletfjob.kube.request import ApiError

        try:
            jobs = self.jobs(resource, "", others)
        except ApiError as e:
            if e.status != 403:
                raise
            return own, [], self.denial(e)
        return own.knowing(jobs), jobs, None

    def denial(self, error: Exception) -> str:
        """A 403's first clause, without the server: 'user ... cannot list pods in ... (403 Forbidden)'."""
        return str(error).split("; ")[0].removeprefix(f"{self.target}: ")

    def usage(
        self,
        resource: str,
        own: Own,
        alternative: str,
        jobs: Sequence[JobUse] = (),
        others: Sequence[str] = (),
    ) -> Tally:
        """One paginated list of every namespace's non-terminated pods, summed per node, with
        the pods that `jobs` have yet to make; `others` as for `jobs`."""
        tally = Tally(own, pinned_jobs(jobs, own), others)
        parse = self._pod_parser(resource, others)
        listed = list_pages(
            self.conn,
            PODS,
            parse,
            namespace="",
            field_selector=NOT_TERMINATED,
            alternative=alternative,
        )
        for page in listed.pages:
            tally.add_all(page)
        return tally

    def usage_per_node(
        self,
        names: Sequence[str],
        resource: str,
        own: Own,
        has_room: Callable[[str, NodeUsage], bool],
        wanted: int,
        budget: int,
        alternative: str,
        jobs: Sequence[JobUse] = (),
        others: Sequence[str] = (),
    ) -> dict[str, NodeUsage] | None:
        """Each node's pods, in order, until `wanted` nodes have room; what was read, by node.
        None when `budget` nodes were read without finding enough: one list is then cheaper."""
        parse = self._pod_parser(resource, others)
        pinned = pinned_jobs(jobs, own)
        selectors = (f"spec.nodeName={name},{NOT_TERMINATED}" for name in names)
        read: dict[str, NodeUsage] = {}
        found = 0
        lists = list_each(self.conn, PODS, parse, selectors, namespace="", alternative=alternative)
        with closing(lists):
            for name, pages in zip(names, lists, strict=False):
                tally = Tally(own, {name: pinned[name]} if name in pinned else None, others)
                for page in pages:
                    tally.add_all(page)
                read[name] = tally.node(name)
                found += has_room(name, read[name])
                if found >= wanted:
                    break
                if len(read) >= budget and len(read) < len(names):
                    return None
        return read


def _parser(
    target: Target, kind: Resource, path: str, noun: str, read: Callable[[Any, str, int], U]
) -> Callable[[bytes], Page[list[U]]]:
    """A list page of nodes, Jobs or pods, skimmed (pages.py) or parsed whole, each item `read`
    by its kind's decoder with the origin its messages name."""
    from simpletfjob.hosts.pages import skim

    origin = f"{target}: the {noun} list's items"  # once: it redacts the server's URL

    def parse(data: bytes) -> Page[list[U]]:
        page = decode_page(data, target, kind, path, skim)
        try:
            values = [read(item, origin, i) for i, item in enumerate(page.value)]
        except InputError as e:  # the same checks as for a saved NodeList, but the server's fault
            raise ClusterError(str(e)) from e
        return Page(values, page.token, page.resource_version)

    return parse
