"""What runs/ reads of a plan, declared once for apply.py and run.py.

A plan is plan.Plan, which only the commands and the Python API import: runs/ sits beside
plan/, not above it, so it names the plan's shape here instead (its run's name, how to
rename it, its tasks and documents, and its framework), and plan.Plan fits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["P", "Plan", "PlannedDocument", "PlannedTask"]


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
