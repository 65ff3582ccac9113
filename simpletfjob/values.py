"""Template values: --set KEY=VALUE and -f FILE, merged as helm merges them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from simpletfjob.errors import InputError, UsageError

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")


def parse_set(item: str) -> dict[str, Any]:
    """'a.b=1' -> {'a': {'b': 1}}. As with helm --set: true/false, null and integers are typed."""
    key, sep, raw = item.partition("=")
    if not sep:
        raise UsageError(f"--set {item!r}: expected KEY=VALUE")
    parts = key.strip().split(".")
    for part in parts:
        if not _KEY.fullmatch(part):
            raise UsageError(
                f"--set {item!r}: {key.strip()!r} is not a variable name "
                "(letters, digits and '_', dotted for nesting)"
            )
    value: Any = _typed(raw)
    for part in reversed(parts):
        value = {part: value}
    return value  # type: ignore[no-any-return]


def _typed(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    if raw == "null":
        return None
    if _INT.fullmatch(raw):
        return int(raw)
    return raw


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key, anything else in `override` replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_values_file(path: str) -> dict[str, Any]:
    """A -f values file: a YAML mapping whose top-level keys are variable names."""
    import yaml

    from simpletfjob import yamlinput
    from simpletfjob.nodes import read_text

    text = read_text(path, "values file")
    try:
        data = yamlinput.load(text)
    except yaml.YAMLError as e:
        raise InputError(yamlinput.describe(e, path)) from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(
            f"values file {path!r} must be a YAML mapping, not a {type(data).__name__}"
        )
    for key in data:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InputError(f"values file {path!r}: {key!r} is not a variable name")
    return data


def check_reserved(values: Mapping[str, Any], reserved: tuple[str, ...]) -> None:
    clash = sorted(set(values) & set(reserved))
    if clash:
        raise UsageError(
            f"{clash[0]!r} is set by simpletfjob for each task and cannot be given as a value"
        )


def collect_values(
    defaults: Mapping[str, Any], files: Sequence[str], sets: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Values as helm layers them: defaults < each -f FILE in order < each --set in order."""
    values = dict(defaults)
    for path in files:
        values = merge(values, load_values_file(path))
    for item in sets:
        values = merge(values, item)
    return values
