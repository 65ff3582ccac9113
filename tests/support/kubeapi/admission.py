"""What the API server does to objects on their way in: defaults and create-time resets
(defaults.py), and the few validations clients of this project meet."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from tests.support.kubeapi import defaults
from tests.support.kubeapi.resources import Resource, invalid


def prepare_for_create(
    resource: Resource, obj: dict[str, Any], gates: Mapping[str, bool] | None = None
) -> None:
    if resource.name == "pods":
        defaults.default_pod(obj)
        obj["status"] = defaults.pod_status_on_create(obj)
    elif resource.name == "jobs":
        _drop_disabled_fields(obj, None, gates or {})
        defaults.default_job(obj)
        obj["metadata"]["generation"] = 1
        obj["status"] = {}
    elif resource.name == "services":
        defaults.default_service(obj)
        obj["status"] = {"loadBalancer": {}}
    elif resource.name == "namespaces":
        defaults.default_namespace(obj)


def prepare_for_update(
    resource: Resource,
    new: dict[str, Any],
    old: Mapping[str, Any],
    gates: Mapping[str, bool] | None = None,
) -> None:
    if resource.name == "pods":
        defaults.default_pod(new)
    elif resource.name == "jobs":
        _drop_disabled_fields(new, old, gates or {})
        defaults.default_job(new)
    elif resource.name == "services":
        spec = new.setdefault("spec", {})
        old_spec = old.get("spec") or {}
        for kept in ("clusterIP", "clusterIPs"):
            if kept in old_spec and kept not in spec:
                spec[kept] = old_spec[kept]
        defaults.default_service(new)


def _drop_disabled_fields(
    job: dict[str, Any], old: Mapping[str, Any] | None, gates: Mapping[str, bool]
) -> None:
    """v1.20's dropDisabledFields for a Job: without the TTLAfterFinished gate,
    `ttlSecondsAfterFinished` is dropped silently, unless the old object already uses it."""
    if gates.get("TTLAfterFinished", True):
        return
    in_use = old is not None and "ttlSecondsAfterFinished" in (old.get("spec") or {})
    spec = job.get("spec")
    if isinstance(spec, dict) and not in_use:
        spec.pop("ttlSecondsAfterFinished", None)


_DNS_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def validate_metadata(resource: Resource, meta: Mapping[str, Any]) -> None:
    name = meta.get("name") or ""
    if not name:
        raise invalid(
            resource,
            "",
            [
                (
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                )
            ],
        )
    if len(name) > 253 or not re.fullmatch(
        r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name
    ):
        raise invalid(
            resource,
            name,
            [
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": {_DNS_SUBDOMAIN_MESSAGE}',
                )
            ],
        )


def validate(resource: Resource, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
    """The few validations clients of this project meet: Job pod templates and immutability."""
    name = obj["metadata"]["name"]
    if resource.name == "jobs":
        spec = obj.get("spec") or {}
        pod_spec = (spec.get("template") or {}).get("spec") or {}
        causes = []
        if not pod_spec.get("containers"):
            causes.append(("spec.template.spec.containers", "FieldValueRequired", "Required value"))
        policy = pod_spec.get("restartPolicy")
        if policy not in ("OnFailure", "Never"):
            causes.append(
                (
                    "spec.template.spec.restartPolicy",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
                )
            )
        if old is not None:
            old_spec = old.get("spec") or {}
            for part in ("template", "selector", "completions"):
                if spec.get(part) != old_spec.get(part):
                    # the real message prints the Go value of the whole field; it ends the same way
                    causes.append(
                        (
                            f"spec.{part}",
                            "FieldValueInvalid",
                            f"Invalid value: {_go_value(part)}: field is immutable",
                        )
                    )
        if causes:
            raise invalid(resource, name, causes)
    if resource.name == "pods" and old is not None:

        def mutable_removed(given: Mapping[str, Any]) -> Any:
            spec = copy.deepcopy(dict(given))
            spec.pop("activeDeadlineSeconds", None)
            spec.pop("tolerations", None)
            for key in ("containers", "initContainers"):
                for c in spec.get(key) or []:
                    c.pop("image", None)
            return spec

        if mutable_removed(obj.get("spec") or {}) != mutable_removed(old.get("spec") or {}):
            raise invalid(
                resource,
                name,
                [
                    (
                        "spec",
                        "FieldValueForbidden",
                        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds` or `spec.tolerations` (only additions to existing tolerations)",
                    )
                ],
            )


def _go_value(part: str) -> str:
    return {
        "template": "core.PodTemplateSpec{...}",
        "selector": "&v1.LabelSelector{...}",
        "completions": "1",
    }[part]
