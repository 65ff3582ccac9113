"""A list page of nodes, Jobs or pods, read for only the fields simpletfjob reads of them.

A node's, a Job's or a pod's JSON is mostly what simpletfjob needs none of: a node's images,
every object's managed fields, each container's command and environment. msgspec decodes a
page into structs of only the fields below, skipping the rest without building it, and gives
the page back as the JSON it was, less those. Each item is then read by the one decoder of its
kind (`nodes.node_from_object`, `usage.job_use`, `usage.pod_use`), so every check and message
is theirs. A page of another shape (an item or a field that is not a mapping...) is None, for
the caller to parse whole.
"""

from __future__ import annotations

from typing import Any

import msgspec

_MISSING: Any = msgspec.UNSET  # a key the object does not have stays out of the JSON given


class _Meta(msgspec.Struct):
    name: Any = _MISSING
    namespace: Any = _MISSING
    uid: Any = _MISSING
    labels: Any = _MISSING
    ownerReferences: Any = _MISSING
    deletionTimestamp: Any = _MISSING
    resourceVersion: Any = _MISSING  # a list's
    token: Any = msgspec.field(default=_MISSING, name="continue")  # a list's


class _Container(msgspec.Struct):
    name: Any = _MISSING
    resources: Any = _MISSING
    ports: Any = _MISSING
    restartPolicy: Any = _MISSING


class _Spec(msgspec.Struct):
    taints: Any = _MISSING  # a node's
    unschedulable: Any = _MISSING
    parallelism: Any = _MISSING  # a Job's
    completions: Any = _MISSING
    suspend: Any = _MISSING
    template: _Template | None = _MISSING
    nodeName: Any = _MISSING  # a pod's, and a Job's template's
    hostNetwork: Any = _MISSING
    overhead: Any = _MISSING
    containers: list[_Container] | None = _MISSING
    initContainers: list[_Container] | None = _MISSING


class _Template(msgspec.Struct):
    spec: _Spec | None = _MISSING


class _Status(msgspec.Struct):
    conditions: Any = _MISSING
    addresses: Any = _MISSING  # a node's
    allocatable: Any = _MISSING
    succeeded: Any = _MISSING  # a Job's
    phase: Any = _MISSING  # a pod's


class _Object(msgspec.Struct):
    metadata: _Meta | None = _MISSING
    spec: _Spec | None = _MISSING
    status: _Status | None = _MISSING


class _List(msgspec.Struct):
    items: list[_Object] | None = _MISSING
    metadata: _Meta | None = _MISSING


_DECODER = msgspec.json.Decoder(_List)


def skim(data: bytes) -> Any:
    """The list page `data` as JSON, with only the fields read; None if it is shaped otherwise."""
    try:
        return msgspec.to_builtins(_DECODER.decode(data))
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
