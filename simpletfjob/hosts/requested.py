"""What a pod spec asks of its node: each resource's request, and the host ports it holds.

The counting rules of usage.py's docstring, for one pod spec (a v1 Pod's or a Job's pod
template's): read exactly (`pod_request`) or in the scheduler's units (`pod_units`, for the
fit). plan/fit.py reads a template's pods with the same functions, so a task asks for what
its pod would be counted as holding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from simpletfjob.errors import InputError
from simpletfjob.inputs import describe_value
from simpletfjob.quantity import parse_quantity, scheduler_units

# A host port and its protocol; a TCP port and a UDP port of one number do not collide.
Port = tuple[int, str]


def mapping_at(value: Any, where: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise InputError(f"{where}: {field} must be a mapping, not {describe_value(value)}")
    return value


def list_at(value: Any, where: str, field: str) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise InputError(f"{where}: {field} must be a list, not {describe_value(value)}")
    return value


# Nothing asked: one shared zero, as most pods ask nothing of a GPU resource.
ZERO = Fraction(0)


def _quantity(
    resources: dict[str, Any], key: str, resource: str, where: str, field: str, units: bool
) -> Any:
    """One amount a container or an overhead states: exactly (a Fraction, the free GPUs' count),
    or in the scheduler's units (quantity.scheduler_units, for the fit's resources)."""
    listed = mapping_at(resources.get(key), where, f"{field}.{key}")
    value = listed.get(resource)
    if value is None:
        return 0 if units else ZERO
    try:
        return scheduler_units(value, resource) if units else parse_quantity(value)
    except ValueError as e:
        raise InputError(f"{where}: {field}.{key}[{resource!r}]: {e}") from e


def _container_requests(
    container: Any, resources: Sequence[str], where: str, field: str, units: bool
) -> Sequence[Any]:
    """A container's request of each resource (its limit where it states no request); () for none."""
    if type(container) is not dict:
        raise InputError(f"{where}: {field} must be a mapping, not {describe_value(container)}")
    listed = container.get("resources")
    if not listed:
        return ()
    listed = mapping_at(listed, where, f"{field}.resources")
    requests = mapping_at(listed.get("requests"), where, f"{field}.resources.requests")
    return [
        _quantity(
            listed, "requests" if r in requests else "limits", r, where, f"{field}.resources", units
        )
        for r in resources
    ]


def pod_request(spec: Mapping[str, Any], resource: str, where: str = "pod") -> Fraction:
    """How much of one resource a pod spec asks of its node (kubectl's PodRequestsAndLimits)."""
    amount: Fraction = _pod_requests(spec, (resource,), where, units=False)[0]
    return amount


def pod_units(spec: Mapping[str, Any], resources: Sequence[str], where: str = "pod") -> list[int]:
    """What a pod spec asks of each resource, by the same rules, in the scheduler's units."""
    amounts: list[int] = _pod_requests(spec, resources, where, units=True)
    return amounts


def _pod_requests(
    spec: Mapping[str, Any], resources: Sequence[str], where: str, units: bool
) -> list[Any]:
    """The rules of the module docstring, for each resource at once, read as `_quantity` reads."""
    zero = 0 if units else ZERO
    count = len(resources)
    total = [zero] * count
    for i, c in enumerate(list_at(spec.get("containers"), where, "spec.containers")):
        amounts = _container_requests(c, resources, where, f"spec.containers[{i}]", units)
        for k, amount in enumerate(amounts):
            if amount:  # (a zero adds nothing, and adding it costs)
                total[k] += amount
    inits = list_at(spec.get("initContainers"), where, "spec.initContainers")
    if inits:
        sidecars = [zero] * count  # of the sidecars started so far
        init = [zero] * count  # the most any step of the start-up needs
        for i, c in enumerate(inits):
            amounts = _container_requests(c, resources, where, f"spec.initContainers[{i}]", units)
            if c.get("restartPolicy") == "Always":
                for k, amount in enumerate(amounts):
                    total[k] += amount  # a sidecar runs beside the containers
                    sidecars[k] += amount
                    init[k] = max(init[k], sidecars[k])
            else:
                for k, amount in enumerate(amounts or [zero] * count):
                    if amount or sidecars[k]:
                        init[k] = max(init[k], amount + sidecars[k])
        for k in range(count):
            if init[k] and init[k] > total[k]:
                total[k] = init[k]
    overhead = spec.get("overhead")
    if overhead:
        for k, resource in enumerate(resources):
            total[k] += _quantity(
                {"overhead": overhead}, "overhead", resource, where, "spec", units
            )
    return total


def held_ports(spec: Mapping[str, Any], where: str = "pod") -> tuple[Port, ...]:
    """The host ports a pod spec holds on its node: hostPorts, or every port on the host network."""
    host_network = spec.get("hostNetwork") is True
    found: list[Port] = []
    containers = list_at(spec.get("containers"), where, "spec.containers")
    inits = list_at(spec.get("initContainers"), where, "spec.initContainers")
    running = [
        *containers,
        *(c for c in inits if type(c) is dict and c.get("restartPolicy") == "Always"),
    ]
    for c in running:
        if type(c) is not dict or not c.get("ports"):
            continue
        for port in list_at(c.get("ports"), where, f"container {c.get('name')!r}: ports"):
            if type(port) is not dict:
                continue
            number = port.get("hostPort") or (port.get("containerPort") if host_network else None)
            if type(number) is int and number > 0:
                protocol = port.get("protocol") or "TCP"
                found.append((number, protocol if type(protocol) is str else "TCP"))
    return tuple(found)
