"""Nodes: the `Node` value, and reading nodes from a host list or a saved NodeList.

Reading from a live cluster is in `cluster.py`, so that an offline render never
imports the `kubernetes` client.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from simpletfjob.errors import InputError, number_problem
from simpletfjob.inputs import NODE_LIST_LIMIT, decode_text, describe_value, read_bytes
from simpletfjob.quantity import parse_quantity_count

GPU_RESOURCE = "nvidia.com/gpu"

# A node name is a DNS-1123 subdomain, the rule the API server applies to nodes.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


_EMPTY: Mapping[str, str] = MappingProxyType({})  # no labels, no allocatable
_NO_ADDRESSES: Mapping[str, Sequence[str]] = MappingProxyType({})


@dataclass(frozen=True)
class Node:
    """What simpletfjob needs to know about one node; hosts from a list are plain, ready nodes."""

    name: str
    ready: bool = True
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    # type -> every address of that type, in the node's order: a dual-stack node has two
    # InternalIPs. The first is the one --address uses, as kubectl's INTERNAL-IP column shows it.
    addresses: Mapping[str, Sequence[str]] = field(default_factory=lambda: _NO_ADDRESSES)
    gpus: int = 0
    origin: str = ""  # where the node was named, for error messages
    plain: bool = True  # a bare host name, from --nodes or a host list: nothing known but its name
    # status.allocatable as the node lists it (quantities unparsed): what fit reads (hosts/fit.py)
    allocatable: Mapping[str, object] = field(default_factory=lambda: _EMPTY)


def is_node_name(name: str) -> bool:
    return len(name) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(name) is not None


def parse_host_lines(text: str, origin: str) -> list[tuple[str, str]]:
    """Names from a one-per-line list, each with 'origin:line'; blanks and # comments are skipped.
    Lines end at '\n', '\r\n' or '\r', as editors and `grep -n` count them (not at every
    break str.splitlines knows, which would number the lines wrong)."""
    entries = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, start=1):
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
            shown = f"{name[:60]!r}..." if len(name) > 253 else repr(name)
            raise InputError(
                f"{where}: {shown} is not a valid Kubernetes node name "
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


def nodes_from_file(path: str, gpu_resource: str = GPU_RESOURCE) -> list[Node]:
    """Hosts from --nodes-file: a plain list (order kept) or a saved `kubectl get nodes -o json|yaml`.
    A file whose first character is `{` or `[` is read as JSON, as kubectl writes it; anything
    else that looks like a NodeList as YAML. The file is read once: it may be a pipe."""
    held = [read_bytes(path, "nodes file", NODE_LIST_LIMIT)]
    if re.match(_JSON_START, held[0]):
        return _nodes_from_json(held, path, gpu_resource)
    text = decode_text(held.pop(), path, "nodes file")
    if re.search(r"(?m)^(apiVersion|kind|items)\s*:", text):  # a NodeList in YAML
        return _nodes_from_yaml(text, path, gpu_resource)
    entries = parse_host_lines(text, path)
    if not entries:
        raise InputError(f"nodes file {path!r} lists no hosts")
    names = check_host_names(entries)
    return [Node(name, origin=where) for name, (_, where) in zip(names, entries, strict=True)]


_JSON_START = rb"(?:\xef\xbb\xbf)?\s*[{[]"  # compiled on first use: --nodes needs none


def _nodes_from_json(held: list[bytes], path: str, gpu_resource: str) -> list[Node]:
    """The nodes of a JSON NodeList; `held` holds its bytes, taken from it to free them early."""
    data = held.pop()
    slim = without_images(data)
    cut = slim is not data
    # At most one copy of the file's bytes, and then of its text, at a time; a stream
    # cannot be read again, so its bytes are kept in case the cut text does not parse.
    whole = data if cut and not os.path.isfile(path) else None
    del data
    text = decode_text(slim, path, "nodes file")
    del slim
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as e:
        del text
        if not cut:
            raise _json_error(e, path) from e
        # Not the layout without_images expects: parse the whole file, for its answer.
        if whole is None:
            whole = read_bytes(path, "nodes file", NODE_LIST_LIMIT)
        try:
            document = json.loads(decode_text(whole, path, "nodes file"))
        except (ValueError, RecursionError) as error:
            raise _json_error(error, path) from error
    else:
        del text
    del whole
    return _nodes_from_document(document, path, gpu_resource)


def _json_error(error: ValueError | RecursionError, path: str) -> InputError:
    if isinstance(error, RecursionError):  # the parser descends one call per level
        return InputError(f"{path}: not a NodeList: nested too deeply")
    if isinstance(error, json.JSONDecodeError):
        return InputError(
            f"{path}:{error.lineno}: not valid JSON: {error.msg} (column {error.colno}); "
            "a nodes file that starts with '{' or '[' is read as JSON"
        )
    return InputError(f"{path}: {number_problem(error) or f'not valid JSON: {error}'}")


def _nodes_from_yaml(text: str, path: str, gpu_resource: str) -> list[Node]:
    import yaml  # only this input needs a parser

    from simpletfjob import yamlload

    try:
        document = yamlload.load(text)
    except yaml.YAMLError as e:
        raise InputError(yamlload.describe_error(e, path, "not a valid NodeList")) from e
    return _nodes_from_document(document, path, gpu_resource)


def _nodes_from_document(document: object, path: str, gpu_resource: str) -> list[Node]:
    """The nodes of a saved NodeList (kubectl's v1 List), or of a single saved Node."""
    if isinstance(document, Mapping) and document.get("kind") == "Node":
        nodes = [node_from_object(document, path, gpu_resource)]
    elif isinstance(document, Mapping) and "items" in document:
        items = document["items"]
        if not isinstance(items, list):
            raise InputError(f"{path}: items must be a list of nodes, not {describe_value(items)}")
        nodes = [
            node_from_object(item, f"{path}: items[{i}]", gpu_resource)
            for i, item in enumerate(items)
        ]
    else:
        raise InputError(
            f"{path}: expected a NodeList (kubectl get nodes -o json) or one host per line"
        )
    check_host_names((n.name, n.origin) for n in nodes)
    return sorted(nodes, key=lambda n: n.name)


def node_from_object(obj: object, origin: str, gpu_resource: str = GPU_RESOURCE) -> Node:
    """A `Node` from the JSON object of a v1 Node, as the API server or kubectl gives it.

    Its `gpus` are its allocatable `gpu_resource` (nvidia.com/gpu, amd.com/gpu, ...).

    Every field read is checked for its type, so a malformed node is one line that names
    where it is (`origin`) and the field, never a crash.
    """
    if type(obj) is not dict:
        raise InputError(f"{origin}: a node must be a mapping, not {describe_value(obj)}")
    if obj.get("kind", "Node") != "Node":
        raise InputError(f"{origin}: kind must be Node, not {describe_value(obj['kind'])}")
    metadata = obj.get("metadata")
    if type(metadata) is not dict:
        raise _malformed(origin, None, "metadata", metadata, "a mapping")
    name = metadata.get("name")
    if type(name) is not str or not name:
        raise _malformed(origin, None, "metadata.name", name, "a non-empty string")
    spec = _mapping(obj.get("spec"), origin, name, "spec")
    status = _mapping(obj.get("status"), origin, name, "status")

    conditions = _list_entries(
        status.get("conditions"), "status.conditions", ("type", "status"), origin, name
    )
    taints = [
        Taint(key, value, effect)
        for key, value, effect in _list_entries(
            spec.get("taints"), "spec.taints", ("key", "value", "effect"), origin, name, optional=2
        )
    ]
    addresses: dict[str, list[str]] = {}
    for kind, address in _list_entries(
        status.get("addresses"), "status.addresses", ("type", "address"), origin, name
    ):
        addresses.setdefault(kind, []).append(address)

    labels = _mapping(metadata.get("labels"), origin, name, "metadata.labels")
    labels = _string_labels(labels, origin, name)

    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and type(unschedulable) is not bool:
        raise _malformed(origin, name, "spec.unschedulable", unschedulable, "true or false")
    allocatable = _mapping(status.get("allocatable"), origin, name, "status.allocatable")
    gpus = allocatable.get(gpu_resource, 0)
    count = parse_quantity_count(gpus) if type(gpus) in (str, int) else None
    if count is None:
        field = f"status.allocatable[{gpu_resource!r}]"
        raise _malformed(origin, name, field, gpus, 'a quantity such as "4"')
    return Node(
        name=name,
        ready=("Ready", "True") in conditions,
        unschedulable=bool(unschedulable),
        taints=tuple(taints),
        labels=labels or _EMPTY,
        addresses=addresses,
        gpus=count,
        origin=origin,
        plain=False,
        allocatable=allocatable or _EMPTY,
    )


def _list_entries(
    listed: object, field: str, keys: tuple[str, ...], origin: str, name: str, optional: int = 0
) -> list[tuple[str, ...]]:
    """The string `keys` of each mapping in the list at `field` (null: none); the last
    `optional` keys may be missing or null, read as ''. Anything else is one line naming it."""
    if type(listed) is not list and listed is not None:
        raise _malformed(origin, name, field, listed, "a list")
    found = []
    for i, entry in enumerate(listed or ()):
        if type(entry) is not dict:
            raise _malformed(origin, name, f"{field}[{i}]", entry, "a mapping")
        values = []
        for k, key in enumerate(keys):
            value = entry.get(key) or "" if k >= len(keys) - optional else entry.get(key)
            if type(value) is not str:
                raise _malformed(origin, name, f"{field}[{i}].{key}", value, "a string")
            values.append(value)
        found.append(tuple(values))
    return found


def _mapping(value: object, origin: str, name: str, field: str) -> dict[Any, Any]:
    """A mapping a node may leave out (null: empty)."""
    if value is not None and type(value) is not dict:
        raise _malformed(origin, name, field, value, "a mapping")
    return value or {}


def _string_labels(labels: dict[Any, Any], origin: str, name: str) -> dict[str, str]:
    """Labels whose keys and values are strings; a null value (`key:` in YAML) is ''."""
    checked = {}
    for key, value in labels.items():
        if type(key) is not str:
            raise _malformed(origin, name, "metadata.labels", key, "keyed by strings")
        if value is not None and type(value) is not str:
            raise _malformed(origin, name, f"metadata.labels[{key!r}]", value, "a string")
        checked[key] = value or ""
    return checked


def _malformed(origin: str, name: str | None, field: str, value: object, wanted: str) -> InputError:
    where = f"{origin}, node {name!r}" if name is not None else origin
    if value is None:
        return InputError(f"{where}: {field} is missing")
    return InputError(f"{where}: {field} must be {wanted}, not {describe_value(value)}")


_IMAGES_KEY = b'"images"'
_IMAGES_START = rb'"images"\s*:\s*\[\s*\{'  # compiled on first use, as _JSON_START
_IMAGES_END = rb"\}\s*\]"


def without_images(data: bytes) -> bytes:
    """A node list's JSON with every node's `status.images` emptied, before it is parsed.
    The images are most of a real node's JSON and simpletfjob needs none of them. Image
    references hold no brackets or braces, so the list ends at the first `}` followed by
    `]`; anything else makes the result invalid JSON, and the caller parses the whole text."""
    pieces: list[memoryview] = []  # views, not copies: a saved list can be hundreds of MB
    view = memoryview(data)
    kept = 0  # data[:kept] is in pieces
    at = data.find(_IMAGES_KEY)
    if at < 0:
        return data
    images_start, images_end = re.compile(_IMAGES_START), re.compile(_IMAGES_END)
    while at >= 0:
        start = images_start.match(data, at)
        end = images_end.search(data, start.end()) if start else None
        if start is None or end is None:
            at = data.find(_IMAGES_KEY, at + len(_IMAGES_KEY))
            continue
        pieces.append(view[kept : start.end() - 1])  # up to the list's '[', whitespace included
        kept = end.end() - 1  # from the closing ']'
        at = data.find(_IMAGES_KEY, kept)
    if not pieces:
        return data
    pieces.append(view[kept:])
    return b"".join(pieces)


# --address choices -> how to find that address on a node.
ADDRESS_CHOICES = ("name", "internal-ip", "hostname")
HOSTNAME_LABEL = "kubernetes.io/hostname"


# A host name as a label value can hold it: DNS labels, dotted, up to 63 characters.
# Compiled on first use: only --address hostname reads it.
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,61}[A-Za-z0-9])?"


def host_address(node: Node, how: str) -> str:
    """What the task addresses and <<host>> call this node: its name, its InternalIP or its hostname label."""
    if how == "name":
        return node.name
    if how == "internal-ip":
        address = next(iter(node.addresses.get("InternalIP", ())), None)
        if not address:
            listed = ", ".join(sorted(node.addresses)) or "none"
            raise InputError(
                f"node {node.name!r} has no InternalIP address (it lists: {listed}); "
                "choose another --address"
            )
        import ipaddress  # only this option needs it

        try:
            ipaddress.ip_address(address)
        except ValueError:
            # A saved NodeList can hold anything; the tasks would name an endpoint no one has.
            raise InputError(
                f"{node.origin}, node {node.name!r}: its InternalIP {address!r} is not an IP "
                "address; choose another --address"
            ) from None
        return address
    if how == "hostname":
        label = node.labels.get(HOSTNAME_LABEL)
        if not label:
            raise InputError(
                f"node {node.name!r} has no {HOSTNAME_LABEL} label; choose another --address"
            )
        if not re.fullmatch(_HOST_LABEL, label):
            raise InputError(
                f"{node.origin}, node {node.name!r}: its {HOSTNAME_LABEL} label {label!r} is not "
                "a host name; choose another --address"
            )
        return label
    raise ValueError(f"unknown address kind {how!r}")
