"""The package's shape: the flow reads from the file list, and nothing imports the layer above it."""

from __future__ import annotations

import ast
import functools
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


@functools.cache
def imports(path: Path) -> frozenset[str]:
    """Every module this one imports, at its top or inside a function."""
    found: set[str] = set()
    package = (
        module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    )
    for node in tree(path):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                )
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(found)


def graph() -> dict[str, set[str]]:
    names = {module_name(p) for p in MODULES}
    return {
        module_name(p): {i for i in imports(p) if i in names} - {module_name(p)} for p in MODULES
    }


def test_no_module_is_longer_than_450_lines() -> None:
    long = {module_name(p): n for p in MODULES if (n := len(p.read_text().splitlines())) > 450}
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


def test_only_the_command_layer_imports_click_or_the_plan() -> None:
    for path in MODULES:
        name = module_name(path)
        if name.startswith("simpletfjob.cli"):
            continue
        found = imports(path)
        assert not any(i == "click" or i.startswith("click.") for i in found), name
        assert "simpletfjob.plan" not in found, name


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
