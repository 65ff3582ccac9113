"""Reading YAML input: one loader for every file, and a bound on how far aliases may expand it.

PyYAML composes every alias of an anchor as the same node, so parsing a "billion laughs"
document is cheap, but whatever walks the result (jinja, --validate, the kubernetes client)
would pay the expansion. go-yaml, Kubernetes' decoder, refuses it ("document contains
excessive aliasing"); simpletfjob applies the same rule to every YAML input before any
Python object is built, counting on the composed node graph in time linear in the text:

- a document's expanded size counts every node that each alias repeats; the
  nodes that aliases add are the expanded size less the nodes written;
- a document is refused when aliases add more than 100 nodes, it expands to
  more than 1000, and the share added by aliases is over 99% up to 400,000
  nodes, falling linearly to 10% at 4,000,000 and beyond (go-yaml's numbers);
- an anchor that holds an alias of itself would expand without end: refused.

The parse is libyaml's where PyYAML was built with it. Reading the file is inputs.py's.
"""

from __future__ import annotations

from typing import Any

import yaml

from simpletfjob.errors import number_problem

# go-yaml's bounds (decode.go, alias_ratio_range_low/high and allowedAliasRatio).
_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000

# What may stand before an alias token, past blanks: the start of a line, a flow
# indicator, or the ':', '?' or '-' of a block entry.
_BEFORE_ALIAS = frozenset("\n\r[{,:?-")

_COLLECTIONS = (yaml.MappingNode, yaml.SequenceNode)


class LimitError(yaml.MarkedYAMLError):
    """Valid YAML that simpletfjob will not expand: excessive or recursive aliasing."""


def loader_class() -> type[Any]:
    """PyYAML's safe loader, libyaml's when PyYAML was built with it."""
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def manifest_loader() -> type[Any]:
    """The safe loader, reading a document as Kubernetes reads it: timestamps stay strings."""
    base = loader_class()

    ManifestLoader: type[Any] = type("ManifestLoader", (base,), {})

    def as_string(loader: Any, node: Any) -> str:
        return str(node.value)

    ManifestLoader.add_constructor("tag:yaml.org,2002:timestamp", as_string)
    # A plain `=` resolves to YAML's obscure `value` tag, which the safe loader rejects.
    ManifestLoader.add_constructor("tag:yaml.org,2002:value", as_string)
    return ManifestLoader


def may_alias(text: str) -> bool:
    """Whether the text may hold an alias; False proves it has none.
    A text with no `*` where a node can start has nothing to count."""
    at = text.find("*")
    while at >= 0:
        before = at - 1
        while before >= 0 and text[before] in " \t":
            before -= 1
        if before < 0 or text[before] in _BEFORE_ALIAS:
            return True
        at = text.find("*", at + 1)
    return False


def check_aliases(document: Any) -> None:
    """Refuse a composed document whose aliases expand it too far, or without end."""
    if not isinstance(document, _COLLECTIONS):
        return
    sizes: dict[int, int] = {}  # collection node id -> its expanded size, once counted
    repeated: dict[int, Any] = {}  # collections reached more than once: anchors with aliases
    open_nodes: set[int] = set()  # collections whose children are still being counted
    written = 0
    # (node, None) is a node to visit; (node, children) one whose children are all counted.
    stack: list[tuple[Any, list[Any] | None]] = [(document, None)]
    while stack:
        node, children = stack.pop()
        key = id(node)
        if children is not None:
            open_nodes.discard(key)
            total = scalars = 1
            for child in children:
                if isinstance(child, _COLLECTIONS):
                    total += sizes[id(child)]
                else:
                    total += 1
                    scalars += 1
            sizes[key] = total
            written += scalars
            continue
        if key in sizes:
            repeated[key] = node
            continue
        children = _children(node)
        open_nodes.add(key)
        stack.append((node, children))
        for child in children:
            if isinstance(child, _COLLECTIONS):
                if id(child) in open_nodes:
                    raise LimitError(
                        problem="recursive alias: the anchor here holds an alias of itself, "
                        "so it would expand without end",
                        problem_mark=child.start_mark,
                    )
                stack.append((child, None))
    total = sizes[id(document)]
    if _excessive(total, total - written):
        culprit = max(repeated.values(), key=lambda n: sizes[id(n)], default=document)
        raise LimitError(
            problem=f"excessive aliasing: aliases expand the document from {written:,} nodes "
            f"to {_many(total)} (the largest anchor they repeat starts on this line), past the "
            "limit Kubernetes also applies; see Limits in the README",
            problem_mark=culprit.start_mark,
        )


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _excessive(total: int, from_aliases: int) -> bool:
    """go-yaml's rule: the share of nodes that aliases may add shrinks as documents grow."""
    if from_aliases <= 100 or total <= 1000:
        return False
    if total <= _ALIAS_RATIO_LOW:
        allowed = 0.99
    elif total >= _ALIAS_RATIO_HIGH:
        allowed = 0.10
    else:
        span = _ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW
        allowed = 0.99 - 0.89 * (total - _ALIAS_RATIO_LOW) / span
    return from_aliases / total > allowed


def _many(n: int) -> str:
    return f"{n:,}" if n < 10**12 else f"about 10^{len(str(n)) - 1}"


def load(text: str, loader: type[Any] | None = None) -> Any:
    """The one document of a YAML text (None if it is empty), its aliases checked first.
    Raises yaml.YAMLError, LimitError included; `describe_error` makes it one line."""
    return load_node(text, loader)[1]


def load_node(text: str, loader: type[Any] | None = None, unique: bool = False) -> tuple[Any, Any]:
    """The composed node and the value of the one document of a YAML text ((None, None) if empty).
    With `unique`, a key given twice in one mapping is an error, as helm reads values
    (PyYAML would keep the last silently)."""
    instance = (loader or loader_class())(text)
    try:
        node = instance.get_single_node()
        if node is None:
            return None, None
        if unique:
            check_unique_keys(node)
        return node, _construct(instance, node, may_alias(text))
    except RecursionError as e:  # the pure-Python composer, on a deeply nested text
        raise LimitError(problem="nested too deeply") from e
    finally:
        instance.dispose()


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping has a key twice; `first_line` (from 0) is where it was first given."""

    def __init__(self, key: str, mark: Any, first_line: int) -> None:
        super().__init__(problem=f"mapping key {key!r} is given twice", problem_mark=mark)
        self.first_line = first_line


def check_unique_keys(node: Any) -> None:
    """No mapping under `node` has a scalar key twice (merge keys aside); each mapping once."""
    pending, seen = [node], set()
    while pending:
        current = pending.pop()
        if id(current) in seen or isinstance(current, yaml.ScalarNode):
            continue
        seen.add(id(current))
        if isinstance(current, yaml.SequenceNode):
            pending.extend(current.value)
            continue
        first: dict[tuple[str, str], Any] = {}
        for key, value in current.value:
            pending += [key, value]
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            earlier = first.setdefault((key.tag, key.value), key)
            if earlier is not key:
                raise DuplicateKey(key.value, key.start_mark, earlier.start_mark.line)


def load_all(text: str, loader: type[Any] | None = None) -> list[Any]:
    """Every document of a YAML stream, each one's aliases checked before it is built."""
    instance = (loader or loader_class())(text)
    aliased = may_alias(text)
    try:
        documents = []
        while instance.check_node():
            documents.append(_construct(instance, instance.get_node(), aliased))
        return documents
    except RecursionError as e:
        raise LimitError(problem="nested too deeply") from e
    finally:
        instance.dispose()


def _construct(instance: Any, node: Any, aliased: bool) -> Any:
    if aliased:
        check_aliases(node)
    try:
        return instance.construct_document(node)
    except (ValueError, OverflowError) as e:  # a constructor's own check: a timestamp's month 13
        problem = number_problem(e) or f"cannot read a value: {e}"
        raise yaml.constructor.ConstructorError(
            problem=problem, problem_mark=_failing_scalar(instance, node).start_mark
        ) from e


def _failing_scalar(instance: Any, node: Any) -> Any:
    """The first scalar under `node` that its constructor refuses (for the line); else `node`."""
    pending, seen = [node], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:  # an alias: its anchor was looked at already
            continue
        seen.add(id(current))
        if isinstance(current, yaml.ScalarNode):
            try:
                instance.construct_object(current)
            except (ValueError, OverflowError, yaml.YAMLError):
                return current
        elif isinstance(current, yaml.SequenceNode):
            pending.extend(reversed(current.value))
        elif isinstance(current, yaml.MappingNode):
            pending.extend(item for pair in reversed(current.value) for item in reversed(pair))
    return node


def mark_and_problem(error: yaml.YAMLError) -> tuple[Any, str]:
    """Where a YAML error is (a mark with .line and .column from 0, or None), and what it is."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or (str(error).strip().splitlines() or ["?"])[0]
    return mark, str(problem)


def describe_error(
    error: yaml.YAMLError, source: str, what: str = "not valid YAML", line_offset: int = 0
) -> str:
    """One line for a YAML error: 'SOURCE:LINE: WHAT: PROBLEM' (WHAT is left out for a limit).
    `line_offset` is added to the line, for YAML read from the middle of a file."""
    mark, problem = mark_and_problem(error)
    where = f"{source}:{line_offset + mark.line + 1}" if mark is not None else source
    if isinstance(error, DuplicateKey):
        problem += f" (first on line {line_offset + error.first_line + 1})"
    if isinstance(error, LimitError):
        return f"{where}: {problem}"
    return f"{where}: {what}: {problem}"
