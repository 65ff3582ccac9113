"""Reading nodes from a live cluster, through kube/, as kubectl would.

The cluster is found as kubectl finds it (see kube/paths.py and kube/connection.py).
Nodes are listed in pages of 500 from the raw JSON, each page cut of its nodes'
image lists before it is parsed and parsed while the next one comes, keeping
only what a `Node` needs: 5000 nodes cost neither model objects nor much memory.
Every wait is bounded, transient failures are retried with backoff, and every
failure is one `ClusterError` line naming the server and context.

An offline render never imports this module, nor kube/'s client-facing parts.
"""

from __future__ import annotations

from collections.abc import Callable

from simpletfjob.errors import ClusterError, InputError
from simpletfjob.kube.connection import Settings, Target, connect
from simpletfjob.kube.lists import Page, decode_page, list_pages
from simpletfjob.kube.resources import NODES
from simpletfjob.nodes import Node, node_from_object, without_images

# What a user can do instead of reading the cluster, in the messages that refuse it.
INSTEAD = "give the hosts with --nodes H1,H2,... or --nodes-file FILE"
INSTEAD_OF_RBAC = "give the hosts with --nodes or --nodes-file"


def read_cluster_nodes(
    settings: Settings, selector: str | None = None, warn: Callable[[str], None] | None = None
) -> list[Node]:
    """Every node the cluster lists (matching the label selector), sorted by name.

    `warn` is told what the caller should say, such as that TLS is not checked.
    """
    with connect(settings, purpose="read nodes from", alternative=INSTEAD) as conn:
        if conn.target.insecurity and warn is not None:
            warn(conn.target.insecurity)
        target = conn.target
        path = NODES.path()

        def parse(data: bytes) -> Page[list[Node]]:
            page = decode_page(data, target, NODES, path, slim=without_images)
            return Page(_nodes(page.value, target), page.token, page.resource_version)

        listed = list_pages(
            conn, NODES, parse, label_selector=selector, alternative=INSTEAD_OF_RBAC
        )
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


def _nodes(items: list[object], target: Target) -> list[Node]:
    try:
        return [
            node_from_object(item, f"{target}: the node list's items[{i}]")
            for i, item in enumerate(items)
        ]
    except InputError as e:  # the same checks as for a saved NodeList, but the server's fault
        raise ClusterError(str(e)) from e
