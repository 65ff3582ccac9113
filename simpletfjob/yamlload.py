"""Reading YAML input: one loader for every file, and a bound on how far aliases may expand it.

An alias (`*a`) repeats the node that its anchor (`&a`) names. PyYAML composes
every alias of an anchor as the same node object, so parsing stays cheap even
when the aliases expand a document a billion times over ("billion laughs"),
but anything that then walks the result (jinja printing a value, the
toleration scan, jsonschema under --validate, the kubernetes client) would
take the expansion's time and memory. Kubernetes' own YAML decoder (go-yaml)
refuses such a document with "document contains excessive aliasing";
simpletfjob applies the same rule to every YAML input, before any Python
object is built. It counts on the composed node graph, memoising each node's
expanded size by identity, so the count takes time linear in the text:

- a document's expanded size counts every node that each alias repeats; the
  nodes that aliases add are the expanded size less the nodes written;
- a document is refused when aliases add more than 100 nodes, it expands to
  more than 1000, and the share added by aliases is over 99% up to 400,000
  nodes, falling linearly to 10% at 4,000,000 and beyond (go-yaml's numbers);
- an anchor that holds an alias of itself would expand without end: refused.

The parse itself is libyaml's (PyYAML's C loader) where PyYAML was built with it.

Reading an input file, and describing a value it holds for a message, are here too:
kube/ reads kubeconfigs with them and may import no other module of simpletfjob.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from typing import Any

import yaml

from simpletfjob.errors import InputError, number_problem

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
    """PyYAML's safe loader, libyaml's when PyYAML was built with it (about 10x faster)."""
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def manifest_loader() -> type[Any]:
    """The safe loader, reading a document as Kubernetes reads it: timestamps stay strings."""
    base = loader_class()

    class ManifestLoader(base):  # type: ignore[valid-type, misc]
        pass

    def as_string(loader: Any, node: Any) -> str:
        return str(node.value)

    ManifestLoader.add_constructor("tag:yaml.org,2002:timestamp", as_string)
    # A plain `=` resolves to YAML's obscure `value` tag, which the safe loader rejects.
    ManifestLoader.add_constructor("tag:yaml.org,2002:value", as_string)
    return ManifestLoader


def may_alias(text: str) -> bool:
    """Whether the text may hold an alias; False proves it has none.

    A text with no `*` where a node can start has nothing to count: the common
    case, which then costs a scan for '*' (a render checks a thousand texts).
    """
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
            f"to {_count(total)} (the largest anchor they repeat starts on this line), past the "
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


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**12 else f"about 10^{len(str(n)) - 1}"


def load(text: str, loader: type[Any] | None = None) -> Any:
    """The one document of a YAML text (None if it is empty), its aliases checked first.

    Raises yaml.YAMLError, LimitError included; `describe` makes it one line.
    """
    return load_node(text, loader)[1]


def load_node(text: str, loader: type[Any] | None = None, unique: bool = False) -> tuple[Any, Any]:
    """The composed node and the value of the one document of a YAML text ((None, None) if empty).

    With `unique`, a key given twice in one mapping is an error, as helm reads values
    (PyYAML would keep the last silently).
    """
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


def describe(
    error: yaml.YAMLError, source: str, what: str = "not valid YAML", line_offset: int = 0
) -> str:
    """One line for a YAML error: 'SOURCE:LINE: WHAT: PROBLEM' (WHAT is left out for a limit).

    `line_offset` is added to the line, for YAML read from the middle of a file.
    """
    mark, problem = mark_and_problem(error)
    where = f"{source}:{line_offset + mark.line + 1}" if mark is not None else source
    if isinstance(error, DuplicateKey):
        problem += f" (first on line {line_offset + error.first_line + 1})"
    if isinstance(error, LimitError):
        return f"{where}: {problem}"
    return f"{where}: {what}: {problem}"


# -- reading input files, and their values in messages -------------------------------------


# How much of an input file is read: a limit far above any real input, so that a device
# such as /dev/zero, a pipe that never ends (`<(yes)`) or a huge file named by mistake is
# refused at once instead of filling the memory. A saved NodeList of 10,000 nodes with
# their images is about 200 MB; a template, values file, host list or kubeconfig is at
# most a few megabytes (Kubernetes stores no object over 1.5 MiB).
INPUT_LIMIT = 16 << 20
NODE_LIST_LIMIT = 1 << 30
_CHUNK = 1 << 20


def _check_pipe_unread(path: str, what: str, pipes_read: dict[tuple[int, int], str]) -> None:
    """A pipe is read once: a second input naming it (/dev/stdin twice) would read nothing.

    Checked with stat before opening, which never waits for a named pipe's writer.
    """
    try:
        status = os.stat(path)
    except OSError:
        return  # the open says what is wrong
    if not (stat.S_ISFIFO(status.st_mode) or stat.S_ISSOCK(status.st_mode)):
        return
    key = (status.st_dev, status.st_ino)
    earlier = pipes_read.get(key)
    if earlier is not None:
        raise InputError(
            f"{what} {path!r} is the pipe that the {earlier} was read from already; "
            "a pipe can be read only once, so give each input its own file or pipe"
        )
    pipes_read[key] = f"{what} {path!r}"


def read_bytes(path: str, what: str, limit: int = INPUT_LIMIT) -> bytes:
    """Read a whole input file, naming it in every failure.

    A file larger than `limit` bytes, or with a NUL byte (binary, or a device
    such as /dev/zero), is refused; a stream (a pipe, a FIFO, a device) is read
    in chunks, so that is seen after at most `limit` bytes, or at the first NUL.
    A stream path whose descriptor was closed when simpletfjob started (/dev/stdin
    after `<&-`) is refused rather than read as the /dev/null that stands in for it.
    """
    from simpletfjob import streams

    fd = streams.stream_fd(path)
    if fd is not None and fd in streams.closed_at_start:
        raise InputError(
            f"cannot read {what} {path!r}: {streams.stream_name(fd)} is closed "
            f"({os.strerror(errno.EBADF)})"
        )
    _check_pipe_unread(path, what, streams.pipes_read)
    try:
        with open(path, "rb") as f:
            status = os.fstat(f.fileno())
            if stat.S_ISREG(status.st_mode):
                if status.st_size > limit:
                    raise _too_large(path, what, limit)
                data = f.read()
            else:
                data = _read_stream(f, path, what, limit)
    except FileNotFoundError:
        raise InputError(f"{what} {path!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path!r} is a directory, not a file") from None
    except OSError as e:
        raise InputError(f"cannot read {what} {path!r}: {e.strerror or e}") from e
    if len(data) > limit:  # a regular file that grew while it was read
        raise _too_large(path, what, limit)
    nul = data.find(b"\0")
    if nul >= 0:
        raise _binary(path, what, nul)
    return data


def _read_stream(f: Any, path: str, what: str, limit: int) -> bytes:
    chunks = []
    size = 0
    while size <= limit:
        chunk = f.read1(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        nul = chunk.find(b"\0")
        if nul >= 0:
            raise _binary(path, what, size + nul)
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise _too_large(path, what, limit)
    return b"".join(chunks)


def _too_large(path: str, what: str, limit: int) -> InputError:
    size = f"{limit >> 30} GiB" if limit >= 1 << 30 else f"{limit >> 20} MiB"
    return InputError(
        f"{what} {path!r} is larger than {size}, the limit for it; see Limits in the README"
    )


def _binary(path: str, what: str, at: int) -> InputError:
    return InputError(f"{what} {path!r} is not UTF-8 text (byte {at} is NUL: a binary file?)")


def read_text(path: str, what: str) -> str:
    """Read a UTF-8 input file, turning every failure into one line that names it."""
    return decode_text(read_bytes(path, what), path, what)


def decode_text(data: bytes, path: str, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{what} {path!r} is not UTF-8 text (byte {e.start} cannot be decoded)"
        ) from e


def describe_value(value: object) -> str:
    """'a list', 'a string \'x\'', 'an integer 4'... for messages about a value of the wrong type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
