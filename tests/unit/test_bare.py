"""A template of text and bare `<<name>>` only, rendered without jinja: the same bytes, the
same errors, as jinja's render of it (template/bare.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simpletfjob.errors import TemplateError
from simpletfjob.template import compiled
from simpletfjob.template.compiled import CompiledTemplate
from simpletfjob.template.sandbox import make_environment
from tests.conftest import EXAMPLES, ROOT

HOSTS = "h1,h2,h3,h4,h5,h6,h7"


def run(cli: Any, args: list[str], jinja: bool) -> Any:
    """The command in-process (conftest's `cli`), every template through jinja or the bare
    ones without it."""
    with pytest.MonkeyPatch.context() as patch:
        if jinja:
            patch.setattr(compiled, "bare_template", lambda text, known: None)
        return cli(*args)


def test_a_bare_template_renders_without_importing_jinja() -> None:
    code = (
        "import sys\n"
        "from simpletfjob.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "finally:\n"
        "    print('jinja2' in sys.modules)\n"
    )
    args = [str(EXAMPLES / "mnist" / "mnist.yaml"), "--nodes", "h1,h2,h3", "-o", "-"]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("\nFalse\n")
    assert "name: mnist-worker-1" in done.stdout


def test_the_examples_render_the_same_bytes_either_way(cli: Any) -> None:
    templates = [*EXAMPLES.glob("*.yaml"), *EXAMPLES.glob("*/*.yaml")]
    for template in sorted(t for t in templates if t.name != "expected.yaml"):
        args = [str(template), "--nodes", HOSTS, "--psn", "2", "-o", "-"]
        bare = run(cli, args, jinja=False)
        assert bare == run(cli, args, jinja=True), template


def test_the_built_in_templates_render_the_same_bytes_either_way(cli: Any) -> None:
    from simpletfjob.template.catalog import builtin_names

    for name in builtin_names():
        for extra in ([], ["--tasks-per-host", "2", "--network", "pod"]):
            args = [name, "--nodes", HOSTS, *extra, "-o", "-"]
            bare = run(cli, args, jinja=False)
            assert bare.code == 0, bare.err
            assert bare == run(cli, args, jinja=True), (name, extra)


def outcome(
    source: str, known: list[str], context: Mapping[str, Any], jinja: bool
) -> tuple[str, ...]:
    """What compiling and rendering gives: its text and the names it reads, or its error."""
    with pytest.MonkeyPatch.context() as patch:
        if jinja:
            patch.setattr(compiled, "bare_template", lambda text, known: None)
        try:
            template = CompiledTemplate(source, "t.yaml", known, placed=("TF_CONFIG",))
            read = sorted(template.value_paths())
            bare = template.writes_bare(["index", "host"])
            text = template.render(context)
        except TemplateError as e:
            return ("error", str(e))
    return ("text", text, repr(read), repr(bare), repr(sorted(template.referenced)))


# Names known or not, and names jinja reads as constants or binds itself.
NAMES = ["index", "host", "TF_CONFIG", "x", "_y2", "unknown", "true", "None", "self", "not"]
NAMES += ["false", "True", "none", "if", "in", "loop", "caller", *make_environment().globals]
SPACE = st.text(" \t\n", max_size=2)
PLAIN = st.sampled_from(NAMES[:5])
REFERENCE = st.builds("<<{}{}{}>>".format, SPACE, PLAIN | PLAIN | st.sampled_from(NAMES), SPACE)
TEXT = st.text("ab <>{}%#-+'\"\n\t\\:", max_size=6)
VALUE = st.one_of(
    st.text(max_size=5),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2),
)


@settings(max_examples=400, deadline=None)
@given(
    pieces=st.lists(st.one_of(TEXT, REFERENCE, REFERENCE), max_size=8),
    unknown=st.lists(st.sampled_from(NAMES), max_size=2),
    values=st.lists(VALUE, min_size=len(NAMES), max_size=len(NAMES)),
    not_given=st.lists(st.sampled_from(NAMES), max_size=1),
)
def test_a_bare_render_is_jinja_s_render(
    pieces: list[str], unknown: list[str], values: list[Any], not_given: list[str]
) -> None:
    source = "".join(pieces)
    known = [name for name in NAMES if name not in unknown]
    context = {name: v for name, v in zip(NAMES, values, strict=True) if name not in not_given}
    bare = outcome(source, known, context, jinja=False)
    assert bare == outcome(source, known, context, jinja=True)


@pytest.mark.parametrize(
    "source",
    [
        "a: <<index>>\nb: << host >>\n",
        "<<<index>>",
        "<<index>>>",
        "<<index>><<host>>",
        "a: <<index>>\n\n",
        "<<\n index\n>>-<<host>>",
        "<<- index>> <<host ->>",
        "<<index>> {# #} <<host>>",
    ],
)
@pytest.mark.parametrize(
    "context",
    [{"index": 3, "host": "h"}, {"index": None, "host": [1, {"a": "b"}]}, {"index": 1.5}],
)
def test_bare_references_render_as_jinja_renders_them(source: str, context: dict[str, Any]) -> None:
    known = ["index", "host"]
    bare = outcome(source, known, context, jinja=False)
    assert bare == outcome(source, known, context, jinja=True)


def test_an_unknown_name_gives_jinja_s_one_line_error() -> None:
    bare = outcome("a: <<index>>\nb: <<hots>>\n", ["index", "host"], {}, jinja=False)
    assert bare == outcome("a: <<index>>\nb: <<hots>>\n", ["index", "host"], {}, jinja=True)
    assert bare[1].startswith("t.yaml:2: 'hots' is undefined; give it with --set hots=VALUE")


def test_a_name_known_but_not_given_fails_as_jinja_fails() -> None:
    bare = outcome("a: <<index>>\nb: <<host>>\n", ["index", "host"], {"index": 1}, jinja=False)
    assert bare == outcome(
        "a: <<index>>\nb: <<host>>\n", ["index", "host"], {"index": 1}, jinja=True
    )
    assert bare == (
        "error",
        "t.yaml:2: 'host' is undefined; give it with --set host=VALUE or -f values.yaml",
    )


@pytest.mark.parametrize("name", NAMES)
def test_each_name_renders_as_jinja_renders_it(name: str) -> None:
    context = {n: f"<{n}>" for n in NAMES}
    bare = outcome(f"a: <<{name}>>\n", NAMES, context, jinja=False)
    assert bare == outcome(f"a: <<{name}>>\n", NAMES, context, jinja=True)
