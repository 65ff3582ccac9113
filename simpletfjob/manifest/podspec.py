"""What a template's pods ask of a node: the tolerations in its pod specs, the host ports they hold,
and the resources their containers request.

Read from the YAML node trees of one render (see `documents.compose_documents`),
so no Python objects are built for the rest of the document.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

_MARK = "\ue000"  # what starts a placed value's marker (template/markers.py's MARK_OPEN)
# Toleration fields that take part in matching a taint (tolerationSeconds does not).
_MATCHED_FIELDS = ("key", "operator", "value", "effect")


def pod_tolerations(documents: Sequence[Any]) -> tuple[dict[str, str], ...]:
    """Every toleration of every pod spec (a mapping with `containers`) in the documents, once each."""
    found: list[dict[str, str]] = []
    for spec in _pod_specs(documents):
        tolerations = spec.get("tolerations")
        if tolerations is None or type(tolerations).__name__ != "SequenceNode":
            continue
        for item in tolerations.value:
            toleration = {
                k: v for k, v in _scalars(item).items() if k in _MATCHED_FIELDS and v != ""
            }
            if toleration not in found:
                found.append(toleration)
    return tuple(found)


def pod_node_names(documents: Sequence[Any]) -> list[Any]:
    """The `nodeName` scalar node of every pod spec in the documents that sets one."""
    names = []
    for spec in _pod_specs(documents):
        node = spec.get("nodeName")
        if _scalar(node) is not None:
            names.append(node)
    return names


class HostPorts(NamedTuple):
    """Whether the pods use the host's network, and the host ports they hold there, in document order."""

    host_network: bool
    ports: tuple[tuple[int, str], ...]  # (port, protocol)


# How YAML 1.1 (go-yaml, as kubectl reads manifests) writes true.
_TRUE = frozenset({"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"})


def pod_host_ports(documents: Sequence[Any]) -> HostPorts:
    """The host ports every pod spec in the documents holds: each `hostPort`, and on the host
    network (`hostNetwork: true`) every `containerPort`; sidecars' too (they keep running)."""
    host_network = False
    found: list[tuple[int, str]] = []
    for spec in _pod_specs(documents):
        on_host = _scalar(spec.get("hostNetwork")) in _TRUE
        host_network = host_network or on_host
        containers = list(_sequence_items(spec.get("containers")))
        containers += [
            c
            for c in _sequence_items(spec.get("initContainers"))
            if _scalars(c).get("restartPolicy") == "Always"
        ]
        for container in containers:
            entries = {k.value: v for k, v in _mapping_items(container)}
            for port in _sequence_items(entries.get("ports")):
                fields = _scalars(port)
                number = _port_number(fields.get("hostPort"))
                if number is None and on_host:
                    number = _port_number(fields.get("containerPort"))
                if number is not None:
                    found.append((number, fields.get("protocol") or "TCP"))
    return HostPorts(host_network, tuple(found))


def pod_resources(documents: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Every pod spec in the documents, reduced to what its resource requests are counted from.
    Each is a plain pod spec (containers and init containers with their `resources` and
    `restartPolicy`, and `overhead`) for hosts/requested.py's rules; a quantity is its
    scalar's text."""
    found = []
    for spec in _pod_specs(documents):
        pod: dict[str, Any] = {}
        for field in ("containers", "initContainers"):
            pod[field] = [_container_resources(c) for c in _sequence_items(spec.get(field))]
        overhead = _quantities(spec.get("overhead"))
        if overhead:
            pod["overhead"] = overhead
        found.append(pod)
    return tuple(found)


def _container_resources(container: Any) -> dict[str, Any]:
    entries = {k.value: v for k, v in _mapping_items(container)}
    resources = {k.value: _quantities(v) for k, v in _mapping_items(entries.get("resources"))}
    reduced: dict[str, Any] = {"resources": resources}
    policy = _scalar(entries.get("restartPolicy"))
    if policy is not None:
        reduced["restartPolicy"] = policy
    return reduced


def _quantities(node: Any) -> dict[str, Any]:
    """A mapping of resource names to quantities: each scalar's text ([] or {} for a non-scalar)."""
    found: dict[str, Any] = {}
    for key, value in _mapping_items(node):
        text = _scalar(value)
        if text is None:
            found[key.value] = [] if type(value).__name__ == "SequenceNode" else {}
        elif value.tag != "tag:yaml.org,2002:null":  # `cpu:` with nothing asks for nothing
            found[key.value] = text
    return found


def _port_number(text: str | None) -> int | None:
    if text is None or not text.isdigit() or not 0 < int(text) < 65536:
        return None
    return int(text)


def _scalar(node: Any) -> str | None:
    return node.value if type(node).__name__ == "ScalarNode" else None


def _sequence_items(node: Any) -> Iterator[Any]:
    if type(node).__name__ == "SequenceNode":
        yield from node.value


def _mapping_items(node: Any) -> Iterator[tuple[Any, Any]]:
    if type(node).__name__ == "MappingNode":
        yield from ((k, v) for k, v in node.value if type(k).__name__ == "ScalarNode")


def _pod_specs(documents: Sequence[Any]) -> Iterator[dict[str, Any]]:
    """Pod specs anywhere in the documents' trees (Job, Pod, CronJob, TFJob replica specs...),
    each node visited once, in document order."""
    seen: set[int] = set()
    stack = list(reversed(documents))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        kind = type(node).__name__
        if kind == "MappingNode":
            entries = {k.value: v for k, v in node.value if type(k).__name__ == "ScalarNode"}
            if "containers" in entries:
                yield entries
            stack.extend(reversed(entries.values()))
        elif kind == "SequenceNode":
            stack.extend(reversed(node.value))


def _scalars(node: Any) -> dict[str, str]:
    return {k.value: v.value for k, v in _mapping_items(node) if _scalar(v) is not None}


class GpuAsk(NamedTuple):
    """What the task's container asks of a GPU resource, where, and the count that is."""

    kind: str  # 'limits' or 'requests'
    text: str  # the value as written ('2', '2.5'), or what it is instead of one ('a list')
    gpus: int | None  # the whole number of GPUs it is; None when it cannot be one


def container_gpus(
    documents: Sequence[Any], resource: str, env_names: Sequence[str]
) -> GpuAsk | None:
    """The GPUs (`resource`) the task's container asks for: its limit, else its request.
    The task's container is the first that carries one of `env_names` (or a placed value's
    marker), else the first; None when it asks for none. A value that is not a whole number
    of at least 1 (`2.5`, `500m`) has no count: the caller names it."""
    wanted = set(env_names)
    first = None
    for spec in _pod_specs(documents):
        for container in _sequence_items(spec.get("containers")):
            entries = {k.value: v for k, v in _mapping_items(container)}
            if first is None:
                first = entries
            env = list(_sequence_items(entries.get("env")))
            if wanted & {_scalars(e).get("name") for e in env} or any(
                _MARK in (_scalar(e) or "") for e in env
            ):
                return _gpus_of(entries, resource)
    return None if first is None else _gpus_of(first, resource)


def _gpus_of(container: dict[str, Any], resource: str) -> GpuAsk | None:
    resources = {k.value: v for k, v in _mapping_items(container.get("resources"))}
    for kind in ("limits", "requests"):
        found = {k.value: v for k, v in _mapping_items(resources.get(kind))}
        if resource not in found:
            continue
        text = _scalar(found[resource])
        if text is None:
            what = "a list" if type(found[resource]).__name__ == "SequenceNode" else "a mapping"
            return GpuAsk(kind, what, None)
        return GpuAsk(kind, text, _whole_count(text))
    return None


def _whole_count(text: str) -> int | None:
    """A quantity that is a whole number of devices, at least 1 ('2', '2000m', '1e1'); else None."""
    from simpletfjob.quantity import parse_quantity

    try:
        amount = parse_quantity(text)
    except ValueError:
        return None
    if amount.denominator != 1 or amount < 1:
        return None
    return int(amount)
