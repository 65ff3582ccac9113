"""The package's shape: which package may import which, no cycles, short modules, and the client kept apart."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "simpletfjob"
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def tree(path: Path) -> list[ast.AST]:
    """The module's syntax nodes, parsed once for every test here."""
    return list(ast.walk(ast.parse(path.read_text())))


NAMES = frozenset(module_name(p) for p in MODULES)


@functools.cache
def imports(path: Path, typing: bool = True) -> frozenset[str]:
    """Every module this one imports, at its top or inside a function; with `typing=False`,
    not those under `if TYPE_CHECKING:`, which are never imported when it runs.

    `from PACKAGE import NAME` imports the module PACKAGE.NAME when there is one, and
    otherwise reads NAME from the package: only then is the package itself an import (its
    `__init__` runs anyway, before any of its modules). A module's name written as a string
    (`import_module("simpletfjob.cli.render")`, the package's lazy public names) is an import.
    """
    found: set[str] = set()
    package = (
        module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    )
    skipped: set[int] = set()
    if not typing:
        for node in tree(path):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                skipped.update(id(inner) for child in node.body for inner in ast.walk(child))
    for node in tree(path):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                )
            named = {f"{base}.{alias.name}" for alias in node.names}
            found.update(named)
            if not named <= NAMES:
                found.add(base)
        elif isinstance(node, ast.Constant) and node.value in NAMES and "." in node.value:
            found.add(node.value)
    return frozenset(found)


def graph() -> dict[str, set[str]]:
    """Which module imports which: at its top, inside a function (a lazy import), by its
    name as a string, or under `if TYPE_CHECKING:` (a type-only import), each an edge.

    A module's parents, which Python imports before it, are no edge of their own; a name
    read from the package itself is (`from simpletfjob import __version__` reaches the
    package, whose public names, read lazily, import the API, which imports the rest).
    """
    return {
        module_name(p): {i for i in imports(p) if i in NAMES} - {module_name(p)} for p in MODULES
    }


def test_no_module_is_longer_than_600_lines() -> None:
    long = {module_name(p): n for p in MODULES if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def test_there_is_no_import_cycle() -> None:
    edges = graph()
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for other in sorted(edges[name]):
            if state.get(other) == 1:
                pytest.fail("import cycle: " + " -> ".join([*path, name, other]))
            if other not in state:
                visit(other, [*path, name])
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [])


# The modules at the top of the package: names and helpers that many packages need, each
# importing nothing heavy and no package of simpletfjob.
BASE = frozenset(
    {
        "_version",
        "errors",
        "identity",
        "streams",
        "inputs",
        "yamlload",
        "quantity",
        "output",
        "tasks",
    }
)

# Which package (or base module) may import which, beside the base modules and the version.
# The order of this table is the order of the layers: each reads only what is above it,
# but that options/ and frameworks/ know each other (a framework declares its options with
# options/table.py; options/render.py combines the framework's group with the core's).
ALLOWED: dict[str, frozenset[str]] = {
    "kube": frozenset(),
    "hosts": frozenset({"kube"}),
    "frameworks": frozenset({"hosts", "options"}),
    "options": frozenset({"hosts", "frameworks"}),
    "template": frozenset({"frameworks", "options"}),
    "manifest": frozenset({"frameworks", "options", "template"}),
    "plan": frozenset({"kube", "hosts", "frameworks", "options", "template", "manifest"}),
    "runs": frozenset({"kube", "hosts", "frameworks", "options"}),
    # The Python API: the same layers as the commands, without click.
    "api": frozenset(
        {"kube", "hosts", "frameworks", "options", "template", "manifest", "plan", "runs"}
    ),
    "cli": frozenset(
        {"kube", "hosts", "frameworks", "options", "template", "manifest", "plan", "runs"}
    ),
    "__main__": frozenset({"cli"}),
    # The package itself: its public names, from the API, read lazily (PEP 562).
    "": frozenset({"api"}),
}


def unit(name: str) -> str:
    """The package (or base module) a module belongs to: `simpletfjob.hosts.nodes` -> hosts."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_each_package_imports_only_the_layers_it_may() -> None:
    names = {module_name(p) for p in MODULES}
    assert {unit(n) for n in names} - {""} <= BASE | set(ALLOWED), "a package the table lacks"
    wrong = []
    for path in MODULES:
        name = module_name(path)
        mine = unit(name)
        above = ALLOWED.get(mine, frozenset())
        for other in sorted(i for i in imports(path) if i in names):
            if unit(other) not in BASE | above | {mine, ""}:
                wrong.append(f"{name} imports {other}")
    assert wrong == []


def test_pyproject_lists_every_package() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'^\s*"(simpletfjob(?:\.\w+)*)",$', text, re.M))
    found = {module_name(p) for p in MODULES if p.name == "__init__.py"}
    assert found <= listed


def test_only_the_command_layer_imports_click_or_the_plan() -> None:
    """The command line and the Python API are the plan's only users; only the command line's of click."""
    for path in MODULES:
        name = module_name(path)
        if name.startswith("simpletfjob.cli"):
            continue
        found = imports(path)
        assert not any(i == "click" or i.startswith("click.") for i in found), name
        if not name.startswith(("simpletfjob.plan", "simpletfjob.api")):
            assert not any(i.startswith("simpletfjob.plan") for i in found), name


def test_only_the_cluster_layer_imports_the_kubernetes_client() -> None:
    for path in MODULES:
        name = module_name(path)
        found = {i.split(".")[0] for i in imports(path)}
        if found & {"kubernetes", "urllib3"}:
            assert name.startswith(("simpletfjob.kube", "simpletfjob.hosts.cluster")), name


@functools.cache
def help_lines(path: Path) -> frozenset[int]:
    """The lines of help text: `help=` values, and the docstrings of the commands."""
    lines: set[int] = set()
    for node in tree(path):
        if isinstance(node, ast.keyword) and node.arg == "help":
            lines.update(range(node.value.lineno, (node.value.end_lineno or 0) + 1))
        if module_name(path).startswith("simpletfjob.cli") and isinstance(node, ast.FunctionDef):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                lines.update(range(doc.lineno, (doc.end_lineno or 0) + 1))
    return frozenset(lines)


@pytest.mark.parametrize("word", ["TF_CONFIG", "ClusterSpec"])
def test_only_the_tensorflow_framework_names_its_config(word: str) -> None:
    """Elsewhere the word may stand in help text only: not in code, messages or comments."""
    for path in MODULES:
        name = module_name(path)
        if name == "simpletfjob.frameworks.tensorflow":
            continue
        allowed = help_lines(path)
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            assert word not in line or number in allowed, f"{name}:{number}: {line.strip()}"


# A role, or a task of one ('chief-0', 'worker-' + index), written as a string of its own.
ROLE_NAME = re.compile(r"(chief|ps|worker|evaluator)(-\d*)?")


def docstring_nodes(path: Path) -> set[int]:
    """The ids of the module's, classes' and functions' docstrings."""
    found: set[int] = set()
    for node in tree(path):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_runs_and_the_plan_name_no_role() -> None:
    """Which task decides, the role order and each framework's defaults are the framework's
    (frameworks/): runs/ and plan/ ask it, and write no role in their code (docstrings and
    comments aside), f-strings' parts included."""
    found = []
    for path in MODULES:
        name = module_name(path)
        if not name.startswith(("simpletfjob.runs", "simpletfjob.plan")):
            continue
        docs = docstring_nodes(path)
        for node in tree(path):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if id(node) not in docs and ROLE_NAME.fullmatch(node.value.strip()):
                found.append(f"{name}:{node.lineno}: {node.value!r}")
    assert found == []


def test_each_protocol_is_declared_once() -> None:
    """A shape that several modules read (the plan's, for apply and run) is declared in one
    place and imported, so that the copies cannot drift apart."""
    where: dict[str, list[str]] = {}
    for path in MODULES:
        for node in tree(path):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(base).endswith("Protocol") for base in node.bases
            ):
                where.setdefault(node.name, []).append(module_name(path))
    assert {name: found for name, found in where.items() if len(found) > 1} == {}
