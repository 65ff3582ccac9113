"""A run's objects: those on the server, found by their labels, and the manifests apply sends.

Run NAME is every Job and Service of a namespace labelled `simpletfjob/job=NAME` and
`app.kubernetes.io/managed-by=simpletfjob`, read with one list per resource; an object that
lacks either label is never part of a run, so no command on runs changes it.

runs/ sits beside plan/, not above it, so it names here the shape it reads of a plan
(`Plan`), which plan.Plan fits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from simpletfjob.errors import NoRunError as NoRunError
from simpletfjob.errors import RenderCheckError, SimpleTFJobError, UsageError
from simpletfjob.identity import (
    INDEX_LABEL,
    JOB_LABEL,
    LABEL_VALUE_RULE,
    MANAGED_BY,
    MANAGER,
    ROLE_LABEL,
    is_label_value,
)
from simpletfjob.kube.lists import list_objects
from simpletfjob.kube.request import Deadline
from simpletfjob.kube.resources import JOBS, SERVICES, Resource

if TYPE_CHECKING:
    from simpletfjob.frameworks import Framework
    from simpletfjob.kube.connection import Connection


RUN_RESOURCES = (JOBS, SERVICES)  # what a run is made of, in the order it is deleted


def check_run_name(name: str) -> None:
    """A run's name is its label's value: anything else could name no run (or break the selector)."""
    if not is_label_value(name) or not name:
        raise UsageError(
            f"RUN {name!r} is not a valid run name, a label value ({LABEL_VALUE_RULE})"
        )


def run_selector(name: str | None = None) -> str:
    """The label selector of run NAME: 'app.kubernetes.io/managed-by=simpletfjob,simpletfjob/job=NAME'.

    Without a name, every run's objects: the simpletfjob labels, never others'.
    """
    run = f"{JOB_LABEL}={name}" if name is not None else JOB_LABEL
    return f"{MANAGED_BY}={MANAGER},{run}"


def belongs_to(obj: Mapping[str, Any], name: str) -> bool:
    """Whether an object carries run NAME's labels (the server's selector said so; this checks it)."""
    metadata = obj.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return (
        isinstance(labels, Mapping)
        and labels.get(MANAGED_BY) == MANAGER
        and labels.get(JOB_LABEL) == name
    )


def not_ours(ref: str, other: Mapping[str, Any], namespace: str, rename: str | None) -> str:
    """Why an object cannot be applied over: it is another run's, or no run's; and the way out.

    `rename` (`--name NAME`) names the run's objects otherwise, when the template's names follow it.
    """
    owner = ((other.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)
    whose = f"run {owner!r}" if owner else "no run (it lacks the simpletfjob labels)"
    way = (
        f"give {rename} to name this run's objects otherwise"
        if rename  # else the template spells its objects' names out: --name does not rename them
        else "rename the template's objects (metadata.name; --name changes only the run's label)"
    )
    return (
        f"{ref} already exists in namespace {namespace} and belongs to {whose}; "
        f"simpletfjob changes only its own objects: delete it, or {way}"
    )


def object_name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class RunObjects(NamedTuple):
    """A run's objects as listed: its Jobs and its Services (either may be empty)."""

    name: str
    namespace: str
    jobs: list[dict[str, Any]]
    services: list[dict[str, Any]]

    @property
    def empty(self) -> bool:
        return not self.jobs and not self.services

    def objects(self) -> Iterator[tuple[Resource, dict[str, Any]]]:
        """Every object with its resource: the Jobs first, then the Services."""
        yield from ((JOBS, obj) for obj in self.jobs)
        yield from ((SERVICES, obj) for obj in self.services)


def named_tasks(jobs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The run's tasks as its Jobs' pod templates name them, a deciding Job gone or not.

    The first framework that reads any task from a Job's env is the run's.
    """
    return _read_tasks(jobs)[1]


def run_framework(jobs: Iterable[Mapping[str, Any]], elastic: bool = False) -> Framework:
    """The run's framework, as its Jobs' pod templates say (`named_tasks`); when none says, the
    default (TensorFlow), or for an `elastic` run the framework that has elastic runs."""
    found = _read_tasks(jobs)[0]
    if found is None:
        from simpletfjob.frameworks import FRAMEWORKS, framework

        named = [framework(name) for name in FRAMEWORKS]
        return next((fw for fw in named if elastic and fw.elastic), named[0])
    return found


def _read_tasks(jobs: Iterable[Mapping[str, Any]]) -> tuple[Framework | None, list[str]]:
    from simpletfjob.frameworks import FRAMEWORKS, framework

    readers = [framework(name) for name in FRAMEWORKS]
    for job in jobs:
        for fw in readers:
            tasks = fw.run_tasks(job)
            if tasks:
                return fw, tasks
    return None, []


def list_run(conn: Connection, name: str, *, deadline: Deadline | None = None) -> RunObjects:
    """Run NAME in the connection's namespace as it is now: two list calls; it may be empty."""
    found = {}
    for resource in RUN_RESOURCES:
        listed = list_objects(conn, resource, label_selector=run_selector(name), deadline=deadline)
        found[resource] = sorted((o for o in listed.items if belongs_to(o, name)), key=object_name)
    return RunObjects(name, conn.namespace, found[JOBS], found[SERVICES])


def find_run(conn: Connection, name: str) -> RunObjects:
    """Run NAME in the connection's namespace; `NoRunError` when it has no object there."""
    run = list_run(conn, name)
    if run.empty:
        raise NoRunError(name, run.namespace)
    return run


ELSEWHERE_TIMEOUT = 5.0  # seconds for the list across namespaces, after "no run" is known


def namespaces_of(conn: Connection, name: str) -> list[str]:
    """The namespaces other than the connection's that hold a Job of run NAME (one list across
    the cluster); [] when that list fails or is refused."""
    deadline = Deadline.after(min(ELSEWHERE_TIMEOUT, conn.settings.deadline))
    try:
        listed = list_objects(
            conn, JOBS, namespace="", label_selector=run_selector(name), deadline=deadline
        )
    except SimpleTFJobError:
        return []
    found = {
        str((job.get("metadata") or {}).get("namespace") or "")
        for job in listed.items
        if belongs_to(job, name)
    }
    return sorted(found - {"", conn.namespace})


@contextmanager
def pointing_elsewhere(conn: Connection) -> Iterator[None]:
    """A `NoRunError` about the connection's namespace says which other namespaces hold the run
    (kubectl users often forget -n); the error is otherwise unchanged."""
    try:
        yield
    except NoRunError as e:
        if e.elsewhere is not None or e.namespace != conn.namespace:
            raise
        raise NoRunError(e.name, e.namespace, namespaces_of(conn, e.name)) from None


def scope_flags(conn: Connection) -> str:
    """'-n ml', or '-n ml --context prod' when --context was given: what a command in a hint needs
    to act where this one did, pasted as it is."""
    import shlex

    flags = f"-n {conn.namespace}"
    if conn.settings.context:
        flags += f" --context {shlex.quote(conn.settings.context)}"
    return flags


def connect_for(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    purpose: str,
    warn: Callable[[str], None] | None = None,
) -> Connection:
    """A connection for the commands on runs, as kubectl's; the warning that TLS is not checked is
    given once, here (through `warn`: by default streams.warn, on stderr)."""
    from simpletfjob import streams
    from simpletfjob.kube.connection import Settings, connect

    conn = connect(
        Settings(kubeconfig=kubeconfig, context=context, namespace=namespace), purpose=purpose
    )
    if conn.target.insecurity:
        (warn or streams.warn)(conn.target.insecurity)
    return conn


def run_names(conn: Connection) -> list[str]:
    """The names of the runs in the connection's namespace, from their Jobs' labels (one list)."""
    listed = list_objects(conn, JOBS, label_selector=run_selector())
    labels = [(job.get("metadata") or {}).get("labels") or {} for job in listed.items]
    ours = [x for x in labels if x.get(MANAGED_BY) == MANAGER]
    return sorted({x[JOB_LABEL] for x in ours if isinstance(x.get(JOB_LABEL), str)})


def task_names(conn: Connection, name: str) -> list[str]:
    """The tasks of run NAME ('worker-0'), from its Jobs' labels (one list), by role and index."""
    listed = list_objects(conn, JOBS, label_selector=run_selector(name))
    found = set()
    for job in listed.items:
        labels = (job.get("metadata") or {}).get("labels") or {}
        role, index = labels.get(ROLE_LABEL), labels.get(INDEX_LABEL)
        if belongs_to(job, name) and isinstance(role, str) and str(index).isdigit():
            found.add((role, int(str(index))))
    return [f"{role}-{index}" for role, index in sorted(found)]


def namespace_names(conn: Connection) -> list[str]:
    """The cluster's namespaces, by name (one list)."""
    from simpletfjob.kube.resources import NAMESPACES

    listed = list_objects(conn, NAMESPACES)
    return sorted(object_name(ns) for ns in listed.items if object_name(ns))


SHOWN = 3  # objects named in a one-line message before "and N more"


def some(items: Sequence[str]) -> str:
    """'a, b, c' or 'a, b, c and 4 more'."""
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


class PlannedTask(Protocol):
    """A task of the plan: its role, its index in the role, and its host."""

    @property
    def role(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def host(self) -> str: ...


class PlannedDocument(Protocol):
    """A planned document: its text, what messages call it, and its kind; and its object as
    `loader` reads its text, where that is had without reading all of it ((False, None) when
    not: the text is then parsed)."""

    @property
    def text(self) -> str: ...
    def body(self, loader: type[Any]) -> tuple[bool, Any]: ...
    @property
    def id(self) -> object: ...
    @property
    def kind(self) -> str: ...


class Plan(Protocol):
    """A plan: the run's name (its label; None with --no-labels), its tasks and documents,
    how to rename its objects otherwise (`rename`), its framework's name, and what one task of
    each role asks of a node (`asks`: (resource, amount) pairs, for a queue's entry)."""

    @property
    def job(self) -> str | None: ...
    @property
    def rename(self) -> str | None: ...
    @property
    def tasks(self) -> Sequence[PlannedTask]: ...
    @property
    def documents(self) -> Sequence[PlannedDocument]: ...
    @property
    def framework(self) -> str: ...
    @property
    def asks(self) -> Sequence[tuple[str, Sequence[tuple[str, int]]]]: ...


P = TypeVar("P", bound=Plan)  # the plan a caller hands in, handed back as it came


APPLIED_ORDER = (SERVICES, JOBS)  # DNS names exist before the pods that look them up start


class Manifest(NamedTuple):
    """One document to apply: its resource, its body, and how messages name it."""

    resource: Resource
    body: dict[str, Any]
    document: str  # "document 2 (Job 'mnist-worker-0')"

    @property
    def name(self) -> str:
        return object_name(self.body)

    @property
    def ref(self) -> str:
        return self.resource.ref(self.name)

    @property
    def key(self) -> tuple[str, str]:
        return self.resource.plural, self.name


def manifests(
    documents: Iterable[tuple[str | PlannedDocument, str]], run: str, namespace: str
) -> list[Manifest]:
    """The documents (text or planned document, how to name it) as manifests, Services first
    so DNS names exist before the pods that look them up; every check before any request.

    Each must be a Job or a Service carrying the run's labels, in `namespace` or in none.
    """
    import yaml

    from simpletfjob.yamlload import load, manifest_loader

    loader = manifest_loader()
    found = []
    for source, document in documents:
        body: Any
        read, body = (False, None) if isinstance(source, str) else source.body(loader)
        try:
            if not read:
                body = load(source if isinstance(source, str) else source.text, loader)
        except yaml.YAMLError as e:  # the render's checks parsed it; a constructor may object
            raise RenderCheckError(f"{document} cannot be read: {e}") from e
        resource = _resource_of(body, document)
        written = (body.get("metadata") or {}).get("namespace")
        if written not in (None, "", namespace):
            # As kubectl refuses a document for another namespace than the one it applies to.
            raise UsageError(
                f"{document} names namespace {written!r}, but the run goes to namespace "
                f"{namespace!r}; give --namespace {written}, or remove the namespace from the template"
            )
        if not belongs_to(body, run):
            labels = (body.get("metadata") or {}).get("labels") or {}
            raise RenderCheckError(
                f"{document} carries {JOB_LABEL}={labels.get(JOB_LABEL)!r} and {MANAGED_BY}="
                f"{labels.get(MANAGED_BY)!r}, not the run's {run!r} and {MANAGER!r}; the labels "
                "are the run's identity, so the template may not set them otherwise"
            )
        if resource is JOBS:
            _quantities_as_strings(body)
        try:
            json.dumps(body, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise RenderCheckError(f"{document} holds a value JSON cannot carry: {e}") from e
        found.append(Manifest(resource, body, document))
    return sorted(found, key=lambda m: APPLIED_ORDER.index(m.resource))


def _quantities_as_strings(job: dict[str, Any]) -> None:
    """Write the numbers of a Job's resource quantities as strings (`nvidia.com/gpu: 1` -> "1").

    Server-side apply in Kubernetes up to 1.20 types a quantity as a string only, and answers
    500 ("expected string") for a number.
    """
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec")
    if not isinstance(spec, dict):
        return
    maps = [spec.get("overhead")]
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(key) or ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict):
                maps += [resources.get("limits"), resources.get("requests")]
    for volume in spec.get("volumes") or ():
        empty = volume.get("emptyDir") if isinstance(volume, dict) else None
        if isinstance(empty, dict) and "sizeLimit" in empty:
            maps.append(empty)  # its other key, medium, is a string already
    for quantities in maps:
        if isinstance(quantities, dict):
            for name, value in quantities.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    quantities[name] = str(value)


def _resource_of(body: object, document: str) -> Resource:
    if isinstance(body, dict):
        for resource in APPLIED_ORDER:
            if (body.get("apiVersion"), body.get("kind")) == (resource.api_version, resource.kind):
                return resource
        what = f"a {body.get('kind') or 'document without a kind'} of {body.get('apiVersion')!r}"
    else:
        what = "not a mapping"
    raise RenderCheckError(
        f"{document} is {what}; a run is batch/v1 Jobs and v1 Services, so apply sends nothing "
        "else (render it with simpletfjob render and apply the rest with kubectl)"
    )
