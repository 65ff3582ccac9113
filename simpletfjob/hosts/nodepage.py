"""A page of a node list decoded straight into `Node`s: only the fields simpletfjob reads.

A real node's JSON is mostly what simpletfjob needs none of. msgspec decodes a page into
typed structs of only the fields below, skipping the rest without building it. A page with
anything unusual in a field read (an empty name, a label that is not a string, a null where
a list belongs...) is decoded the careful way instead (`nodes.node_from_object`), so that
what is wrong is said in the same words: this path never decides what that one would not.
"""

from __future__ import annotations

import msgspec

from simpletfjob.hosts.nodes import EMPTY, Node, Taint
from simpletfjob.kube.lists import Page
from simpletfjob.quantity import parse_quantity_count


class _Meta(msgspec.Struct):
    name: str
    labels: dict[str, str] | None = None


class _Taint(msgspec.Struct):
    key: str
    value: str | None = None
    effect: str | None = None


class _Spec(msgspec.Struct):
    taints: list[_Taint] | None = None
    unschedulable: bool | None = None


class _Condition(msgspec.Struct):
    type: str
    status: str


class _Address(msgspec.Struct):
    type: str
    address: str


class _Status(msgspec.Struct):
    conditions: list[_Condition] | None = None
    addresses: list[_Address] | None = None
    allocatable: dict[str, str] | None = None


class _Node(msgspec.Struct):
    metadata: _Meta
    spec: _Spec | None = None
    status: _Status | None = None


class _ListMeta(msgspec.Struct):
    resourceVersion: str | None = None
    token: str | None = msgspec.field(default=None, name="continue")


class _List(msgspec.Struct):
    items: list[_Node]
    metadata: _ListMeta | None = None


_DECODER = msgspec.json.Decoder(_List)


def decode_nodes(data: bytes, origin: str, gpu_resource: str) -> Page[list[Node]] | None:
    """The page's nodes, continue token and resourceVersion; None if any of it is unusual (see
    the module), for the caller to decode the careful way. `origin` is where the list came
    from, as node_from_object's (each node's is `origin` and its index)."""
    try:
        page = _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    nodes = []
    for i, item in enumerate(page.items):
        node = _node(item, f"{origin}[{i}]", gpu_resource)
        if node is None:
            return None
        nodes.append(node)
    meta = page.metadata or _ListMeta()
    return Page(nodes, meta.token or None, meta.resourceVersion or "")


def _node(item: _Node, origin: str, gpu_resource: str) -> Node | None:
    meta, spec, status = item.metadata, item.spec or _Spec(), item.status or _Status()
    if not meta.name:
        return None
    allocatable = status.allocatable or {}
    gpus = parse_quantity_count(allocatable.get(gpu_resource, "0"))
    if gpus is None:
        return None
    addresses: dict[str, list[str]] = {}
    for entry in status.addresses or ():
        addresses.setdefault(entry.type, []).append(entry.address)
    return Node(
        name=meta.name,
        ready=any(c.type == "Ready" and c.status == "True" for c in status.conditions or ()),
        unschedulable=bool(spec.unschedulable),
        taints=tuple(Taint(t.key, t.value or "", t.effect or "") for t in spec.taints or ()),
        labels=EMPTY if meta.labels is None else meta.labels,
        addresses=addresses,
        gpus=gpus,
        origin=origin,
        plain=False,
        allocatable=allocatable or EMPTY,
    )
