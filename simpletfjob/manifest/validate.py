"""--validate: check every rendered document offline against the Kubernetes OpenAPI schema.

The schemas are the `kubernetes-validate` package's strict ones (unknown fields such as
`contianers` rejected), read once per kind. Its own `validate()` is not used: it re-reads
the schema JSON for every document, reports a misspelled field as the derived "'containers'
is a required property", and compares versions as strings (1.24 ends in an IndexError).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from simpletfjob.errors import SchemaError, UsageError
from simpletfjob.manifest.documents import DocumentId

INSTALL_HINT = "pip install 'simpletfjob[validate]'"
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")
_SCHEMA_DIR = re.compile(r"v(\d+)\.(\d+)\.(\d+)-local-strict")


@dataclass(frozen=True)
class Problem:
    """One way a document does not match its schema: where (a field path) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def _schemas() -> Any:
    """The root of kubernetes-validate's schema files, or a one-line error saying how to get it."""
    try:
        import importlib.resources

        import jsonschema  # noqa: F401  (kubernetes-validate's dependency; checked here, used later)

        root = importlib.resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")
    except ImportError as e:
        raise SchemaError(
            f"--validate needs the kubernetes-validate package: {INSTALL_HINT}"
        ) from e
    return root


def supported_versions(root: Any) -> list[tuple[int, int, int]]:
    found = [_SCHEMA_DIR.fullmatch(entry.name) for entry in root.iterdir()]
    return sorted((int(m[1]), int(m[2]), int(m[3])) for m in found if m)


def resolve_version(requested: str | None, available: Sequence[tuple[int, int, int]]) -> str:
    """The schema directory version for --kube-version (any patch level of a known minor)."""
    if not available:
        raise SchemaError(f"kubernetes-validate has no schemas installed; {INSTALL_HINT}")
    low, high = available[0], available[-1]
    span = f"{low[0]}.{low[1]} to {high[0]}.{high[1]}"
    if requested is None:
        return _dotted(high)
    match = _VERSION.fullmatch(requested.strip())
    if match is None:
        raise UsageError(
            f"--kube-version {requested!r} is not a version such as 1.30; "
            f"the installed schemas cover Kubernetes {span}"
        )
    wanted = (int(match[1]), int(match[2]))
    for version in reversed(available):
        if version[:2] == wanted:
            return _dotted(version)
    # Upgrading brings newer schemas; an older version between two known ones, or below
    # them, has none to get.
    hint = " (upgrade it for newer ones)" if wanted > high[:2] else ""
    raise UsageError(
        f"--kube-version {requested}: no schema for Kubernetes {wanted[0]}.{wanted[1]}; "
        f"the installed kubernetes-validate covers {span}{hint}"
    )


def _dotted(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


class Validator:
    """Validators for one Kubernetes version, built once per kind and apiVersion."""

    def __init__(self, kube_version: str | None) -> None:
        self.root = _schemas()
        self.version = resolve_version(kube_version, supported_versions(self.root))
        self.directory = self.root.joinpath(f"v{self.version}-local-strict")
        self.short_version = ".".join(self.version.split(".")[:2])
        self._registry: Any = None
        self._validators: dict[tuple[str, str], Any] = {}
        self._api_groups: set[str] | None = None

    def problems(self, document: Any) -> list[Problem]:
        """Every way `document` departs from its schema, the most telling first."""
        if not isinstance(document, dict):
            return [Problem("", "is not a mapping")]
        api_version, kind = document.get("apiVersion"), document.get("kind")
        for field, value in (("apiVersion", api_version), ("kind", kind)):
            if value is None or value == "":
                return [Problem(field, "required field is missing")]
            if not isinstance(value, str):
                return [
                    Problem(field, f"must be a string, not {_json_type(value)} {_shown(value)}")
                ]
        validator = self.validator(str(kind), str(api_version))  # both strings by now
        if validator is None:
            return []
        from referencing.exceptions import Unresolvable

        try:
            errors = sorted(validator.iter_errors(document), key=_error_rank)
        except Unresolvable as e:  # a schema layout this module was not written for
            raise _unreadable(f"unresolvable reference {e}") from e
        return [problem for error in errors for problem in _describe(error)]

    def is_custom(self, api_version: str) -> bool:
        """Whether apiVersion names a group Kubernetes does not define (a custom resource)."""
        group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        if self._api_groups is None:
            self._api_groups = {
                entry.name.rsplit(".json", 1)[0].split("-", 1)[1]
                for entry in self.directory.iterdir()
                if entry.name.endswith(".json") and "-" in entry.name
            }
        slug = _api_slug(api_version)
        return "." in group and slug not in self._api_groups

    def validator(self, kind: str, api_version: str) -> Any:
        """The kind's validator, built on first use; None where the version has no schema for it."""
        key = (kind, api_version)
        if key in self._validators:
            return self._validators[key]
        import jsonschema
        from referencing import Registry, Resource

        schema_file = self.directory.joinpath(f"{kind.lower()}-{_api_slug(api_version)}.json")
        if not schema_file.is_file():
            self._validators[key] = None
            return None
        schema = json.loads(schema_file.read_text(encoding="utf-8"))
        if self._registry is None:
            shared = self.directory.joinpath("_definitions.json")
            if not shared.is_file():
                raise _unreadable(f"no _definitions.json for Kubernetes {self.version}")
            definitions = json.loads(shared.read_text(encoding="utf-8"))
            self._registry = Resource.from_contents(definitions) @ Registry()
        registry = Resource.from_contents(schema) @ self._registry
        built = jsonschema.validators.Draft202012Validator(schema, registry=registry)
        self._validators[key] = built
        return built


def _unreadable(detail: str) -> SchemaError:
    """Schemas laid out unlike those of the kubernetes-validate this was written against."""
    return SchemaError(
        f"cannot read the installed kubernetes-validate's schemas ({detail}); "
        "upgrade it: pip install -U 'simpletfjob[validate]'"
    )


def _api_slug(api_version: str) -> str:
    """kubernetes-validate's file naming: rbac.authorization.k8s.io/v1 -> rbac-v1, v1 -> v1."""
    return re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)


# Unknown fields and wrong types say most about a typo; a missing required field is
# often only the echo of a misspelled one, so it comes last.
_RANK = {"additionalProperties": 0, "type": 1, "enum": 2, "oneOf": 3, "required": 5}


def _error_rank(error: Any) -> tuple[int, int, str]:
    return (
        _RANK.get(error.validator, 4),
        len(error.absolute_path),
        _field_path(error.absolute_path),
    )


def _field_path(parts: Iterable[Any]) -> str:
    """kubectl's spelling: spec.template.spec.containers[0].ports[0].containerPort."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
}
# How a loaded document's value is named, by its type as YAML loads it.
_JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    dict: "a mapping",
    list: "a list",
}


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(error: Any) -> Iterator[Problem]:
    path = _field_path(error.absolute_path)
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        patterns = list(error.schema.get("patternProperties", {}))
        for key in sorted(map(str, error.instance)):
            if key not in known and not any(re.search(p, key) for p in patterns):
                yield Problem(_join(path, key), "unknown field (additional property not allowed)")
        return
    types: list[str] | None = None
    if error.validator == "type":
        wanted = error.validator_value
        types = [wanted] if isinstance(wanted, str) else [t for t in wanted if t != "null"]
    elif error.validator == "oneOf" and all("type" in s for s in error.validator_value):
        # int-or-string and quantity fields: say which types, not "not valid under any of".
        types = []
        for sub in error.validator_value:
            kinds = sub["type"] if isinstance(sub["type"], list) else [sub["type"]]
            types += [t for t in kinds if t != "null"]
    if types is not None:
        expected = " or ".join(_TYPE_NAMES.get(t, t) for t in types)
        yield Problem(
            path,
            f"must be {expected}, not {_json_type(error.instance)} {_shown(error.instance)}",
        )
        return
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in error.instance]
        for key in missing or error.validator_value[:1]:
            yield Problem(_join(path, key), "required field is missing")
        return
    message = str(error.message)
    if len(message) > 120:
        message = message[:117] + "..."
    yield Problem(path, message)


def validate_tasks(
    tasks: Iterable[tuple[str, Sequence[DocumentId], str]],
    kube_version: str | None,
    warn: Callable[[str], None],
) -> str:
    """Validate each task's text (its documents, their ids, and which task it is).
    Raises SchemaError naming the first failing document and field; returns the
    Kubernetes version checked against. Custom resources have no schema offline:
    they are reported as warnings and not checked."""
    import yaml

    from simpletfjob.yamlload import load_all, manifest_loader

    validator = Validator(kube_version)
    loader = manifest_loader()  # timestamps read as the strings Kubernetes sees
    first: tuple[str, Problem] | None = None
    seen: set[tuple[str, str]] = set()
    more = 0
    number = 0
    warned: set[tuple[str, str]] = set()
    for text, ids, where in tasks:
        try:
            documents = load_all(text, loader)
        except yaml.YAMLError as e:  # the render check parsed it; a constructor may still object
            raise SchemaError(
                f"document {number + 1} ({where}) cannot be read for validation: "
                f"{getattr(e, 'problem', None) or e}"
            ) from e
        for document, doc_id in zip(documents, ids, strict=True):
            number += 1
            label = f"document {number} ({doc_id})"
            if isinstance(document, dict) and not _check_known(
                validator, document, label, warn, warned
            ):
                continue
            try:
                problems = validator.problems(document)
            except RecursionError as e:  # jsonschema descends one call per level
                raise SchemaError(f"{label}: nested too deeply for --validate to check") from e
            for problem in problems:
                if first is None:
                    first = (label, problem)
                elif (problem.path, problem.message) not in seen:
                    more += 1
                seen.add((problem.path, problem.message))
    if first is not None:
        label, problem = first
        extra = f" (and {more} more problem{'s' if more != 1 else ''})" if more else ""
        raise SchemaError(
            f"{label}: {problem}{extra} [Kubernetes {validator.short_version} schema]"
        )
    return validator.short_version


def _check_known(
    validator: Validator,
    document: dict[str, Any],
    label: str,
    warn: Callable[[str], None],
    warned: set[tuple[str, str]],
) -> bool:
    """Whether there is a schema for the document; a custom resource gets a warning instead."""
    kind, api_version = document.get("kind"), document.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return True  # problems() reports the missing field
    if validator.validator(kind, api_version) is not None:
        return True
    if validator.is_custom(api_version):
        if (kind, api_version) not in warned:
            warned.add((kind, api_version))
            warn(f"{label}: {kind} {api_version} is a custom resource; --validate cannot check it")
        return False
    raise SchemaError(
        f"{label}: Kubernetes {validator.short_version} has no kind {kind!r} in "
        f"apiVersion {api_version!r}"
    )
