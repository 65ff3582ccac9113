"""Pages of the cluster's Jobs and pods decoded straight into what the counting rules read.

A Job's or a pod's JSON is mostly what usage.py's rules need none of (managed fields, each
container's command and environment). msgspec decodes a page keeping only the fields
`usage.job_use` and `usage.pod_use` read, put together as the small object they are in the
item and handed to those functions, so every check and message is the careful way's. A page
of another shape (an item or container that is not a mapping...) is left to the careful
decoder (`None`), as nodepage.py leaves odd node pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from simpletfjob.hosts.usage import JobUse, PodUse, job_use, pod_use
from simpletfjob.kube.lists import Page

_MISSING: Any = msgspec.UNSET  # a key the Job does not have stays out of the object made


class _Meta(msgspec.Struct):
    name: Any = _MISSING
    namespace: Any = _MISSING
    uid: Any = _MISSING
    labels: Any = _MISSING
    ownerReferences: Any = _MISSING
    deletionTimestamp: Any = _MISSING


class _Container(msgspec.Struct):
    name: Any = _MISSING
    resources: Any = _MISSING
    ports: Any = _MISSING
    restartPolicy: Any = _MISSING


class _PodSpec(msgspec.Struct):
    nodeName: Any = _MISSING
    hostNetwork: Any = _MISSING
    overhead: Any = _MISSING
    containers: list[_Container] | None = _MISSING
    initContainers: list[_Container] | None = _MISSING


class _Template(msgspec.Struct):
    spec: _PodSpec | None = _MISSING


class _Spec(msgspec.Struct):
    parallelism: Any = _MISSING
    completions: Any = _MISSING
    suspend: Any = _MISSING
    template: _Template | None = _MISSING


class _Status(msgspec.Struct):
    conditions: Any = _MISSING
    succeeded: Any = _MISSING
    phase: Any = _MISSING


class _Job(msgspec.Struct):
    metadata: _Meta | None = _MISSING
    spec: _Spec | None = _MISSING
    status: _Status | None = _MISSING


class _Pod(msgspec.Struct):
    metadata: _Meta | None = _MISSING
    spec: _PodSpec | None = _MISSING
    status: _Status | None = _MISSING


class _ListMeta(msgspec.Struct):
    resourceVersion: str | None = None
    token: str | None = msgspec.field(default=None, name="continue")


class _List(msgspec.Struct):
    items: list[_Job]
    metadata: _ListMeta | None = None


class _PodList(msgspec.Struct):
    items: list[_Pod]
    metadata: _ListMeta | None = None


_DECODER = msgspec.json.Decoder(_List)
_PODS = msgspec.json.Decoder(_PodList)


def decode_jobs(
    data: bytes, origin: str, resource: str, job_label: str, others: Sequence[str] = ()
) -> Page[list[JobUse]] | None:
    """The page's Jobs as `job_use` reads them, its continue token and resourceVersion; None
    when the page is not shaped as this expects (see the module), for the careful decoder.

    `job_use`'s own refusal (InputError) is raised as it is: the careful way raises the same.
    """
    try:
        page = _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    uses = [job_use(_as_object(item), resource, job_label, origin, others) for item in page.items]
    meta = page.metadata or _ListMeta()
    return Page(uses, meta.token or None, meta.resourceVersion or "")


def decode_pods(
    data: bytes, origin: str, resource: str, job_label: str, others: Sequence[str] = ()
) -> Page[list[PodUse]] | None:
    """The page's pods as `pod_use` reads them, as `decode_jobs` reads Jobs."""
    try:
        page = _PODS.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    uses = [pod_use(_as_object(item), resource, job_label, origin, others) for item in page.items]
    meta = page.metadata or _ListMeta()
    return Page(uses, meta.token or None, meta.resourceVersion or "")


def _as_object(value: Any) -> Any:
    """A decoded struct as the JSON object it was, without the keys it did not have."""
    if isinstance(value, msgspec.Struct):
        return {
            key: _as_object(field)
            for key in value.__struct_fields__
            if (field := getattr(value, key)) is not msgspec.UNSET
        }
    if type(value) is list and value and isinstance(value[0], msgspec.Struct):
        return [_as_object(item) for item in value]
    return value
