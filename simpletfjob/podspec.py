"""What a template's pods ask of a node: the tolerations in its pod specs.

Read from the YAML node trees of one render (see `documents.compose_documents`),
so no Python objects are built for the rest of the document.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

# Toleration fields that take part in matching a taint (tolerationSeconds does not).
_MATCHED_FIELDS = ("key", "operator", "value", "effect")


def pod_tolerations(documents: Sequence[Any]) -> tuple[dict[str, str], ...]:
    """Every toleration of every pod spec (a mapping with `containers`) in the documents, once each."""
    found: list[dict[str, str]] = []
    for document in documents:
        for spec in _pod_specs(document):
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


def _pod_specs(document: Any) -> Iterator[dict[str, Any]]:
    """Pod specs anywhere in the tree: Job, Pod, Deployment, CronJob, TFJob replica specs...

    Each node is visited once, in document order, however many aliases repeat it and
    however deep it is nested.
    """
    seen: set[int] = set()
    stack = [document]
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
    if type(node).__name__ != "MappingNode":
        return {}
    return {
        k.value: v.value
        for k, v in node.value
        if type(k).__name__ == "ScalarNode" and type(v).__name__ == "ScalarNode"
    }
