"""Nodes: the `Node` value, and reading nodes from a host list or a saved NodeList.

Reading from a live cluster is in `cluster.py`, so that an offline render never
imports the `kubernetes` client.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import NamedTuple

from simpletfjob.errors import InputError

GPU_RESOURCE = "nvidia.com/gpu"

# A node name is a DNS-1123 subdomain, the rule the API server applies to nodes.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class Taint(NamedTuple):
    key: str
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


_EMPTY: Mapping[str, str] = MappingProxyType({})


# NamedTuples rather than dataclasses: defining a dataclass costs a cold start ~0.3 ms.
class Node(NamedTuple):
    """What simpletfjob needs to know about one node; hosts from a list are plain, ready nodes."""

    name: str
    ready: bool = True
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    labels: Mapping[str, str] = _EMPTY
    addresses: Mapping[str, str] = _EMPTY  # type -> first address
    gpus: int = 0
    origin: str = ""  # where the node was named, for error messages
    plain: bool = True  # a bare host name, from --nodes or a host list: nothing known but its name


def is_node_name(name: str) -> bool:
    return len(name) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(name) is not None


def read_text(path: str, what: str) -> str:
    """Read a UTF-8 input file, turning every failure into one line that names it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise InputError(f"{what} {path!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path!r} is a directory, not a file") from None
    except OSError as e:
        raise InputError(f"cannot read {what} {path!r}: {e.strerror or e}") from e
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{what} {path!r} is not UTF-8 text (byte {e.start} cannot be decoded)"
        ) from e


def parse_host_lines(text: str, origin: str) -> list[tuple[str, str]]:
    """Names from a one-per-line list, each with 'origin:line'; blanks and # comments are skipped."""
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        name = line.split("#", 1)[0].strip()
        if name:
            entries.append((name, f"{origin}:{number}"))
    return entries


def check_host_names(entries: Iterable[tuple[str, str]]) -> list[str]:
    """Reject names that are not node names, and names given twice."""
    seen: dict[str, str] = {}
    names = []
    for name, where in entries:
        if not is_node_name(name):
            raise InputError(
                f"{where}: {name!r} is not a valid Kubernetes node name "
                "(RFC 1123: lowercase letters, digits, '-' and '.', at most 253 characters)"
            )
        if name in seen:
            raise InputError(f"{where}: host {name!r} is listed twice (first at {seen[name]})")
        seen[name] = where
        names.append(name)
    return names


def nodes_from_option(value: str) -> list[Node]:
    """Hosts given as --nodes h1,h2,... in the order given."""
    entries = [(n.strip(), "--nodes") for n in value.split(",") if n.strip()]
    if not entries:
        raise InputError("--nodes names no hosts")
    return [Node(name, origin="--nodes") for name in check_host_names(entries)]


def nodes_from_file(path: str) -> list[Node]:
    """Hosts from --nodes-file: a plain list (order kept) or a saved `kubectl get nodes -o json|yaml`."""
    text = read_text(path, "nodes file")
    if _looks_like_node_list(text):
        return _nodes_from_saved_list(text, path)
    entries = parse_host_lines(text, path)
    if not entries:
        raise InputError(f"nodes file {path!r} lists no hosts")
    names = check_host_names(entries)
    return [Node(name, origin=where) for name, (_, where) in zip(names, entries, strict=True)]


def _looks_like_node_list(text: str) -> bool:
    head = text.lstrip()
    return head.startswith("{") or re.search(r"(?m)^(apiVersion|kind|items)\s*:", text) is not None


def _nodes_from_saved_list(text: str, path: str) -> list[Node]:
    import yaml  # only this input needs a parser

    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        doc = yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"{path}{line}: not a valid NodeList: {problem}") from e
    if isinstance(doc, Mapping) and doc.get("kind") == "Node":
        items: object = [doc]
    elif isinstance(doc, Mapping) and isinstance(doc.get("items"), list):
        items = doc["items"]
    else:
        raise InputError(
            f"{path}: expected a NodeList (kubectl get nodes -o json) or one host per line"
        )
    assert isinstance(items, list)
    nodes = [node_from_object(item, f"{path} item {i}") for i, item in enumerate(items)]
    check_host_names((n.name, f"{path} item {i}") for i, n in enumerate(nodes))
    return sorted(nodes, key=lambda n: n.name)


def node_from_object(obj: object, origin: str) -> Node:
    """A `Node` from the JSON object of a v1 Node, as the API server or kubectl gives it."""
    if not isinstance(obj, Mapping):
        raise InputError(f"{origin}: not a Node object")
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = metadata.get("name")
    if not isinstance(name, str):
        raise InputError(f"{origin}: node has no metadata.name")
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    )
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in spec.get("taints") or ()
        if isinstance(t, Mapping)
    )
    addresses: dict[str, str] = {}
    for a in status.get("addresses") or ():
        if isinstance(a, Mapping) and "type" in a and "address" in a:
            addresses.setdefault(str(a["type"]), str(a["address"]))
    allocatable = status.get("allocatable") or {}
    return Node(
        name=name,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        taints=taints,
        labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
        addresses=addresses,
        gpus=parse_quantity_count(allocatable.get(GPU_RESOURCE, 0)),
        origin=f"node {name}",
        plain=False,
    )


# --address choices -> how to find that address on a node.
ADDRESS_CHOICES = ("name", "internal-ip", "hostname")
HOSTNAME_LABEL = "kubernetes.io/hostname"


def host_address(node: Node, how: str) -> str:
    """What TF_CONFIG and <<host>> call this node: its name, its InternalIP or its hostname label."""
    if how == "name":
        return node.name
    if how == "internal-ip":
        address = node.addresses.get("InternalIP")
        if not address:
            listed = ", ".join(sorted(node.addresses)) or "none"
            raise InputError(
                f"node {node.name!r} has no InternalIP address (it lists: {listed}); "
                "choose another --address"
            )
        return address
    if how == "hostname":
        label = node.labels.get(HOSTNAME_LABEL)
        if not label:
            raise InputError(
                f"node {node.name!r} has no {HOSTNAME_LABEL} label; choose another --address"
            )
        return label
    raise ValueError(f"unknown address kind {how!r}")


def parse_quantity_count(value: object) -> int:
    """A whole-device count from a resource quantity ('4', 4, '0'); anything odd counts as 0."""
    try:
        return int(str(value))
    except ValueError:
        return 0
