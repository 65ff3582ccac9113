"""What apply sends: a run's documents as manifests, each checked before any request.

A manifest is one document parsed: a batch/v1 Job or a v1 Service that carries the
run's labels, in the namespace the run goes to or in none, with the numbers of its
resource quantities written as strings, in the order they are applied (Services
first, so that the DNS names exist before the pods that look them up start).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from simpletfjob.errors import RenderCheckError, UsageError
from simpletfjob.identity import JOB_LABEL, MANAGED_BY, MANAGER
from simpletfjob.kube.resources import JOBS, SERVICES, Resource
from simpletfjob.runs.objects import belongs_to, object_name
from simpletfjob.runs.planned import PlannedDocument

APPLIED_ORDER = (SERVICES, JOBS)  # DNS names exist before the pods that look them up start


class Manifest(NamedTuple):
    """One document to apply: its resource, its body, and how messages name it."""

    resource: Resource
    body: dict[str, Any]
    document: str  # "document 2 (Job 'mnist-worker-0')"

    @property
    def name(self) -> str:
        return object_name(self.body)

    @property
    def ref(self) -> str:
        return self.resource.ref(self.name)

    @property
    def key(self) -> tuple[str, str]:
        return self.resource.plural, self.name


def manifests(
    documents: Iterable[tuple[str | PlannedDocument, str]], run: str, namespace: str
) -> list[Manifest]:
    """The documents (text or planned document, how to name it) as manifests, Services first;
    every check before any request.

    Each must be a Job or a Service carrying the run's labels, in `namespace` or in none. A
    planned document's object is what its text reads as, had without parsing the framework's
    placed values where that is sure (manifest/parsed.py), else from its text.
    """
    import yaml

    from simpletfjob.yamlload import load, manifest_loader

    loader = manifest_loader()
    found = []
    for source, document in documents:
        body: Any
        read, body = (False, None) if isinstance(source, str) else source.body(loader)
        try:
            if not read:
                body = load(source if isinstance(source, str) else source.text, loader)
        except yaml.YAMLError as e:  # the render's checks parsed it; a constructor may object
            raise RenderCheckError(f"{document} cannot be read: {e}") from e
        resource = _resource_of(body, document)
        written = (body.get("metadata") or {}).get("namespace")
        if written not in (None, "", namespace):
            # As kubectl refuses a document for another namespace than the one it applies to.
            raise UsageError(
                f"{document} names namespace {written!r}, but the run goes to namespace "
                f"{namespace!r}; give --namespace {written}, or remove the namespace from the template"
            )
        if not belongs_to(body, run):
            labels = (body.get("metadata") or {}).get("labels") or {}
            raise RenderCheckError(
                f"{document} carries {JOB_LABEL}={labels.get(JOB_LABEL)!r} and {MANAGED_BY}="
                f"{labels.get(MANAGED_BY)!r}, not the run's {run!r} and {MANAGER!r}; the labels "
                "are the run's identity, so the template may not set them otherwise"
            )
        if resource is JOBS:
            _quantities_as_strings(body)
        try:
            json.dumps(body, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise RenderCheckError(f"{document} holds a value JSON cannot carry: {e}") from e
        found.append(Manifest(resource, body, document))
    return sorted(found, key=lambda m: APPLIED_ORDER.index(m.resource))


def _quantities_as_strings(job: dict[str, Any]) -> None:
    """Write the numbers of a Job's resource quantities as strings (`nvidia.com/gpu: 1` -> "1").

    YAML reads `1` as a number, which kubectl's client-side apply sends and the server
    takes; server-side apply in Kubernetes up to 1.20 types a quantity as a string only
    and answers 500 ("expected string") for a number. The string is the same quantity.
    """
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec")
    if not isinstance(spec, dict):
        return
    maps = [spec.get("overhead")]
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(key) or ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict):
                maps += [resources.get("limits"), resources.get("requests")]
    for volume in spec.get("volumes") or ():
        empty = volume.get("emptyDir") if isinstance(volume, dict) else None
        if isinstance(empty, dict) and "sizeLimit" in empty:
            maps.append(empty)  # its other key, medium, is a string already
    for quantities in maps:
        if isinstance(quantities, dict):
            for name, value in quantities.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    quantities[name] = str(value)


def _resource_of(body: object, document: str) -> Resource:
    if isinstance(body, dict):
        for resource in APPLIED_ORDER:
            if (body.get("apiVersion"), body.get("kind")) == (resource.api_version, resource.kind):
                return resource
        what = f"a {body.get('kind') or 'document without a kind'} of {body.get('apiVersion')!r}"
    else:
        what = "not a mapping"
    raise RenderCheckError(
        f"{document} is {what}; a run is batch/v1 Jobs and v1 Services, so apply sends nothing "
        "else (render it with simpletfjob render and apply the rest with kubectl)"
    )
