"""Patches and field ownership: merge patch, strategic merge, JSON patch, and server-side apply.

Server-side apply here is a simplified model of structured-merge-diff:

- Ownership is a set of leaf paths per manager, kept where the server keeps it, in
  `metadata.managedFields` (FieldsV1), so a client sees realistic entries.
- Lists are atomic (owned and replaced whole) except the lists that are keyed in the
  Kubernetes schema; those merge item by item on their keys (containers by name,
  container ports by containerPort and protocol, conditions by type, ...). A missing
  `protocol` key counts as TCP, as servers since v1.21 do (v1.20 answers 500).
- A conflict is a leaf that another manager owns and the applied config sets to a
  different value; `force` takes the leaf over. Fields the applier owned and no longer
  sets are removed unless another manager owns them.
- Differences from the real thing: no schema, so an unknown field is kept, not dropped;
  no per-version conversion; list order after a merge is the live order followed by new
  items; ownership of a map itself (the "." entries) only marks keyed items.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

Path = tuple[str, ...]

# Fields of a list whose items are keyed in the Kubernetes schema, and their key fields.
_KEYED: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "hostAliases": ("ip",),
    "containerStatuses": ("name",),
    "initContainerStatuses": ("name",),
}
# metadata that belongs to the server, never to a field manager
_SERVER_METADATA = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
}


class PatchError(ValueError):
    """A patch the server cannot apply; str() is the Status message."""


class ApplyConflict(Exception):
    def __init__(self, conflicts: list[tuple[str, str, Path]]) -> None:
        super().__init__(conflicts)
        self.conflicts = conflicts  # (manager, operation suffix, path)


def _keys_for(field: str, items: list[Any]) -> tuple[str, ...] | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    if field == "ports":
        return (
            ("containerPort", "protocol") if "containerPort" in items[0] else ("port", "protocol")
        )
    return _KEYED.get(field)


def _item_key(item: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    values = {k: item.get(k, "TCP" if k == "protocol" else None) for k in keys}
    return "k:" + json.dumps(values, separators=(",", ":"))


def leaves(obj: Mapping[str, Any], *, status: bool = False) -> dict[Path, Any]:
    """Every owned leaf of an object, with its value; server metadata and status excluded."""
    out: dict[Path, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status" and not status):
            continue
        if key == "metadata" and isinstance(value, dict):
            kept = {k: v for k, v in value.items() if k not in _SERVER_METADATA}
            _walk(kept, ("f:metadata",), out)
        else:
            _walk_value(key, value, ("f:" + key,), out)
    return out


def _walk(value: Mapping[str, Any], path: Path, out: dict[Path, Any]) -> None:
    for key, child in value.items():
        _walk_value(key, child, (*path, "f:" + key), out)


def _walk_value(field: str, value: Any, path: Path, out: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value:
        _walk(value, path, out)
    elif isinstance(value, list) and (keys := _keys_for(field, value)):
        for item in value:
            item_path = (*path, _item_key(item, keys))
            marker = (*item_path, ".")  # the item itself is owned
            out[marker] = None
            _walk(item, item_path, out)
    else:
        out[path] = value


def value_at(obj: Any, path: Path) -> Any:
    """The value at an ownership path, or a sentinel when absent."""
    for step in path:
        if step == ".":
            return obj
        if isinstance(obj, dict) and step.startswith("f:"):
            if step[2:] not in obj:
                return _ABSENT
            obj = obj[step[2:]]
        elif isinstance(obj, list) and step.startswith("k:"):
            wanted = json.loads(step[2:])
            obj = next(
                (i for i in obj if _item_key(i, tuple(wanted)) == step),
                _ABSENT,
            )
            if obj is _ABSENT:
                return _ABSENT
        else:
            return _ABSENT
    return obj


_ABSENT = object()


def fields_v1(paths: list[Path] | set[Path], *, apply: bool) -> dict[str, Any]:
    """The FieldsV1 tree of a set of paths; Update entries also mark the maps they own."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for depth, step in enumerate(path):
            node = node.setdefault(step, {})
            following = path[depth + 1] if depth + 1 < len(path) else ""
            if not apply and depth >= 1 and step.startswith("f:") and following.startswith("f:"):
                node.setdefault(".", {})
    return tree


def paths_of(fields: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    """The leaf paths a FieldsV1 tree names (its "." markers included)."""
    out: set[Path] = set()
    for step, child in fields.items():
        if step == "." and prefix and prefix[-1].startswith("k:"):
            out.add((*prefix, "."))
        elif step == ".":
            continue
        elif isinstance(child, dict) and any(k != "." for k in child):
            out |= paths_of(child, (*prefix, step))
        else:
            out.add((*prefix, step))
    return out


def render_path(path: Path) -> str:
    """As the server prints a conflicting field: .spec.containers[name="c"].image."""
    out = ""
    for step in path:
        if step == ".":
            continue
        if step.startswith("f:"):
            out += "." + step[2:]
        else:
            values = json.loads(step[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in values.items()) + "]"
    return out


def conflict_message(conflicts: list[tuple[str, str, Path]]) -> str:
    by_manager: dict[tuple[str, str], list[str]] = {}
    for manager, using, path in conflicts:
        by_manager.setdefault((manager, using), []).append(render_path(path))
    if len(conflicts) == 1:
        ((manager, using), (field,)) = next(iter(by_manager.items()))
        return f'Apply failed with 1 conflict: conflict with "{manager}"{using}: {field}'
    parts = [
        f'conflicts with "{manager}"{using}:\n' + "\n".join(f"- {f}" for f in fields)
        for (manager, using), fields in by_manager.items()
    ]
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(parts)


# -- merging -----------------------------------------------------------------------------------


def _merge_into(live: Any, config: Any, field: str = "") -> Any:
    if isinstance(live, dict) and isinstance(config, dict):
        merged = dict(live)
        for key, value in config.items():
            merged[key] = (
                _merge_into(live.get(key), value, key) if key in live else copy.deepcopy(value)
            )
        return merged
    if isinstance(live, list) and isinstance(config, list):
        keys = _keys_for(field, config) or _keys_for(field, live)
        if keys and all(isinstance(i, dict) for i in live):
            result = [copy.deepcopy(i) for i in live]
            index = {_item_key(i, keys): n for n, i in enumerate(result)}
            for item in config:
                k = _item_key(item, keys)
                if k in index:
                    result[index[k]] = _merge_into(result[index[k]], item)
                else:
                    result.append(copy.deepcopy(item))
            return result
    return copy.deepcopy(config)


def _remove(obj: Any, path: Path) -> None:
    if not path or path[-1] == ".":
        path = path[:-1]
        if not path or not path[-1].startswith("k:"):
            return
    parent = value_at(obj, path[:-1])
    step = path[-1]
    if isinstance(parent, dict) and step.startswith("f:"):
        parent.pop(step[2:], None)
    elif isinstance(parent, list) and step.startswith("k:"):
        keys = tuple(json.loads(step[2:]))
        parent[:] = [i for i in parent if _item_key(i, keys) != step]


def _managers(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def _entry(
    manager: str,
    operation: str,
    api_version: str,
    paths: set[Path],
    when: str,
    subresource: str | None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": when,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(paths, apply=operation == "Apply"),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _using(entry: Mapping[str, Any]) -> str:
    return "" if entry.get("operation") == "Apply" else f" using {entry.get('apiVersion')}"


def server_side_apply(
    live: dict[str, Any] | None,
    config: dict[str, Any],
    *,
    manager: str,
    force: bool,
    api_version: str,
    when: str,
) -> dict[str, Any]:
    """The object after `manager` applies `config`; raises ApplyConflict unless forced."""
    wanted = leaves(config)
    base: dict[str, Any] = copy.deepcopy(live) if live is not None else {}
    entries = _managers(base)
    mine = next((e for e in entries if e["manager"] == manager and e["operation"] == "Apply"), None)
    others = [e for e in entries if e is not mine and e["manager"] != manager]
    conflicts: list[tuple[str, str, Path]] = []
    taken: dict[int, set[Path]] = {}
    for n, entry in enumerate(others):
        owned = paths_of(entry.get("fieldsV1") or {})
        for path in owned & set(wanted):
            if path[-1] == ".":
                continue
            if value_at(base, path) != wanted[path]:
                conflicts.append((entry["manager"], _using(entry), path))
                taken.setdefault(n, set()).add(path)
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    owned_by_others: set[Path] = set()
    kept_entries = []
    for n, entry in enumerate(others):
        paths = paths_of(entry.get("fieldsV1") or {}) - taken.get(n, set())
        owned_by_others |= paths
        if paths:
            kept_entries.append(
                {**entry, "fieldsV1": fields_v1(paths, apply=entry["operation"] == "Apply")}
            )
    if mine is not None:
        dropped = paths_of(mine.get("fieldsV1") or {}) - set(wanted)
        for path in sorted(dropped, key=len, reverse=True):
            prefix_owned = any(p[: len(path)] == path for p in owned_by_others)
            if path not in owned_by_others and not prefix_owned:
                _remove(base, path)
    config_body = {k: v for k, v in config.items() if k not in ("apiVersion", "kind", "status")}
    meta = {k: v for k, v in (config.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    config_body["metadata"] = meta
    merged: dict[str, Any] = _merge_into(base, config_body)
    merged.setdefault("metadata", {})
    same_manager_updates = [e for e in entries if e is not mine and e["manager"] == manager]
    merged["metadata"]["managedFields"] = [
        *same_manager_updates,
        *kept_entries,
        _entry(manager, "Apply", api_version, set(wanted), when, None),
    ]
    # keep the server's order: the earliest manager first
    order = {e["manager"] + e["operation"]: n for n, e in enumerate(entries)}
    merged["metadata"]["managedFields"].sort(
        key=lambda e: order.get(e["manager"] + e["operation"], len(order))
    )
    return merged


def record_update(
    old: Mapping[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    api_version: str,
    when: str,
    subresource: str | None = None,
) -> None:
    """Give `manager` the leaves an Update changed, taking them from other managers; in place."""
    status = subresource == "status"
    before = leaves(old, status=status) if old is not None else {}
    after = leaves(new, status=status)
    changed = {p for p, v in after.items() if before.get(p, _ABSENT) != v}
    removed = set(before) - set(after)
    if not changed and not removed:
        return
    entries = _managers(old) if old is not None else []
    result = []
    mine_paths: set[Path] = set()
    for entry in entries:
        paths = paths_of(entry.get("fieldsV1") or {})
        is_mine = (
            entry["manager"] == manager
            and entry["operation"] == "Update"
            and entry.get("subresource") == subresource
        )
        if is_mine:
            mine_paths = paths
            continue
        left = paths - changed - removed
        if left:
            result.append(
                {**entry, "fieldsV1": fields_v1(left, apply=entry["operation"] == "Apply")}
            )
    mine_paths = (mine_paths | changed) - removed
    if mine_paths:
        result.append(_entry(manager, "Update", api_version, mine_paths, when, subresource))
    new.setdefault("metadata", {})["managedFields"] = result


# -- the other patch types ---------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """A strategic merge patch, simplified: keyed lists merge on their keys, `$patch: delete` removes."""
    if isinstance(patch, dict) and isinstance(target, dict):
        result = dict(target)
        for key, value in patch.items():
            if key.startswith("$"):
                continue
            if value is None:
                result.pop(key, None)
            else:
                result[key] = strategic_merge_patch(result.get(key), value, key)
        return result
    if isinstance(patch, list) and isinstance(target, list):
        keys = _keys_for(field, patch) or _keys_for(field, target)
        if keys:
            # the patch's items first, in its order, then the items only the server had
            existing = {_item_key(i, keys): i for i in target}
            patched, deleted = [], set()
            for item in patch:
                k = _item_key(item, keys)
                if item.get("$patch") == "delete":
                    deleted.add(k)
                elif k in existing:
                    patched.append(strategic_merge_patch(existing[k], item))
                else:
                    patched.append(copy.deepcopy(item))
            named = {_item_key(i, keys) for i in patch}
            rest = [copy.deepcopy(i) for i in target if _item_key(i, keys) not in named | deleted]
            return patched + rest
    if isinstance(patch, dict):
        return strategic_merge_patch({}, patch, field)
    return copy.deepcopy(patch)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} does not start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    for part in parts[:-1]:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            raise PatchError(f"doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, test, move, copy."""
    if not isinstance(operations, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for op in operations:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        try:
            if kind in ("move", "copy"):
                source = _pointer(op.get("from", ""))
                value = copy.deepcopy(_get(doc, source))
                if kind == "move":
                    doc = _apply_op(doc, "remove", source, None)
                doc = _apply_op(doc, "add", parts, value)
            else:
                doc = _apply_op(doc, kind, parts, op.get("value"))
        except (IndexError, KeyError, ValueError, TypeError) as e:
            raise PatchError(
                f"{kind} operation does not apply: doc is missing path: {op.get('path')}"
            ) from e
    return doc


def _get(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _apply_op(doc: Any, kind: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        if kind in ("add", "replace"):
            return copy.deepcopy(value)
        raise PatchError(f"unsupported operation on the root: {kind}")
    parent, last = _parent(doc, parts), parts[-1]
    if kind == "test":
        if _get(doc, parts) != value:
            raise PatchError(f"testing value /{'/'.join(parts)} failed: test failed")
    elif kind == "add":
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(value))
        else:
            parent[last] = copy.deepcopy(value)
    elif kind == "remove":
        if isinstance(parent, list):
            del parent[int(last)]
        else:
            del parent[last]
    elif kind == "replace":
        if isinstance(parent, list):
            parent[int(last)] = copy.deepcopy(value)
        else:
            if last not in parent:
                raise KeyError(last)
            parent[last] = copy.deepcopy(value)
    else:
        raise PatchError(f"Unexpected kind: {kind}")
    return doc


def iter_owned(obj: Mapping[str, Any]) -> Iterator[tuple[str, str, set[Path]]]:
    """(manager, operation, paths) of each managedFields entry."""
    for entry in _managers(obj):
        yield entry["manager"], entry["operation"], paths_of(entry.get("fieldsV1") or {})
