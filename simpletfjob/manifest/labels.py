"""Labels, the run's annotations (and, for pod networking, namespaces) added to rendered documents as text.

The edits are made in the rendered text, beside the template's own lines, so its
formatting, comments and labels stay as they were. Positions come from the YAML
node tree that the check composes anyway. A label the template already sets is
left alone; if its value differs, the template wins and a warning says so.

Anchors, aliases and merge keys make one mapping stand at several places (see
`Labeller`); where the text has none, each mapping stands where it is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, NoReturn

from simpletfjob.errors import RenderCheckError
from simpletfjob.manifest.documents import (
    LineError,
    NodeEvent,
    is_merge_key,
    mapping_get,
    merged_mappings,
    node_events,
)
from simpletfjob.manifest.textedit import KeyValue, Raw, TextEditor, flow_copy, flow_entry


class LabelError(LineError):
    """Labels cannot be added to a document as it is."""


# Where labels go, as paths from a document's root: its metadata and, for a Job, its pod
# template's. A node's roles are the paths it stands at; OTHER is any other place.
OTHER = ("*",)
# Annotations are asked for on the object alone, but may land on its pod template too where
# the template shares one mapping between them: a pod that carries them is harmless.
_JOB_PLACES = {
    "owner": frozenset({(), ("spec", "template")}),
    "metadata": frozenset({("metadata",), ("spec", "template", "metadata")}),
    "labels": frozenset({("metadata", "labels"), ("spec", "template", "metadata", "labels")}),
    "annotations": frozenset(
        {("metadata", "annotations"), ("spec", "template", "metadata", "annotations")}
    ),
}
_PLACES = {
    level: frozenset(p for p in paths if p[:1] != ("spec",)) for level, paths in _JOB_PLACES.items()
}
_PREFIXES = frozenset(
    p[:i] for paths in _JOB_PLACES.values() for p in paths for i in range(len(p) + 1)
)
_LEVEL_ABOVE = {"metadata": "owner", "labels": "metadata", "annotations": "metadata"}
_MAPS = ("labels", "annotations")  # what is merged into metadata, in this order
_PLANNED = object()  # a key that an earlier edit of this task writes


class Site(NamedTuple):
    """One place a node stands: in `parent` under `key`, merged into it, or written as an alias."""

    parent: Any  # a mapping or sequence node; None for a document's root
    key: str | None  # None for a key itself, or an item in a list
    merge: bool  # merged into `parent` by a merge key
    alias: NodeEvent | None  # where the alias is written; None where the node itself is


class Shape:
    """Every place each node of a task's documents stands, through anchors, aliases and merge keys."""

    def __init__(self, documents: Sequence[Any], events: Sequence[NodeEvent]) -> None:
        self.sites: dict[int, list[Site]] = {}
        self.anchors: dict[int, str] = {}
        self._roles: dict[int, frozenset[tuple[str, ...]]] = {}
        self._active: set[int] = set()
        self._cuts = self._work = 0
        stream = iter(events)
        for document in documents:
            # Depth first, keys before values: the order in which the parser met the nodes.
            stack: list[tuple[Any, str | None, bool, Any]] = [(None, None, False, document)]
            while stack:
                parent, key, merge, node = stack.pop()
                event = next(stream)
                known = id(node) in self.sites
                if known != event.alias:
                    raise AssertionError("the composed nodes and the parser's events disagree")
                self.sites.setdefault(id(node), []).append(
                    Site(parent, key, merge, event if known else None)
                )
                if known or type(node.value) is str:
                    continue
                if event.anchor:
                    self.anchors[id(node)] = event.anchor
                children: list[tuple[Any, str | None, bool, Any]] = []
                if node.id == "mapping":
                    for k, v in node.value:
                        merged = is_merge_key(k)
                        children.append((node, None, False, k))
                        children.append(
                            (node, k.value if type(k.value) is str else None, merged, v)
                        )
                elif merge:  # `<<: [*a, *b]`: each item is merged into the mapping
                    children = [(parent, None, True, item) for item in node.value]
                else:
                    children = [(node, None, False, item) for item in node.value]
                stack += reversed(children)

    def roles(self, node: Any) -> frozenset[tuple[str, ...]]:
        """The paths from the document's root at which `node` stands (OTHER for any other)."""
        known = self._roles.get(id(node))
        if known is not None:
            return known
        self._work += 1
        if len(self._active) > 64 or self._work > 100_000:
            # A place far from any label's. (No anchor holds an alias of itself: the check
            # refuses one, so the places form no loop.)
            self._cuts += 1
            return frozenset({OTHER})
        cuts = self._cuts
        self._active.add(id(node))
        try:
            roles: set[tuple[str, ...]] = set()
            for site in self.sites.get(id(node), ()):
                roles |= self.site_roles(site)
        finally:
            self._active.discard(id(node))
        result = frozenset(roles)
        if cuts == self._cuts or not self._active:  # complete: no loop was cut short below
            self._roles[id(node)] = result
        return result

    def forget_roles(self) -> None:
        """After an alias is written out, the roles computed so far may be stale."""
        self._roles.clear()

    def site_roles(self, site: Site) -> set[tuple[str, ...]]:
        if site.parent is None:
            return {()}
        above = self.roles(site.parent)
        if site.merge:
            return set(above)
        if site.key is None:
            return {OTHER}
        extended = {(*r, site.key) for r in above if r != OTHER}
        return {r if r in _PREFIXES else OTHER for r in extended} | (above & {OTHER})


class Labeller:
    """Adds labels, and a namespace where missing, to one task's documents.

    A mapping that anchors share is written into only when every place that uses it gets
    the same additions. Otherwise the addition is made where the labelled object uses it
    (an alias becomes `{<<: *anchor, ...}`, a merged mapping gets an entry of its own), or
    the aliases at the other places are written out as the mapping they stand for. What
    none of these can make right is refused, naming the line.
    """

    def __init__(
        self,
        editor: TextEditor,
        documents: Sequence[Any],
        anchors: bool,
        conflict: Callable[[str, str, str], None],
    ) -> None:
        self.editor = editor
        self.conflict = conflict
        # Without anchors or merge keys each node stands at one place, where its text is.
        self.shape = Shape(documents, node_events(editor.text)) if anchors else None
        self.planned: dict[int, dict[str, Any]] = {}  # what this task adds to each mapping
        self.places = _PLACES

    def label(
        self,
        document: Any,
        kind: str,
        labels: Mapping[str, str],
        namespace: str | None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Labels (and annotations) on the object, and for a Job its labels on its pod template too."""
        self.places = _JOB_PLACES if kind == "Job" else _PLACES
        added = {"labels": labels, "annotations": annotations or {}}
        self.place(document, ("metadata",), added, namespace)
        if kind == "Job" and labels:
            template = mapping_get(mapping_get(document, "spec"), "template")
            if template is not None:
                self.place(template, ("spec", "template", "metadata"), {"labels": labels}, None)

    def place(
        self,
        owner: Any,
        role: tuple[str, ...],
        added: Mapping[str, Mapping[str, str]],
        namespace: str | None,
    ) -> None:
        """Merge labels and annotations (and a namespace, if missing) into owner.metadata, creating what is absent."""
        maps = [(key, added[key]) for key in _MAPS if added.get(key)]
        metadata = self.lookup(owner, "metadata")
        if metadata is _PLANNED:
            return
        if metadata is None:
            entries: list[KeyValue] = [(key, list(values.items())) for key, values in maps]
            if namespace:
                entries.insert(0, ("namespace", namespace))
            if entries and not self.add(owner, "owner", [("metadata", entries)]):
                self.refuse(owner, "owner", entries)
            return
        entries = []
        if namespace and self.lookup(metadata, "namespace") is None:
            entries.append(("namespace", namespace))
        refused: tuple[Any, str, list[KeyValue]] | None = None  # a map we had to write out anew
        for key, values in maps:
            existing = self.lookup(metadata, key)
            if existing is None:
                entries.append((key, list(values.items())))
                continue
            if existing is _PLANNED:
                continue
            if type(existing).__name__ != "MappingNode":
                raise RenderCheckError(
                    f"{self.editor.where}: {'.'.join(role)}.{key} is not a mapping; "
                    f"write {key}: {{}} or use --no-labels"
                )
            theirs = self.effective(existing)
            missing = []
            for name, value in values.items():
                if name not in theirs:
                    missing.append((name, value))
                elif theirs[name] != value:
                    self.conflict(name, theirs[name], value)
            if missing and not self.add(existing, key, missing, metadata, key):
                # The map cannot take ours where it is: the metadata gets a map of its own,
                # theirs written out and ours beside them.
                copied = flow_copy(existing)
                if copied is None:
                    self.refuse(existing, key, missing)
                parts = [copied[1:-1]] if copied != "{}" else []
                parts += [flow_entry(e) for e in missing]
                entries.append((key, Raw(f"{{{', '.join(parts)}}}")))
                refused = refused or (existing, key, missing)
        if refused is not None:
            if not self.expand(metadata, "metadata", entries, owner, "metadata"):
                self.refuse(*refused)
            return
        if entries and not self.add(metadata, "metadata", entries, owner, "metadata"):
            self.refuse(metadata, "metadata", entries)

    def lookup(self, mapping: Any, key: str) -> Any:
        """The value under `key`, merge keys included; _PLANNED if this task adds it."""
        if type(mapping).__name__ != "MappingNode":
            return None
        # Without anchors or merge keys in the text, a mapping is only its own entries.
        for source in merged_mappings(mapping) if self.shape is not None else (mapping,):
            for k, v in source.value:
                if k.value == key and type(k).__name__ == "ScalarNode":
                    return v
            if key in self.planned.get(id(source), ()):
                return _PLANNED
        return None

    def effective(self, mapping: Any) -> dict[str, str]:
        """A labels mapping's keys and values as YAML merges them, with what this task adds."""
        entries: dict[str, str] = {}
        sources = list(merged_mappings(mapping)) if self.shape is not None else [mapping]
        for source in reversed(sources):
            for k, v in source.value:
                if type(k.value) is str and not is_merge_key(k):
                    entries[k.value] = v.value if type(v.value) is str else "(not a string)"
            entries.update(self.planned.get(id(source), {}))
        return entries

    def add(
        self,
        node: Any,
        level: str,
        entries: Sequence[KeyValue],
        parent: Any = None,
        key: str = "",
    ) -> bool:
        """Add entries to the mapping `node` (the value under `key` in `parent`); False if no way is right."""
        safe = self.safe(node, level)
        if not safe and parent is not None and self.expand(node, level, entries, parent, key):
            return True
        if safe or self.freeze(node, level):
            self.write(node, entries)
            return True
        return False

    def expand(
        self, node: Any, level: str, entries: Sequence[KeyValue], parent: Any, key: str
    ) -> bool:
        """Make the additions where `parent` takes `node` under `key`, leaving `node` as it is."""
        assert self.shape is not None
        if not self.safe(parent, _LEVEL_ABOVE[level]):
            return False
        flow = ", ".join(flow_entry(e) for e in entries)
        written = [v for k, v in parent.value if k.value == key and not is_merge_key(k)]
        if not written:
            # Taken through a merge key: give `parent` an entry of its own, the merged
            # mapping (by its anchor, or written out) with ours beside it.
            anchor = self.shape.anchors.get(id(node))
            copied = f"<<: *{anchor}" if anchor is not None else flow_copy(node)
            if copied is None:
                return False
            theirs = copied if anchor is not None else copied[1:-1]
            self.write(parent, [(key, Raw(f"{{{', '.join(filter(None, [theirs, flow]))}}}"))])
            return True
        site = next(
            (s for s in self.shape.sites[id(node)] if s.parent is parent and s.key == key), None
        )
        if written[0] is not node or site is None or site.alias is None:
            return False
        # `key: *anchor` here: merge the anchor and add ours beside it.
        text = f"{{<<: *{site.alias.anchor}, {flow}}}"
        self.editor.replace(site.alias.start, site.alias.end, text)
        self.planned.setdefault(id(parent), {})[key] = text
        return True

    def safe(self, node: Any, level: str) -> bool:
        """Whether every place `node` stands gets the additions meant for `level`."""
        return self.shape is None or self.shape.roles(node) <= self.places[level]

    def write(self, node: Any, entries: Sequence[KeyValue]) -> None:
        self.editor.add(node, entries)
        self.planned.setdefault(id(node), {}).update(entries)

    def freeze(self, node: Any, level: str) -> bool:
        """Write out, as flow YAML, the aliases that make `node` stand where ours do not belong;
        False if one cannot be."""
        assert self.shape is not None
        aliases: list[tuple[Any, Site]] = []
        if not self._aliases_to_write_out(node, self.places[level], aliases, 0):
            return False
        copies = [flow_copy(target) for target, _ in aliases]
        if None in copies:
            return False
        for (target, site), copied in zip(aliases, copies, strict=True):
            assert site.alias is not None and copied is not None
            self.editor.replace(site.alias.start, site.alias.end, copied)
            self.shape.sites[id(target)].remove(site)
        self.shape.forget_roles()
        return True

    def _aliases_to_write_out(
        self,
        node: Any,
        allowed: frozenset[tuple[str, ...]],
        found: list[tuple[Any, Site]],
        depth: int,
    ) -> bool:
        assert self.shape is not None
        for site in self.shape.sites[id(node)]:
            if self.shape.site_roles(site) <= allowed:
                continue
            if site.alias is not None:
                found.append((node, site))
                continue
            # The node is written here, but this place is itself shared: look one level up.
            if site.parent is None or depth > 8:
                return False
            if site.merge:
                above = allowed
            elif site.key is None:
                return False
            else:
                above = frozenset(r[:-1] for r in allowed if r[-1:] == (site.key,))
            if not self._aliases_to_write_out(site.parent, above, found, depth + 1):
                return False
        return True

    def refuse(self, node: Any, level: str, entries: Sequence[KeyValue]) -> NoReturn:
        what = "a namespace" if [k for k, _ in entries] == ["namespace"] else "labels"
        what = "annotations" if level == "annotations" else what
        hint = (
            "set metadata.namespace in the template" if what == "a namespace" else "use --no-labels"
        )
        line = node.start_mark.line
        raise LabelError(
            f"{self.editor.where}: cannot add {what} to the {'object' if level == 'owner' else level} at line {line + 1}: "
            "an anchor shares it with a place that must not change, and simpletfjob cannot "
            f"write it out there (it has a tag, refers to itself, or is too large); {hint}",
            line,
        )
