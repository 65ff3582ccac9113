"""Kubeconfig files, read and checked here before the kubernetes client sees them.

The client trusts a kubeconfig's shape (a list of strings under `contexts:` ends in a
TypeError) and expands its aliases. So each file is read with `yamlload`, every field used
is checked for its type, and a wrong one is one line naming the file and the field. The
files are merged as kubectl merges them: the first to define a cluster, user or context by
name wins, and so does the first to set `current-context`. Nothing here imports the client.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import yaml

from simpletfjob import yamlload
from simpletfjob.errors import ClusterError, InputError
from simpletfjob.inputs import describe_value, read_text

# Each named list of a kubeconfig, and the key of each entry's body.
SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}

# Fields the client reads from the chosen cluster and user, with their types.
_CLUSTER_FIELDS = {
    "server": str,
    "certificate-authority": str,
    "certificate-authority-data": str,
    "insecure-skip-tls-verify": bool,
    "tls-server-name": str,
    "proxy-url": str,
}
_USER_FIELDS = {
    "token": str,
    "tokenFile": str,
    "client-certificate": str,
    "client-certificate-data": str,
    "client-key": str,
    "client-key-data": str,
    "username": str,
    "password": str,
    "exec": dict,
    "auth-provider": dict,
}
_TYPE_NAMES = {str: "a string", bool: "true or false", dict: "a mapping", list: "a list"}


class Entry(NamedTuple):
    """One named cluster, user or context: its body, and where it was written."""

    name: str
    body: Mapping[str, Any]
    path: str  # the file, which relative certificate and token paths are relative to
    where: str  # 'FILE: contexts[2]', for messages


class Kubeconfig(NamedTuple):
    """The merged kubeconfig: each section's entries by name, and the current context."""

    shown: str  # the files, as messages name them
    current: str | None
    sections: Mapping[str, Mapping[str, Entry]]


class Chosen(NamedTuple):
    """The context a run uses, with its cluster and its user (None for no credentials)."""

    shown: str  # the kubeconfig files, as messages name them
    context: Entry
    cluster: Entry
    user: Entry | None

    @property
    def namespace(self) -> object:
        """The context's namespace as written, unchecked: only namespaced calls need it."""
        return self.context.body.get("namespace")


def read_kubeconfigs(paths: Sequence[str]) -> Kubeconfig:
    """Read, check and merge the kubeconfig files, in order."""
    shown = os.pathsep.join(paths)
    current: str | None = None
    sections: dict[str, dict[str, Entry]] = {section: {} for section in SECTIONS}
    for path in paths:
        text = read_text(path, "kubeconfig")
        try:
            config = yamlload.load(text)
        except yaml.YAMLError as e:
            raise InputError(yamlload.describe_error(e, f"kubeconfig {path}")) from e
        if config is None:  # an empty file, as kubectl reads it: nothing set
            continue
        if not isinstance(config, Mapping):
            raise InputError(
                f"kubeconfig {path} must be a YAML mapping with clusters, users and contexts, "
                f"not {describe_value(config)}"
            )
        chosen = config.get("current-context")
        if chosen is not None and not isinstance(chosen, str):
            raise InputError(
                f"kubeconfig {path}: current-context must be a string, not {describe_value(chosen)}"
            )
        current = current or chosen or None
        for section, body_key in SECTIONS.items():
            for entry in _entries(config, section, body_key, path):
                sections[section].setdefault(entry.name, entry)
    return Kubeconfig(shown, current, sections)


def _entries(config: Mapping[str, Any], section: str, body_key: str, path: str) -> list[Entry]:
    listed = config.get(section)
    if listed is None:
        return []
    if not isinstance(listed, list):
        raise InputError(
            f"kubeconfig {path}: {section} must be a list, not {describe_value(listed)}"
        )
    entries: list[Entry] = []
    first: dict[str, str] = {}
    for i, item in enumerate(listed):
        where = f"kubeconfig {path}: {section}[{i}]"
        if not isinstance(item, Mapping):
            raise InputError(
                f"{where} must be a mapping with 'name' and '{body_key}', "
                f"not {describe_value(item)}"
            )
        name = _string(item.get("name"), f"{where}.name")
        if name in first:
            raise InputError(
                f"{where}: {name!r} is defined twice in this file (first at {first[name]})"
            )
        first[name] = f"{section}[{i}]"
        body = item.get(body_key)
        if body is None:  # kubectl reads a null body as an empty one
            body = {}
        if not isinstance(body, Mapping):
            raise InputError(
                f"{where} ({name!r}).{body_key} must be a mapping, not {describe_value(body)}"
            )
        entries.append(Entry(name, body, path, f"kubeconfig {path}: {section}[{i}] ({name!r})"))
    return entries


def choose(config: Kubeconfig, context: str | None) -> Chosen:
    """The context to use (--context, else the current one), with its cluster and user, checked."""
    contexts = config.sections["contexts"]
    have = f" (it has: {', '.join(contexts)})" if contexts else " (it has no contexts)"
    name = context or config.current
    if not name:
        raise ClusterError(
            f"kubeconfig {config.shown} sets no current context; choose one with --context NAME{have}"
        )
    if name not in contexts:
        raise ClusterError(f"context {name!r} is not in kubeconfig {config.shown}{have}")
    entry = contexts[name]
    cluster = _named(config, entry, "cluster", required=True)
    user = _named(config, entry, "user", required=False)
    assert cluster is not None
    _check_fields(cluster, "cluster", _CLUSTER_FIELDS)
    _check_files(cluster, "cluster", {"certificate-authority": "certificate-authority-data"})
    if user is not None:
        _check_fields(user, "user", _USER_FIELDS)
        _check_files(
            user,
            "user",
            {
                "client-certificate": "client-certificate-data",
                "client-key": "client-key-data",
                "tokenFile": "token",
            },
        )
        if "exec" in user.body:
            _check_exec(user)
        if "auth-provider" in user.body:
            _check_auth_provider(user)
    return Chosen(config.shown, entry, cluster, user)


def _named(config: Kubeconfig, context: Entry, kind: str, required: bool) -> Entry | None:
    """The cluster or user a context names; a context may name no user (no credentials)."""
    name = context.body.get(kind)
    if name is None or name == "":
        if not required:
            return None
        raise InputError(f"{context.where}: the context names no {kind}")
    if not isinstance(name, str):
        raise InputError(
            f"{context.where}.context.{kind} must be a string, not {describe_value(name)}"
        )
    found = config.sections[kind + "s"].get(name)
    if found is None:
        known = ", ".join(config.sections[kind + "s"]) or "none"
        raise InputError(
            f"{context.where}: the context names {kind} {name!r}, which kubeconfig "
            f"{config.shown} does not define (its {kind}s: {known})"
        )
    return found


def _check_fields(entry: Entry, body_key: str, fields: Mapping[str, type]) -> None:
    for key, wanted in fields.items():
        value = entry.body.get(key)
        if value is not None and not isinstance(value, wanted):
            raise InputError(
                f"{entry.where}.{body_key}.{key} must be {_TYPE_NAMES[wanted]}, "
                f"not {describe_value(value)}"
            )


def _check_files(entry: Entry, body_key: str, keys: Mapping[str, str]) -> None:
    """The files an entry names exist and are files (relative to its kubeconfig, as kubectl reads them).
    `keys` maps each file field to the field that, when set, is used instead of it.
    The client's own words would call a directory a file that does not exist."""
    for key, instead in keys.items():
        name = entry.body.get(key)
        if not name or entry.body.get(instead):
            continue
        path = os.path.join(os.path.dirname(os.path.abspath(entry.path)), name)
        where = f"{entry.where}.{body_key}.{key}"
        if os.path.isdir(path):
            raise InputError(f"{where}: {name!r} is a directory, not a file")
        if not os.path.exists(path):
            raise InputError(f"{where}: {name!r} does not exist")


def _check_exec(user: Entry) -> None:
    plugin = user.body["exec"]
    where = f"{user.where}.user.exec"
    for key in ("command", "apiVersion"):
        _string(plugin.get(key), f"{where}.{key}")
    args = plugin.get("args")
    if args is not None and (
        not isinstance(args, list) or not all(isinstance(a, str) for a in args)
    ):
        raise InputError(f"{where}.args must be a list of strings, not {describe_value(args)}")
    env = plugin.get("env")
    if env is None:
        return
    if not isinstance(env, list):
        raise InputError(f"{where}.env must be a list, not {describe_value(env)}")
    for i, item in enumerate(env):
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise InputError(
                f"{where}.env[{i}] must be a mapping with a string name and value, "
                f"not {describe_value(item)}"
            )


def _check_auth_provider(user: Entry) -> None:
    provider = user.body["auth-provider"]
    where = f"{user.where}.user.auth-provider"
    _string(provider.get("name"), f"{where}.name")
    config = provider.get("config")
    if config is None:
        return
    if not isinstance(config, Mapping):
        raise InputError(f"{where}.config must be a mapping, not {describe_value(config)}")
    for key, value in config.items():
        if not isinstance(value, str):
            raise InputError(f"{where}.config.{key} must be a string, not {describe_value(value)}")


def _string(value: object, where: str) -> str:
    """`value`, a string that is not empty; else one line saying it is missing or what it is."""
    if isinstance(value, str) and value:
        return value
    problem = "is missing" if value is None else f"must be a string, not {describe_value(value)}"
    raise InputError(f"{where} {problem}")
