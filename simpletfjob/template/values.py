"""Template values: --set KEY=VALUE and -f FILE, merged as helm merges them.

A --set value that the template never reads is a usage error (exit 2) that offers the
closest value it does read (`did you mean 'gpus'?`); a -f file's key or a header's default
may go unread, as one values file often serves several templates. What the template reads
is found in its tree (compiled.py's `reads`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from simpletfjob.errors import InputError, UsageError
from simpletfjob.frameworks import reserved_variables
from simpletfjob.inputs import read_text
from simpletfjob.template.markers import RESERVED_CHARACTERS

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = r"[-+]?(0|[1-9][0-9]*)"  # compiled on first use: only --set reads it
# A reserved character as it may stand in YAML text: itself, or a double-quoted escape.
# Compiled on first use: a run with no values files does not need it.
_RESERVED_IN_YAML = "|".join(
    pattern
    for char in RESERVED_CHARACTERS
    for pattern in (re.escape(char), rf"\\u{ord(char):04x}", rf"\\U{ord(char):08x}")
)


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
    if parts[0] in reserved_variables():
        raise UsageError(f"--set {item!r}: {_reserved_name(parts[0])}")
    for char in RESERVED_CHARACTERS:
        if char in raw:
            raise UsageError(f"--set {item!r}: the value contains {_reserved_character(char)}")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as e:  # bytes in argv that are not UTF-8 (surrogate escapes)
        raise UsageError(
            f"--set {item!r}: the value is not UTF-8 text (character {e.start + 1})"
        ) from None
    value: Any = _typed(raw)
    for part in reversed(parts):
        value = {part: value}
    return value  # type: ignore[no-any-return]


def _typed(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    if raw == "null":
        return None
    # An integer as helm reads one: a 64-bit one; a longer run of digits stays a string.
    if len(raw) <= 20 and re.fullmatch(_INT, raw) and -(2**63) <= int(raw) < 2**63:
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

    from simpletfjob import yamlload

    text = read_text(path, "values file")
    try:
        node, data = yamlload.load_node(text, unique=True)
    except yaml.YAMLError as e:
        raise InputError(yamlload.describe_error(e, path)) from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(
            f"values file {path!r} must be a YAML mapping, not a {type(data).__name__}"
        )
    lines = {k.value: k.start_mark.line + 1 for k, _ in node.value}
    for key in data:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InputError(f"values file {path!r}: {key!r} is not a variable name")
        if key in reserved_variables():
            raise UsageError(f"{path}:{lines.get(key, 1)}: {_reserved_name(key)}")
    check_reserved_characters(text, node, path)
    return data


def _reserved_name(key: str) -> str:
    return f"{key!r} is set by simpletfjob for each task and cannot be given as a value"


def _reserved_character(char: str) -> str:
    return f"U+{ord(char):04X}, a character simpletfjob reserves for its own markers"


def check_reserved_characters(text: str, document: Any, source: str, line_offset: int = 0) -> None:
    """Refuse YAML values holding a character the render reserves, naming the first one's key.
    `document` is the text's composed node; it is walked only when the text may hold one."""
    if not re.search(_RESERVED_IN_YAML, text, re.IGNORECASE):
        return
    import yaml

    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        node, where = stack.pop()
        if id(node) in seen:  # an alias: its node was looked at already
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            for char in RESERVED_CHARACTERS:
                if char in node.value:
                    line = line_offset + node.start_mark.line + 1
                    raise InputError(
                        f"{source}:{line}: {where or 'the value'}: contains {_reserved_character(char)}"
                    )
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, f"{where}[{i}]") for i, item in reversed(list(enumerate(node.value)))]
        elif isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
                name = f"{where}.{name}" if where else name
                stack += [(value, name), (key, f"{name} (its key)")]


def check_reserved(values: Mapping[str, Any], reserved: tuple[str, ...]) -> None:
    clash = sorted(set(values) & set(reserved))
    if clash:
        raise UsageError(_reserved_name(clash[0]))


def collect_values(
    defaults: Mapping[str, Any], files: Sequence[str], sets: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Values as helm layers them: defaults < each -f FILE in order < each --set in order.
    Also the top-level names that the files and --set gave, as opposed to the defaults."""
    values = dict(defaults)
    given: set[str] = set()
    for layer in [*(load_values_file(path) for path in files), *sets]:
        values = merge(values, layer)
        given.update(layer)
    return values, frozenset(given)


def check_sets_read(
    items: Iterable[str],
    reads: Callable[[Sequence[str]], bool],
    names: Collection[str],
    paths: Callable[[], Collection[tuple[str, ...]]],
    reserved: Collection[str],
    options: Collection[str] = (),
) -> None:
    """Refuse the first --set KEY=VALUE whose KEY the template never reads (see the module doc).
    `reads(path)` says whether the template may read a value; `names`, `paths()` and the
    command line's long flags `options` make the suggestion (never a `reserved` name)."""
    top = sorted(set(names) - set(reserved))
    for item in items:
        key = item.partition("=")[0].strip()
        path = key.split(".")
        if reads(path):
            continue
        # The first part of the path the template does not read: the whole key, or a
        # name inside a value it reads only by names it spells (`a.b`, `a['c']`).
        depth = next(d for d in range(1, len(path) + 1) if not reads(path[:d]))
        near = top
        if depth > 1:
            parent = tuple(path[: depth - 1])
            near = sorted(
                {
                    ".".join(p[:depth])
                    for p in paths()
                    if len(p) >= depth and p[: depth - 1] == parent
                }
            )
        unread = ".".join(path[:depth])
        message = f"--set {item}: the template reads no value {unread!r}"
        close = _closest(path[depth - 1], near)
        if close:
            raise UsageError(f"{message}; did you mean {close!r}?")
        flag = f"--{path[0].replace('_', '-')}"
        if len(path) == 1 and flag in options:  # --set psn=2
            raise UsageError(f"{message}; did you mean the option {flag}?")
        if not near:
            raise UsageError(f"{message}; it reads no value that --set can give")
        shown = ", ".join(near[:8]) + (f" and {len(near) - 8} more" if len(near) > 8 else "")
        raise UsageError(f"{message}; it reads: {shown}")


def _closest(word: str, names: Sequence[str]) -> str | None:
    """The name most like `word` by its last part: as difflib (click) finds it, else one
    that holds it as a `_` part (`gpus` -> `worker_gpus`)."""
    import difflib

    by_leaf = {name.rsplit(".", 1)[-1]: name for name in names}
    close = difflib.get_close_matches(word, list(by_leaf), n=1, cutoff=0.6)
    if close:
        return by_leaf[close[0]]
    parts = set(word.split("_"))
    holding = [leaf for leaf in by_leaf if parts & set(leaf.split("_")) and leaf != word]
    return by_leaf[holding[0]] if len(holding) == 1 else None
