"""How pytest-xdist hands the tests to its workers: `--dist loadgroup`, with groups of our own.

A work unit goes to one worker whole. A test is a unit of its own, except that the tests of a
module that defines a module-, package- or class-scoped fixture form one unit: such a fixture
(a control plane of the module's own, the error table's process rows run together) is set up
once on each worker that runs one of its tests, so spread over three workers it would be set
up three times. Session fixtures are per worker by design and make no group. Units with more
tests go first (pytest-xdist's order), then the tests in the order of the collection, which
tests/conftest.py gives (tests marked `slow` first).

pytest-xdist's own loadgroup reads `xdist_group` marks from node ids that its workers rewrite,
which pytest 9.2 no longer lets them do (pytest-xdist issue 1386), and the controller that
schedules never collects, so it cannot see marks or fixtures: the modules that share a fixture
are found here from their source. A node id that still carries an `@group` is grouped by it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from xdist.scheduler import LoadGroupScheduling

if TYPE_CHECKING:
    from xdist.remote import Producer

SHARED_SCOPES = frozenset({"module", "package", "class"})


def defines_shared_fixture(source: str) -> bool:
    """Whether a module's source defines a fixture whose scope is wider than a test and
    narrower than the session (`@pytest.fixture(scope="module")` and the like)."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            if not isinstance(decorator, ast.Call):
                continue
            name = ast.unparse(decorator.func)
            if name not in ("pytest.fixture", "fixture"):
                continue
            for keyword in decorator.keywords:
                value = keyword.value
                if (
                    keyword.arg == "scope"
                    and isinstance(value, ast.Constant)
                    and value.value in SHARED_SCOPES
                ):
                    return True
    return False


class ModuleGroupScheduling(LoadGroupScheduling):
    """pytest-xdist's loadgroup, where a module that shares a fixture is one group."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self._root = Path(config.rootpath)

    @functools.cache  # noqa: B019 -- one scheduler a run; the cache lives as long as it
    def _shares_fixture(self, path: str) -> bool:
        try:
            return defines_shared_fixture((self._root / path).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return False

    def _split_scope(self, nodeid: str) -> str:
        scope = super()._split_scope(nodeid)
        if scope != nodeid:  # an xdist_group mark, where pytest-xdist could still apply it
            return scope
        path = nodeid.split("::", 1)[0]
        return path if "::" in nodeid and self._shares_fixture(path) else nodeid
