"""Before apply writes: the server's dry runs, how each object differs, the writes' order.

The dry runs change nothing, so they go `in_flight` at a time, judged in the render's order.
A role's tasks are rendered from one skeleton, so their objects differ only in the task's
values (a name, an index label, a node, the framework's variables), and for those fields the
server's rule is a rule of the value alone. So apply dry-runs one object of each shape it
would create and carries that verdict to the others (`dry_runs`, sampled):

- **Shape**: two manifests of a resource are alike but at the `VARYING` places, where each
  holds a string; all else is equal field for field, in the same order.
- **Sampled**: the first object of each shape, every object the run's list has (an update
  depends on the live object), and any whose values fail a check below (the server then says
  what is wrong in its own words).
- **Checked here** where an object differs from its sample, as the API server checks it: names
  (a Job's a DNS-1123 subdomain of at most 63, as its pods' `job-name` label; a Service's a
  DNS-1035 label), label values, `nodeName`, annotations within 256 KiB together, and the
  object's JSON no larger than its sample's or within 512 KiB.
- **Names held by others** come from one list of names (`names_held`).

Not caught, where each object's dry run would have: a webhook or policy judging one task's
values. Such a refusal stops the apply half-way and says what was applied; `--dry-run=server`
dry-runs every object.

The writes go in groups, each all answered before the next (`groups`): the `--cleanup-after`
owner alone (the others name its uid); the Services (their DNS names exist before any task
starts); the deciding Jobs; the other Jobs. With the deciding Jobs first, an apply cut short
never leaves Jobs without those that decide the run, so a run missing a deciding Job had it
deleted (Failed), and one with only deciding Jobs, none ended, is still being applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import ClusterError
from simpletfjob.identity import is_label_value
from simpletfjob.kube.inflight import in_order
from simpletfjob.kube.lists import list_metadata
from simpletfjob.kube.objects import Applied, apply
from simpletfjob.kube.request import ApiError, ApplyConflict
from simpletfjob.kube.resources import JOBS, SERVICES, Resource
from simpletfjob.runs.objects import Manifest, object_name, some

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.state import Run


Path = tuple[str | int, ...]

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
ANNOTATIONS_MOST = 256 * 1024  # bytes: the API server's TotalAnnotationSizeLimitB
SIZE_ANYWAY = 512 * 1024  # bytes of JSON an object may have whatever its sample's


def _any(value: str) -> bool:
    return True


def _subdomain(value: str) -> bool:
    return len(value) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(value) is not None


def _job_name(value: str) -> bool:
    # An Indexed Job's name must also leave room for '-<index>' in a 63-character label (its
    # completions read nowhere here): a name longer than that room for 10 digits is judged
    # by its own dry run.
    return len(value) <= 63 - 11 and _subdomain(value)


def _service_name(value: str) -> bool:
    return len(value) <= 63 and _DNS1035_LABEL.fullmatch(value) is not None


ANY = "*"  # any key of a mapping, any index of a list
_POD = ("spec", "template", "spec")
_CONTAINERS = [
    (*_POD, kind, ANY, words, ANY)
    for kind in ("containers", "initContainers")
    for words in ("command", "args")
] + [(*_POD, kind, ANY, "env", ANY, "value") for kind in ("containers", "initContainers")]
_METADATA: list[tuple[tuple[str, ...], Callable[[str], bool]]] = [
    (("metadata", "labels", ANY), is_label_value),
    (("metadata", "annotations", ANY), _any),
]

# Where objects of one shape may differ, and the check of a value there (the server's rule).
VARYING: dict[Resource, list[tuple[tuple[str, ...], Callable[[str], bool]]]] = {
    JOBS: [
        (("metadata", "name"), _job_name),
        *_METADATA,
        (("spec", "template", "metadata", "labels", ANY), is_label_value),
        (("spec", "template", "metadata", "annotations", ANY), _any),
        ((*_POD, "nodeName"), _subdomain),
        *((path, _any) for path in _CONTAINERS),
    ],
    SERVICES: [
        (("metadata", "name"), _service_name),
        *_METADATA,
        (("spec", "selector", ANY), is_label_value),
    ],
}


class Shaped(NamedTuple):
    """An object's shape (its body, each varying string blanked) and its varying strings."""

    key: str
    values: dict[Path, str]  # each varying place's string, by its path in the body
    size: int  # its JSON's length


def shape(resource: Resource, body: Mapping[str, Any]) -> Shaped:
    """The object's shape and what varies in it (VARYING)."""
    values: dict[Path, str] = {}
    blank = _walk(body, (), [p for p, _ in VARYING.get(resource, ())], values)
    key = json.dumps([resource.plural, blank], separators=(",", ":"))
    return Shaped(key, values, len(json.dumps(body, separators=(",", ":"))))


def _walk(node: Any, path: Path, places: list[tuple[str, ...]], out: dict[Path, str]) -> Any:
    """`node` with its varying strings blanked (and put in `out`); `places`: the varying places'
    paths below `path`, each what is left of it."""
    if not places:
        return node  # nothing varies below: as it is
    if isinstance(node, str):
        if () in places:
            out[path] = node
            return None  # blanked: the shape holds no varying string
        return node
    if isinstance(node, Mapping):
        # Keys in order: equal JSON is a stricter test than equal content.
        return {k: _walk(v, (*path, k), _below(places, k), out) for k, v in node.items()}
    if isinstance(node, list):
        return [_walk(v, (*path, i), _below(places, ANY), out) for i, v in enumerate(node)]
    return node


def _below(places: list[tuple[str, ...]], step: str) -> list[tuple[str, ...]]:
    """The places below `step` (a key, or ANY for a list's items): those of that key and of ANY."""
    return [p[1:] for p in places if p and p[0] in (step, ANY)]


def _place_rule(resource: Resource, path: Path) -> Callable[[str], bool]:
    for pattern, rule in VARYING[resource]:
        if len(pattern) == len(path) and all(
            p in (ANY, q) for p, q in zip(pattern, path, strict=True)
        ):
            return rule
    raise AssertionError(f"not a varying place: {path}")


def carries(resource: Resource, sample: Shaped, other: Shaped) -> bool:
    """Whether the server's verdict on `sample` holds for `other`, of the same shape: its differing
    values pass their places' rules, and its annotations and size fit."""
    if other.size > max(sample.size, SIZE_ANYWAY):
        return False
    for path, value in other.values.items():
        if sample.values.get(path) != value and not _place_rule(resource, path)(value):
            return False
    return _annotations_fit(other.values, ("metadata",)) and _annotations_fit(
        other.values, ("spec", "template", "metadata")
    )


def _annotations_fit(values: Mapping[Path, str], where: Path) -> bool:
    # Counted over the varying annotations only: a fixed annotation is the sample's, judged.
    # Every annotation of a Job or Service here is a string, so every one of them varies.
    at = (*where, "annotations")
    total = sum(  # bytes of UTF-8, as the server counts them
        len(str(p[-1]).encode()) + len(v.encode()) for p, v in values.items() if p[:-1] == at
    )
    return total <= ANNOTATIONS_MOST


class Sampling(NamedTuple):
    """The objects dry-run (their indexes), and each other object's sample."""

    sent: list[int]
    sample_of: dict[int, int]
    shaped: dict[int, Shaped]


def sample(
    objects: Sequence[tuple[Resource, Mapping[str, Any]]], judged: Callable[[int], bool]
) -> Sampling:
    """Choose the objects to dry-run: those `judged(i)` (updates), the first of each shape, and any
    whose sample's verdict does not `carries` to it."""
    sent: list[int] = []
    sample_of: dict[int, int] = {}
    shaped: dict[int, Shaped] = {}
    first: dict[str, int] = {}
    for i, (resource, body) in enumerate(objects):
        if judged(i):
            sent.append(i)
            continue
        mine = shaped[i] = shape(resource, body)
        at = first.get(mine.key)
        if at is not None and carries(resource, shaped[at], mine):
            sample_of[i] = at
        else:
            first.setdefault(mine.key, i)
            sent.append(i)
    return Sampling(sent, sample_of, shaped)


def derived(answer: Mapping[str, Any], sample: Shaped, other: Shaped) -> dict[str, Any] | None:
    """`other`'s dry run as its sample's tells it; None when a place is not where the answer has."""
    obj: dict[str, Any] = json.loads(json.dumps(answer))
    for path, value in other.values.items():
        if sample.values.get(path) == value:
            continue
        holder: Any = obj
        for step in path[:-1]:
            holder = _step(holder, step)
            if holder is None:
                return None
        if _step(holder, path[-1]) is None:  # (a varying place holds a string, never None)
            return None
        holder[path[-1]] = value
    return obj


def _step(holder: Any, step: str | int) -> Any:
    if isinstance(holder, dict) and isinstance(step, str):
        return holder.get(step)
    if isinstance(holder, list) and isinstance(step, int) and step < len(holder):
        return holder[step]
    return None


class Expected(Mapping[tuple[str, str], dict[str, Any]]):
    """Each object's dry run, by key: judged by the server, or derived from its sample's when asked
    (seldom: an object made meanwhile by another apply, and --cleanup-after's owner)."""

    def __init__(
        self,
        judged: dict[tuple[str, str], dict[str, Any]],
        carried: dict[tuple[str, str], tuple[tuple[str, str], Shaped, Shaped]],
    ) -> None:
        self._judged = judged
        self._carried = carried  # key: (its sample's key, the sample's shape, its own)

    def __getitem__(self, key: tuple[str, str]) -> dict[str, Any]:
        if key in self._judged:
            return self._judged[key]
        by, sample_shape, own = self._carried[key]
        found = derived(self._judged[by], sample_shape, own) if by in self._judged else None
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[tuple[str, str]]:
        yield from self._judged
        yield from (k for k in self._carried if k not in self._judged)

    def __len__(self) -> int:
        return len(self._judged) + sum(k not in self._judged for k in self._carried)


Answer = tuple[Applied | None, str] | Exception
Carried = dict[tuple[str, str], tuple[tuple[str, str], Shaped, Shaped]]


def dry_runs(
    conn: Connection,
    wanted: Sequence[Manifest],
    live: Mapping[tuple[str, str], dict[str, Any]],
    *,
    force: bool,
    sampled: bool = False,
) -> tuple[list[tuple[Manifest, Answer]], Carried]:
    """The server's dry run of each manifest, `in_flight` at a time: each answer or error, in the
    render's order (a refusal said first stays first). `sampled`: of each object the run has and
    of one of each shape it would create only, with what derives each other object."""
    carried: Carried = {}
    if sampled:
        chosen = sample([(m.resource, m.body) for m in wanted], lambda i: wanted[i].key in live)
        carried = {
            wanted[i].key: (wanted[by].key, chosen.shaped[by], chosen.shaped[i])
            for i, by in chosen.sample_of.items()
        }
        wanted = [wanted[i] for i in chosen.sent]
    runs = [partial(_dry_run, conn, m, live, force=force) for m in wanted]
    with closing(in_order(runs, conn.settings.in_flight)) as answers:
        return list(zip(wanted, answers, strict=True)), carried


def maybe_there(answer: Answer) -> bool:
    """Whether a dry run says an object may be there: it has a resourceVersion, or no answer."""
    if isinstance(answer, Exception):
        return True
    applied, _ = answer
    return applied is not None and bool(
        (applied.object.get("metadata") or {}).get("resourceVersion")
    )


def names_held(conn: Connection, unlisted: Sequence[Manifest]) -> list[Manifest]:
    """Those of `unlisted` whose name an object holds: one list of names of each resource."""
    held = set()
    for resource in dict.fromkeys(m.resource for m in unlisted):
        listed = list_metadata(conn, resource)
        held |= {(resource.plural, object_name(obj)) for obj in listed.items}
    return [m for m in unlisted if m.key in held]


def judge_all(
    answers: Sequence[tuple[Manifest, tuple[Applied | None, str] | Exception]],
) -> list[tuple[Manifest, tuple[Applied | None, str]]]:
    """The dry runs judged in order: the first refusal is said; conflicts, all in one line."""
    judged = []
    conflicts: list[tuple[Manifest, ApplyConflict]] = []
    for m, answer in answers:
        if isinstance(answer, ApplyConflict):
            conflicts.append((m, answer))
        elif isinstance(answer, Exception):
            raise answer
        else:
            judged.append((m, answer))
    if conflicts:
        raise ClusterError(conflicts_line(conflicts))
    return judged


def conflicts_line(
    conflicts: Sequence[tuple[Manifest, ApplyConflict]], *, halfway: bool = False
) -> str:
    """The first conflict, how many objects met one, and kubectl's ways out."""
    first = str(conflicts[0][1])
    if len(conflicts) > 1:
        first += f"; and {len(conflicts) - 1} more: {some([m.ref for m, _ in conflicts[1:]])}"
    managers = list(dict.fromkeys(name for _, e in conflicts for name in e.managers))
    others = " and ".join(repr(name) for name in managers)
    return (
        f"{first}; {'' if halfway else 'nothing was applied: '}to take the fields over, apply again with "
        f"--force-conflicts; to leave them to {others}, remove them from the template "
        "(or write the value they have now, to share them)"
    )


def _dry_run(
    conn: Connection,
    m: Manifest,
    live: Mapping[tuple[str, str], dict[str, Any]],
    *,
    force: bool = False,
) -> tuple[Applied | None, str]:
    """The server's dry run of one manifest, and how it differs from the live object ('' if it may be applied)."""
    before = live.get(m.key)
    try:
        applied = apply(
            conn, m.resource, m.body, namespace=conn.namespace, dry_run=True, live=before,
            force=force,
        )  # fmt: skip
    except ApiError as e:
        if before is not None and e.status == 422 and "field is immutable" in str(e):
            fields = sorted(set(re.findall(r"\b(spec(?:\.\w+)+): Invalid value", str(e))))
            return None, _immutable(fields)
        raise
    if m.resource is JOBS and before is not None:
        old, new = _template(before), _template(applied.object)
        if old != new:  # a server that would take the change; the Job's pods would not follow it
            return None, "its pod template differs"
    return applied, ""


def _immutable(fields: Sequence[str]) -> str:
    if not fields:
        return "an immutable field differs"
    if fields == ["spec.template"]:
        return "its pod template differs"
    return f"immutable {', '.join(fields)} " + ("differ" if len(fields) > 1 else "differs")


def _template(job: Mapping[str, Any]) -> Any:
    return (job.get("spec") or {}).get("template")


def groups(wanted: Sequence[Manifest], owner_first: bool) -> list[list[int]]:
    """The manifests' indices in the groups above, each group in the render's order."""
    found: list[list[int]] = []
    for i, m in enumerate(wanted):
        alone = owner_first and i <= 1
        if not found or alone or m.resource is not wanted[i - 1].resource:
            found.append([])
        found[-1].append(i)
    jobs = [i for i, m in enumerate(wanted) if m.resource is JOBS]
    leads = {jobs[n] for n in deciding_jobs([wanted[i].body for i in jobs])}
    split: list[list[int]] = []
    for group in found:
        first = [i for i in group if i in leads]
        rest = [i for i in group if i not in leads]
        split.extend(g for g in (first, rest) if g)
    return split


def deciding_jobs(jobs: Sequence[Mapping[str, Any]], named: Iterable[str] = ()) -> set[int]:
    """The indices of the Jobs whose success is the run's; `named`: the run's other tasks."""
    from simpletfjob.runs.annotations import read_min_workers, read_policy, task_name
    from simpletfjob.runs.objects import run_framework

    names = [task_name(job) for job in jobs]
    floor, _ = read_min_workers(jobs)
    fw = run_framework(jobs, elastic=floor is not None)
    policy, _ = read_policy(jobs)
    decide = set(fw.deciding(policy, [*(n for n in names if n), *named]))
    return {i for i, name in enumerate(names) if name and name in decide}


def only_deciding(jobs: Sequence[Mapping[str, Any]], named: Iterable[str]) -> bool:
    """Whether every one of a run's Jobs (as listed) decides its success, of the tasks `named`."""
    return bool(jobs) and len(deciding_jobs(jobs, named)) == len(jobs)


def being_applied(ended: Run, jobs: Sequence[Mapping[str, Any]], named: Iterable[str]) -> bool:
    """Whether a run judged ended is one an apply was making or left cut short: a deciding Job
    missing, only deciding Jobs there, none ended. (A worker deleted where every Job decides, or
    a cleanup cut short, look the same.)"""
    from simpletfjob.runs.state import DELETED

    finished = any(task.finished for task in ended.tasks)
    return ended.reason == DELETED and not finished and only_deciding(jobs, named)
