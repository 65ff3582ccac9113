"""What `status` and `wait` read back from the annotations on a run's Jobs: values that can be right.

render writes the success policy on every document, and `run` its restart limit and count
on every Job (identity.py names them); whoever may edit a Job can change them (`kubectl
annotate`). Each is read as what it can be:

- the success policy: one of identity.SUCCESS_POLICIES, the same on every Job that has it
  (none at all: worker0, as render defaults);
- an elastic run's min-workers: a whole count of at least 1, the same on every Job (none:
  not elastic);
- the restarts: whole counts, the limit at most MOST_RESTARTS (as `--max-restarts`), the
  count at most the limit, each the same on every Job (none at all: not applied by `run`);
  beside them, the restarts in a row without progress (budget.py), which the limit bounds in
  place of the count: at most the limit and the count (none: every restart counted).

A value that cannot be right is not printed as if it were, nor acted on: it is flagged in
words that name the annotation, the Job and what is wrong (a number too long to be a count
is not repeated). Plain dicts in, pure: state.py asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simpletfjob.identity import (
    MAX_RESTARTS_ANNOTATION,
    MIN_WORKERS_ANNOTATION,
    MOST_RESTARTS,
    POLICY_ANNOTATION,
    RESTARTS_ANNOTATION,
    RESTARTS_WITHOUT_ANNOTATION,
    SUCCESS_POLICIES,
)
from simpletfjob.tasks import MAX_TASKS

DEFAULT_POLICY = "worker0"


@dataclass(frozen=True)
class Restarts:
    """The whole-run restarts so far and their limit; `wrong` says why they cannot be known."""

    done: int = 0
    limit: int = 0
    wrong: str = ""  # then done and limit are 0: nothing is known of them
    in_a_row: int | None = None  # those in a row without progress; None: each counted (= done)


KEYS = (
    POLICY_ANNOTATION,
    MIN_WORKERS_ANNOTATION,
    MAX_RESTARTS_ANNOTATION,
    RESTARTS_ANNOTATION,
    RESTARTS_WITHOUT_ANNOTATION,
)


@dataclass(frozen=True)
class Found:
    """What values_of read: for each of KEYS, each value given, with the Jobs that give it."""

    values: Mapping[str, Mapping[str, list[str]]]


def _annotations(job: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    metadata = job.get("metadata")
    if not isinstance(metadata, (dict, Mapping)):
        return "", {}
    found = metadata.get("annotations")
    return str(metadata.get("name") or ""), found if isinstance(found, (dict, Mapping)) else {}


def values_of(jobs: Iterable[Mapping[str, Any]]) -> Found:
    """What the Jobs give each of KEYS, with the Jobs that give it, in the Jobs' order: one pass
    over the Jobs for every reading below."""
    found: dict[str, dict[str, list[str]]] = {key: {} for key in KEYS}
    for job in jobs:
        name, annotations = _annotations(job)
        for key in KEYS:
            if key in annotations:
                found[key].setdefault(str(annotations[key]), []).append(name)
    return Found(found)


def _values(jobs: Iterable[Mapping[str, Any]] | Found, key: str) -> Mapping[str, list[str]]:
    """Each value the Jobs give `key` (or what values_of found), with the Jobs that give it."""
    return (jobs if isinstance(jobs, Found) else values_of(jobs)).values[key]


def _disagree(key: str, found: Mapping[str, list[str]]) -> str:
    each = ", ".join(f"{_said(value)} on job {jobs[0]}" for value, jobs in found.items())
    return f"the Jobs disagree on {key}: {each}"


def _said(value: str) -> str:
    """A value as a message may quote it: short and on one line, else not at all."""
    return repr(value) if len(value) <= 24 and value.isprintable() else "a value too long to show"


def read_policy(jobs: Iterable[Mapping[str, Any]] | Found) -> tuple[str, str]:
    """The run's success policy and '', or the default and why what the Jobs say cannot be right."""
    found = {value: names for value, names in _values(jobs, POLICY_ANNOTATION).items() if value}
    if not found:
        return DEFAULT_POLICY, ""  # a run applied without one
    for value, names in found.items():
        if value not in SUCCESS_POLICIES:
            return DEFAULT_POLICY, (
                f"{POLICY_ANNOTATION} on job {names[0]} is {_said(value)}, not a success "
                f"policy ({' or '.join(SUCCESS_POLICIES)})"
            )
    if len(found) > 1:
        return DEFAULT_POLICY, _disagree(POLICY_ANNOTATION, found)
    return next(iter(found)), ""


def read_min_workers(jobs: Iterable[Mapping[str, Any]] | Found) -> tuple[int | None, str]:
    """An elastic run's --min-workers and '', or None and why what the Jobs say cannot be right."""
    found = _values(jobs, MIN_WORKERS_ANNOTATION)
    if not found:
        return None, ""
    for value, names in found.items():
        count = _count(value, MAX_TASKS)
        if isinstance(count, str) or count < 1:
            wrong = count if isinstance(count, str) else "is 0, not a count of workers"
            return None, f"{MIN_WORKERS_ANNOTATION} on job {names[0]} {wrong}"
    if len(found) > 1:
        return None, _disagree(MIN_WORKERS_ANNOTATION, found)
    return int(next(iter(found))), ""


def _count(value: str, most: int) -> int | str:
    """A count written as `run` writes it ('3'), or what is wrong with it."""
    if not (value.isascii() and value.isdigit()):
        return f"is {_said(value)}, not a count"
    if len(value) > len(str(most)) or int(value) > most:  # no int() of 4300 digits
        return f"is more than {most:,}"
    return int(value)


def read_restarts(jobs: Iterable[Mapping[str, Any]] | Found) -> Restarts:
    """The restarts `run` recorded on the Jobs (see the module); Restarts() for a run it did not apply."""
    jobs = jobs if isinstance(jobs, Found) else values_of(jobs)
    limits = _values(jobs, MAX_RESTARTS_ANNOTATION)
    if not limits:
        return Restarts()
    counts = _values(jobs, RESTARTS_ANNOTATION)
    without = _values(jobs, RESTARTS_WITHOUT_ANNOTATION)
    read: dict[str, int] = {}
    for key, found in (
        (MAX_RESTARTS_ANNOTATION, limits),
        (RESTARTS_ANNOTATION, counts),
        (RESTARTS_WITHOUT_ANNOTATION, without),
    ):
        most = 10**6 if key == RESTARTS_ANNOTATION else MOST_RESTARTS  # (the limit bounds it)
        if not found and key == RESTARTS_WITHOUT_ANNOTATION:
            break
        if not found:
            return Restarts(wrong=f"the Jobs have {MAX_RESTARTS_ANNOTATION} but no {key}")
        for value, names in found.items():
            count = _count(value, most)
            if isinstance(count, str):
                return Restarts(wrong=f"{key} on job {names[0]} {count}")
        if len({_count(value, most) for value in found}) > 1:
            return Restarts(wrong=_disagree(key, found))
        read[key] = int(next(iter(found)))
    done, limit = read[RESTARTS_ANNOTATION], read[MAX_RESTARTS_ANNOTATION]
    in_a_row = read.get(RESTARTS_WITHOUT_ANNOTATION)
    counted, key = (done, RESTARTS_ANNOTATION) if in_a_row is None else (in_a_row, RESTARTS_WITHOUT_ANNOTATION)  # fmt: skip
    if counted > limit:
        return Restarts(wrong=f"{key} ({counted}) is more than {MAX_RESTARTS_ANNOTATION} ({limit})")
    if counted > done:
        return Restarts(wrong=f"{key} ({counted}) is more than {RESTARTS_ANNOTATION} ({done})")
    return Restarts(done, limit, in_a_row=in_a_row)
