"""Output: checking the rendered documents, joining them, and writing them atomically.

Every document is checked before the first byte is written. The check parses
each task's document with every bare TF_CONFIG standing as a short marker; the
real TF_CONFIG is written by construction in the same place, escaped for the
scalar the marker stood in, so megabytes of cluster JSON are never parsed.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import operator
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from simpletfjob import streams
from simpletfjob.errors import Interrupted, OutputError, RenderCheckError, UsageError
from simpletfjob.streams import STREAM_NAMES, stream_fd, stream_name

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LEADING_SEPARATOR = re.compile(r"\A(?:[ \t]*(?:#[^\n]*)?\n)*---[ \t]*(?:#[^\n]*)?\n")
_TRAILING_SEPARATOR = re.compile(r"\n---[ \t]*\n?\Z")


class DocumentId(NamedTuple):
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}"


def normalize_task_text(text: str) -> str:
    """One task's text, without a leading or trailing '---', ending in a newline."""
    text = _LEADING_SEPARATOR.sub("", text, count=1)
    text = _TRAILING_SEPARATOR.sub("\n", text)
    return text if text.endswith("\n") else text + "\n"


def compose_documents(text: str, first_number: int, where: str, source: str = "") -> list[Any]:
    """Parse one task's text (one or more documents) into YAML node trees.

    Composing (libyaml's C parser, no Python objects built for the values) is
    enough to prove the text is YAML and to read kinds, names and TF_CONFIG,
    at about half the cost of loading. Aliases are bounded as for every YAML
    input (see `yamlinput`); `source` is the template, for that message.
    """
    import yaml

    from simpletfjob.yamlinput import LimitError, check_aliases, may_alias

    documents: list[Any] = []
    aliased = may_alias(text)
    try:
        for document in yaml.compose_all(text, Loader=_check_loader()):
            if aliased:
                check_aliases(document)
            documents.append(document)
    except LimitError as e:
        line = f", line {e.problem_mark.line + 1} of the rendered text" if e.problem_mark else ""
        raise RenderCheckError(
            f"{source + ': ' if source else ''}document {first_number + len(documents)} "
            f"({where}){line}: {e.problem}"
        ) from e
    except yaml.YAMLError as e:
        number = first_number + len(documents)
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if mark is None:
            raise RenderCheckError(
                f"document {number} ({where}) is not valid YAML: {problem}"
            ) from e
        lines = text.split("\n")
        shown = lines[mark.line].strip() if mark.line < len(lines) else ""
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise RenderCheckError(
            f"document {number} ({where}) is not valid YAML at line {mark.line + 1}, "
            f"column {mark.column + 1}: {problem}: {shown!r}"
        ) from e
    return documents


class NodeEvent(NamedTuple):
    """A node as the parser met it: its anchor, where it starts and ends, and if it is an alias."""

    anchor: str | None
    start: int
    end: int
    alias: bool


def node_events(text: str) -> list[NodeEvent]:
    """Every node of the text in document order, each alias where it is written.

    The composed tree has one node for an anchor and all its aliases; these
    events tell the places apart (composing visits them in the same order).
    """
    import yaml

    events = []
    for event in yaml.parse(text, Loader=_check_loader()):
        if isinstance(event, yaml.NodeEvent):  # scalars, collection starts and aliases
            alias = isinstance(event, yaml.AliasEvent)
            start, end = event.start_mark, event.end_mark
            events.append(NodeEvent(event.anchor, start.index, end.index, alias))  # type: ignore[union-attr]
    return events


_STR = "tag:yaml.org,2002:str"
_CHECK_LOADER: Any = None


def _check_loader() -> Any:
    """libyaml's parser with tag resolution left to `scalar_string`.

    Resolving every scalar's implicit tag in Python costs more than parsing; the
    check needs the tags of only a few scalars (kind, name, namespace).
    """
    global _CHECK_LOADER
    if _CHECK_LOADER is None:
        import yaml

        try:
            from yaml._yaml import CParser as parser
        except ImportError:  # PyYAML built without libyaml: slower, same result
            from yaml.loader import Loader as parser  # type: ignore[assignment]

        class CheckLoader(parser, yaml.resolver.BaseResolver):
            # The composer calls these three for every node. No check reads a node's tag
            # (see scalar_string), so they are C callables taking the same arguments:
            # Python methods here cost about a tenth of a 1000-task render. The tags
            # come out as slice objects, never read.
            resolve = slice
            descend_resolver = slice  # type: ignore[assignment]
            ascend_resolver = tuple  # type: ignore[assignment]

        _CHECK_LOADER = CheckLoader
    return _CHECK_LOADER


@functools.lru_cache(maxsize=1)
def _resolver() -> Any:
    import yaml

    return yaml.resolver.Resolver()


def _plain_tag(value: str) -> str:
    """The tag YAML gives an unquoted scalar: str, int, bool, null..."""
    import yaml

    return str(_resolver().resolve(yaml.ScalarNode, value, (True, False)))


_NULL = "tag:yaml.org,2002:null"
_NODE_KINDS = {"MappingNode": "mapping", "SequenceNode": "list", "ScalarNode": "scalar"}


def mapping_get(node: Any, key: str) -> Any:
    """The value node under `key` in a mapping node, or None.

    A key the mapping takes through a merge key (`<<: *base`, `<<: [*a, *b]`)
    counts, with YAML's precedence: the mapping's own keys, then each merged
    mapping in turn.
    """
    if type(node).__name__ != "MappingNode":
        return None
    for k, v in node.value:
        if type(k).__name__ == "ScalarNode" and k.value == key:
            return v
    if merge_sources(node):
        for mapping in merged_mappings(node):
            for k, v in mapping.value:
                if k.value == key and type(k).__name__ == "ScalarNode":
                    return v
    return None


def merged_mappings(node: Any) -> Iterator[Any]:
    """A mapping node, then the mappings it merges in, deepest merges after, in precedence order.

    Each mapping comes once, however the merges repeat or loop through anchors.
    """
    seen: set[int] = set()
    stack = [node]
    while stack:
        mapping = stack.pop()
        if id(mapping) in seen:
            continue
        seen.add(id(mapping))
        yield mapping
        stack += reversed(merge_sources(mapping))


def is_merge_key(node: Any) -> bool:
    """`<<` written plain: YAML's merge key (a quoted '<<' is an ordinary key)."""
    return node.value == "<<" and not node.style and type(node).__name__ == "ScalarNode"


def merge_sources(node: Any) -> list[Any]:
    """The mappings a mapping node merges in, in precedence order."""
    sources = []
    for k, v in node.value:
        if is_merge_key(k):
            items = v.value if type(v).__name__ == "SequenceNode" else [v]
            sources += [m for m in items if type(m).__name__ == "MappingNode"]
    return sources


def scalar_string(node: Any) -> str | None:
    """The value of a scalar node that YAML reads as a string (not 123, true or null)."""
    if node is None or type(node).__name__ != "ScalarNode":
        return None
    if not node.style and _plain_tag(node.value) != _STR:
        return None
    return str(node.value)


def identify(document: Any, number: int, where: str) -> DocumentId:
    """The kind, namespace and name of a composed document, checking that kubectl can apply it."""
    node_kind = type(document).__name__
    if node_kind == "ScalarNode" and not document.style and _plain_tag(document.value) == _NULL:
        raise RenderCheckError(f"document {number} ({where}) is empty")
    if node_kind != "MappingNode":
        raise RenderCheckError(
            f"document {number} ({where}) is a YAML {_NODE_KINDS.get(node_kind, node_kind)}, "
            "not a mapping"
        )
    kind_node = mapping_get(document, "kind")
    kind = scalar_string(kind_node)
    if kind is None and type(kind_node).__name__ == "ScalarNode" and kind_node.value:
        raise RenderCheckError(
            f"document {number} ({where}): kind {kind_node.value} is not a string; quote it"
        )
    if not kind:
        raise RenderCheckError(f"document {number} ({where}) has no 'kind'")
    metadata = mapping_get(document, "metadata")
    name_node = mapping_get(metadata, "name")
    name = scalar_string(name_node)
    if name_node is not None and name is None and type(name_node).__name__ == "ScalarNode":
        raise RenderCheckError(
            f"document {number} ({where}, {kind}): metadata.name {name_node.value} is not a string; quote it"
        )
    if not name:
        raise RenderCheckError(f"document {number} ({where}, {kind}) has no metadata.name")
    namespace_node = mapping_get(metadata, "namespace")
    namespace = scalar_string(namespace_node)
    # A null namespace is as good as none; 1 or true is neither a namespace nor none.
    if (
        namespace is None
        and type(namespace_node).__name__ == "ScalarNode"
        and _plain_tag(namespace_node.value) != _NULL
    ):
        raise RenderCheckError(
            f"document {number} ({where}, {kind}): metadata.namespace "
            f"{namespace_node.value} is not a string; quote it"
        )
    check_name(kind, name, number, where)
    return DocumentId(kind, namespace or "", name)


class DuplicateKeyError(RenderCheckError):
    """A mapping has a key twice; `line` (from 0, in the task's text) is the second one."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class DirectiveError(RenderCheckError):
    """A document starts with a %YAML or %TAG directive; `line` (from 0) is where."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def check_directives(text: str, first_number: int, where: str) -> None:
    """Refuse a %YAML or %TAG directive in one task's text.

    kubectl splits a stream at its '---' lines and reads each part on its own,
    where a directive is not followed by its document; and in simpletfjob's
    stream a directive would follow the previous task's document with no '...'
    to end it, which YAML does not allow. A line that starts with '%' is rare
    enough that the parse to look for them costs only those texts.
    """
    if not (text.startswith("%") or "\n%" in text):
        return
    import yaml

    number = first_number - 1
    for event in yaml.parse(text, Loader=_check_loader()):
        if isinstance(event, yaml.DocumentStartEvent):
            number += 1
            if event.version or event.tags:
                directive = "%YAML" if event.version else "%TAG"
                raise DirectiveError(
                    f"document {number} ({where}) starts with a {directive} directive, which "
                    "kubectl cannot read in a stream it splits at '---' lines; remove it",
                    event.start_mark.line if event.start_mark is not None else -1,
                )


def check_keys(documents: Sequence[Any], first_number: int, where: str, aliases: bool) -> bool:
    """Refuse a mapping that has a key twice, anywhere, as kubectl does; True if aliases share one.

    PyYAML keeps the last value; Kubernetes' YAML decoder refuses the document
    ("mapping key already defined"). Keys compare by their text, as there, so
    `a` and `"a"` clash. This walks every mapping of every task, so it is kept
    lean: with `aliases` (the text has a `*`) each node is visited once, which
    keeps the walk linear however the aliases nest, and a mapping or list met
    twice is reported as shared.
    """
    shared = False
    import yaml

    mapping_node, sequence_node = yaml.MappingNode, yaml.SequenceNode
    for offset, document in enumerate(documents):
        seen: set[int] = set()
        stack = [document]
        pop, push = stack.pop, stack.extend
        while stack:
            node = pop()
            kind = type(node)
            if kind is not mapping_node and kind is not sequence_node:
                continue
            if aliases:
                if id(node) in seen:
                    shared = True
                    continue
                seen.add(id(node))
            value = node.value
            if kind is sequence_node:
                push(value)
                continue
            if len(value) > 1:
                try:
                    unique = len(set(map(_VALUE, map(_KEY, value)))) == len(value)
                except TypeError:  # a key that is a mapping or a list (JSON has no such key)
                    texts = [k.value for k, _ in value if type(k.value) is str]
                    unique = len(set(texts)) == len(texts)
                if not unique:
                    _duplicate(value, first_number + offset, where)
            push(map(_ENTRY_VALUE, value))
    return shared


# C-level accessors: the walk above runs over every mapping of every task.
_KEY, _ENTRY_VALUE, _VALUE = (
    operator.itemgetter(0),
    operator.itemgetter(1),
    operator.attrgetter("value"),
)


def _duplicate(entries: Sequence[tuple[Any, Any]], number: int, where: str) -> None:
    first: dict[str, int] = {}
    for key, _ in entries:
        if type(key.value) is not str:
            continue
        line = key.start_mark.line
        if key.value in first:
            raise DuplicateKeyError(
                f"document {number} ({where}): mapping key {key.value!r} is defined twice, "
                f"at lines {first[key.value] + 1} and {line + 1}; kubectl refuses a duplicate key",
                line,
            )
        first[key.value] = line


def check_name(kind: str, name: str, number: int | None, where: str) -> None:
    """Job and Service names must be DNS-1123 labels of at most 63 characters.

    A Job's name becomes the value of its pods' job-name label, which is limited
    to 63 characters, and a Service's name becomes a DNS label (which, by the
    rule the API server applies to Services, also starts with a letter).
    """
    if kind not in ("Job", "Service"):
        return
    what = f"document {number} ({where})" if number is not None else where
    pattern = _DNS1035_LABEL if kind == "Service" else _DNS1123_LABEL
    rule = "RFC 1035: start with a letter" if kind == "Service" else "RFC 1123"
    if len(name) > 63:
        raise RenderCheckError(
            f"{what}: {kind} name {name!r} is {len(name)} characters; the limit is 63"
        )
    if pattern.fullmatch(name) is None:
        raise RenderCheckError(
            f"{what}: {kind} name {name!r} is not a valid DNS label "
            f"({rule}; lowercase letters, digits and '-')"
        )


def check_unique(ids: Iterable[tuple[int, DocumentId]]) -> None:
    """No two documents may share a kind, namespace and name: the second would replace the first."""
    seen: dict[DocumentId, int] = {}
    for number, doc_id in ids:
        if doc_id in seen:
            raise RenderCheckError(
                f"documents {seen[doc_id]} and {number} are both {doc_id}; "
                "make metadata.name depend on <<type>> and <<index>>"
            )
        seen[doc_id] = number


def join_documents(tasks: Iterable[Iterable[str]]) -> Iterator[str]:
    """The stream: each task's text, separated by '---' lines."""
    for i, chunks in enumerate(tasks):
        if i:
            yield "---\n"
        yield from chunks


def encoded(chunks: Iterable[str]) -> Iterator[bytes]:
    """UTF-8 bytes of each chunk; a large chunk seen before (the shared cluster JSON) is encoded once."""
    cache: dict[str, bytes] = {}
    for chunk in chunks:
        if len(chunk) < 4096:
            yield chunk.encode()
            continue
        data = cache.get(chunk)  # the str's hash is cached and a hit is found by identity
        if data is None:
            if len(cache) > 16:
                cache.clear()
            data = cache[chunk] = chunk.encode()
        yield data


class Destination(NamedTuple):
    """Where the documents go: a file (replaced atomically) or a stream that is already open."""

    shown: str  # in messages and the summary: 'stdout', or the path as given
    path: str | None = None  # a file; a device or a FIFO at this path is written in place
    fd: int | None = None  # an open stream: stdout for '-', or /dev/stderr, /dev/fd/N ...

    @property
    def subject(self) -> str:
        """How a message names it: 'stdout', 'stderr', or "output 'out.yaml'"."""
        if self.fd is not None and (self.fd in STREAM_NAMES or self.shown == "stdout"):
            return stream_name(self.fd)
        return f"output {self.shown!r}"


STDOUT = Destination("stdout", fd=1)


def destination(output: str, directory_hint: str | None = None) -> Destination:
    """Where `-o OUTPUT` writes, checked as far as it can be before anything is rendered.

    '-' is stdout. A path that names an open stream (/dev/stdout, /dev/stderr,
    /dev/fd/N, /proc/self/fd/N) is that stream: the documents are written into it
    where it stands, so a pipe, a terminal or a file opened with `>>` gets them,
    and nothing is truncated or renamed. Any other path is a file, replaced
    atomically. `directory_hint` is the file name suggested when OUTPUT is a directory.
    """
    if output == "-":
        dest = STDOUT
    elif not output:
        raise UsageError("-o needs a file name, or '-' for stdout")
    else:
        fd = stream_fd(output)
        dest = Destination(output, fd=fd) if fd is not None else Destination(output, path=output)
    if dest.fd is not None:
        _check_stream(dest.fd)
    else:
        assert dest.path is not None
        _check_file_target(dest.path, directory_hint)
    return dest


def _check_stream(fd: int) -> None:
    if fd in streams.closed_at_start:
        # /dev/null stands in for it (see streams.guard_standard_streams); writing
        # there would lose the documents without a word.
        raise OutputError(f"cannot write to {stream_name(fd)}: {os.strerror(errno.EBADF)}")
    try:
        os.fstat(fd)
    except OSError as e:
        raise OutputError(f"cannot write to {stream_name(fd)}: {e.strerror or e}") from e
    except OverflowError as e:  # /dev/fd/99999999999: no descriptor has that number
        raise OutputError(f"cannot write to {stream_name(fd)}: {os.strerror(errno.EBADF)}") from e


def _check_file_target(shown: str, directory_hint: str | None = None) -> None:
    """The path can name a new or replaced file: not a directory, in a directory that exists."""
    path = _target(shown)
    if os.path.isdir(path):
        hint = ""
        if directory_hint:
            hint = f"; give a file name, such as {os.path.join(shown, directory_hint)!r}"
        raise OutputError(f"output {shown!r} is a directory{hint}")
    directory = os.path.dirname(path) or "."
    try:
        status = os.stat(directory)
    except OSError as e:
        problem = _missing_directory(directory, e)
        raise OutputError(f"cannot write {shown!r}: {problem}") from e
    if not stat.S_ISDIR(status.st_mode):
        raise OutputError(f"cannot write {shown!r}: {directory!r} is not a directory")
    for fd in (1, 2):
        if fd not in streams.closed_at_start and _is_regular_file(path, _identity_of_fd(fd)):
            name = stream_name(fd)
            raise OutputError(
                f"output {shown!r} is the file {name} is redirected to; "
                f"write -o - to send the documents there, or choose another -o"
                if fd == 1
                else f"output {shown!r} is the file {name} is redirected to, where messages go; "
                "choose another -o"
            )


def _target(shown: str) -> str:
    """The file that gets replaced: through a symlink, the file it points to, not the link."""
    if not os.path.islink(shown):
        return shown
    try:
        return os.path.realpath(shown)
    except OSError as e:  # a part of the link's target that may not be looked into
        raise OutputError(f"cannot write {shown!r}: {e.strerror or e}") from e


def _missing_directory(directory: str, error: OSError) -> str:
    """Why `directory` cannot hold the output: the first part of it that is missing or not a directory."""
    if error.errno not in (errno.ENOENT, errno.ENOTDIR):
        return f"cannot reach directory {directory!r}: {error.strerror or error}"
    parent = directory
    while True:
        up = os.path.dirname(parent)
        if not up or up == parent:
            break
        parent = up
        if os.path.lexists(parent):
            if not os.path.isdir(parent):
                return f"{parent!r} is not a directory"
            break
    return f"directory {directory!r} does not exist"


def _identity_of_fd(fd: int) -> tuple[int, int] | None:
    """(device, inode) of the regular file open on `fd`, or None (a pipe, a terminal, closed)."""
    try:
        status = os.fstat(fd)
    except OSError:
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the regular file at `path`, through symlinks, or None."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


def _is_regular_file(path: str, identity: tuple[int, int] | None) -> bool:
    return identity is not None and _identity(path) == identity


def refuse_inputs(dest: Destination, inputs: Iterable[tuple[str, str | None]]) -> None:
    """The output must not be any file the run reads, compared by file identity.

    Device and inode, after symlinks, so a hard link or a symlink to an input is that
    input. `inputs` are (what, path) pairs, such as ('template', 'mnist.yaml'). Only a
    regular file can be replaced; a pipe or a terminal that is also an input is not.
    """
    if dest.fd is not None:
        mine = _identity_of_fd(dest.fd)
    else:
        assert dest.path is not None
        mine = _identity(dest.path)
    if mine is None:
        return
    for what, path in inputs:
        if path is None or _identity(path) != mine:
            continue
        if dest.fd is not None and dest.subject in ("stdout", "stderr"):
            raise OutputError(
                f"{dest.subject} is redirected to {path!r}, the {what}; "
                "redirect it elsewhere, or choose a file with -o"
            )
        if os.path.abspath(path) == os.path.abspath(dest.shown):
            same = f"the {what}"
        else:
            same = f"the same file as {path!r}, the {what}"
        raise OutputError(f"{dest.subject} is {same}; choose another -o")


def write_to(dest: Destination, chunks: Iterable[str]) -> None:
    """Write every chunk to the destination, all or nothing where it is a file."""
    if dest.fd == 1:
        write_stdout(chunks)
    elif dest.fd is not None:
        write_stream(dest.fd, chunks)
    else:
        assert dest.path is not None
        write_atomic(dest.path, chunks)


def write_stdout(chunks: Iterable[str]) -> None:
    """Write to stdout; any failure (closed, full, a broken pipe) is one OutputError."""
    try:
        out = sys.stdout.buffer
        sys.stdout.flush()
        for data in encoded(chunks):
            out.write(data)
        out.flush()
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            # What is still buffered would fail again at exit: send it nowhere.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise OutputError(f"cannot write to stdout: {e.strerror or e}") from e


def write_stream(fd: int, chunks: Iterable[str]) -> None:
    """Write into an open descriptor where it stands: never truncated, never renamed over."""
    if fd == 2:
        sys.stderr.flush()  # the warnings so far come before the documents
    try:
        with open(fd, "wb", closefd=False) as f:
            for data in encoded(chunks):
                f.write(data)
    except OSError as e:
        raise OutputError(f"cannot write to {stream_name(fd)}: {e.strerror or e}") from e


def write_atomic(path: str, chunks: Iterable[str]) -> None:
    """Write to a temporary file beside `path` and rename it into place: all or nothing."""
    try:
        _write_atomic(path, chunks)
    except OSError as e:
        raise OutputError(f"cannot write {path!r}: {e.strerror or e}") from e


def _write_atomic(shown: str, chunks: Iterable[str]) -> None:
    _check_file_target(shown)
    path = _target(shown)
    directory = os.path.dirname(path) or "."
    try:
        status = os.stat(path)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    else:
        if not stat.S_ISREG(status.st_mode):
            # A device or a FIFO (/dev/null, a named pipe) cannot be renamed over:
            # write to it in place, after every check has passed, as for stdout.
            with open(path, "wb") as f:
                for data in encoded(chunks):
                    f.write(data)
            return
        mode = status.st_mode & 0o7777
    # tempfile would do, but importing it costs the cold start a few milliseconds.
    name = os.path.basename(path)[:200]
    temp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    created = False
    try:
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as e:
            raise OutputError(
                f"cannot write {shown!r}: cannot create a file in directory {directory!r}: "
                f"{e.strerror or e}"
            ) from e
        created = True
        with os.fdopen(fd, "wb") as f:
            for data in encoded(chunks):
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException as e:
        # An interrupt can land between the open and `created = True`: then the
        # file may exist too. A failed open never created one (O_EXCL).
        if created or isinstance(e, (Interrupted, KeyboardInterrupt)):
            with contextlib.suppress(OSError):
                os.unlink(temp)
        raise
