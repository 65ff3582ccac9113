"""A template's render is bounded: loops, calls, big numbers and strings, text, memory, CPU time.

The bounds that a single hostile template hits within a second are in the
error table (tests/error_table.py, the jinja rows), run as the console script. Here:
the CPU-time backstop, with a budget made small for the test; that the memory cap
and the CPU alarm never outlive a render; and templates near the bounds that
must still render.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.template import sandbox
from tests.conftest import assert_one_line_error, write

JOB = "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n"


def render(cli: Any, tmp_path: Path, body: str, *args: str) -> Any:
    write(tmp_path / "t.yaml", JOB + body)
    return cli("t.yaml", "--nodes", "a,b", "-o", "-", *args, cwd=tmp_path)


def test_the_cpu_time_of_all_renders_together_is_bounded(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work that no count sees (a filter's own loop, called again and again) meets the CPU budget."""
    monkeypatch.setattr(sandbox, "CPU_SECONDS", 0.3)
    body = "{% for i in range(100000) %}{% set x = range(2000) | map('string') | join %}{% endfor %}v: 1\n"
    result = render(cli, tmp_path, body)
    assert_one_line_error(
        result,
        1,
        r"t.yaml:4: rendering and checking the template takes more than 0.3 s of CPU time in all",
    )
    # The alarm is disarmed once the render has stopped: nothing fires later in the process.
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_the_budget_is_for_the_whole_run(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget that two tasks' renders fit in three times over is not enough for twenty.

    The template reads the task's index in an expression, so each task is rendered on
    its own (one that only writes its values out is rendered once per role: skeleton.py).
    """
    body = "{% for i in range(200 + index * 0) %}{% set x = range(500) | map('string') | join %}{% endfor %}v: 1\n"
    write(tmp_path / "t.yaml", JOB + body)
    started = time.process_time()
    assert cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path).code == 0
    two = time.process_time() - started
    monkeypatch.setattr(sandbox, "CPU_SECONDS", 3 * two)
    assert cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path).code == 0
    hosts = ",".join(f"h{i}" for i in range(20))
    result = cli("t.yaml", "--nodes", hosts, "-o", "-", cwd=tmp_path)
    assert_one_line_error(result, 1, r"s of CPU time in all")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="the memory cap needs /proc")
def test_the_memory_cap_is_lifted_after_the_render(cli: Any, tmp_path: Path) -> None:
    import resource

    before = resource.getrlimit(resource.RLIMIT_AS)
    result = render(cli, tmp_path, "v: << 'x' | center(10**10) >>\n")
    assert_one_line_error(
        result, 1, r"t.yaml:4: the template needs more than 512 MiB of memory for one task"
    )
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert render(cli, tmp_path, "v: << 'x' * 1000 >>\n").code == 0


LINUX = Path("/proc/self/statm").exists()


@pytest.mark.skipif(not LINUX, reason="the memory cap needs /proc")
def test_checking_a_tasks_yaml_is_within_the_memory_cap(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small text can hold millions of YAML nodes: composing them is bounded with the render."""
    import resource

    before = resource.getrlimit(resource.RLIMIT_AS)
    monkeypatch.setattr(sandbox, "MEMORY", 16 << 20)
    result = render(cli, tmp_path, "v: [" + ",".join(["1"] * 1_000_000) + "]\n")
    assert_one_line_error(
        result, 1, r"^simpletfjob: error: t.yaml: the template needs more than 16 MiB of memory"
    )
    assert resource.getrlimit(resource.RLIMIT_AS) == before


@pytest.mark.skipif(not LINUX, reason="the memory cap needs /proc")
def test_a_limit_of_the_users_own_is_put_back(cli: Any, tmp_path: Path) -> None:
    """Under `ulimit -v`, the user's limit is what the process has after the render."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, hard))
        result = render(cli, tmp_path, "v: << 'x' | center(10**11) >>\n")
        assert resource.getrlimit(resource.RLIMIT_AS) == (8 << 30, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert_one_line_error(result, 1, r"t.yaml:4: the template needs more than 512 MiB")


def test_every_level_of_a_recursive_loop_is_counted(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`loop(...)` starts the next level with an iterable of its own: it is counted too."""
    monkeypatch.setattr(sandbox, "MAX_ITERATIONS", 1000)
    body = (
        "{% for x in range(10) recursive %}{% if loop.depth < 4 %}<<loop(range(10))>>"
        "{% endif %}{% endfor %}v: 1\n"
    )
    result = render(cli, tmp_path, body)
    assert_one_line_error(result, 1, r"t.yaml:4: the template loops more than 1,000 times")
    monkeypatch.setattr(sandbox, "MAX_ITERATIONS", 12_000)  # 10 + 100 + 1000 + 10,000
    assert render(cli, tmp_path, body).code == 0


def test_calls_are_counted(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "MAX_CALLS", 100)
    body = "{% macro f() %}{% endmacro %}{% for i in range(101) %}<<f()>>{% endfor %}v: 1\n"
    assert_one_line_error(
        render(cli, tmp_path, body), 1, r"t.yaml:4: the template makes more than 100 calls"
    )


def test_the_text_of_all_tasks_together_is_bounded(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every task's text is held until all are checked, so their sum is bounded too."""
    monkeypatch.setattr(sandbox, "MAX_TOTAL_TEXT", 20_000)
    body = "v: '" + "x" * 3000 + "'\n"
    assert render(cli, tmp_path, body).code == 0
    result = cli("t.yaml", "--nodes", ",".join(f"h{i}" for i in range(8)), "-o", "-", cwd=tmp_path)
    assert_one_line_error(
        result, 1, r"t.yaml: the template's renders come to more than 0 MiB of text in all"
    )


def test_compiling_is_within_the_cpu_time(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "CPU_SECONDS", 0.0)
    result = render(cli, tmp_path, "v: 1\n")
    assert_one_line_error(
        result, 1, r"t.yaml: rendering and checking the template takes more than 0 s"
    )


@pytest.mark.parametrize(
    ("body", "value"),
    [
        # Loops and calls that a real template makes, far below the counts.
        ("{% for i in range(100000) %}{% endfor %}v: << range(3)|list >>\n", [0, 1, 2]),
        ("{% macro f(n) %}<<n>>{% endmacro %}v: <<f(7)>>\n", 7),
        ("v: << 2 ** 1000 >>\n", 2**1000),
        ("v: << 'ab' * 1000 >>\n", "ab" * 1000),
        ("v: << [1] * 3 >>\n", [1, 1, 1]),
        ("v: << 2.5 * 2 >>\n", 5.0),
        ("v: << 10 ** -2 >>\n", 0.01),
        ("v: {% for x in {'a': 1, 'b': 2} %}<<x>>{% endfor %}\n", "ab"),
        (
            "{% for x in [[1], [2, [3]]] recursive %}{% if x is iterable %}<<loop(x)>>"
            "{% endif %}{% endfor %}v: 1\n",
            1,
        ),
    ],
)
def test_templates_within_the_bounds_render(
    cli: Any, tmp_path: Path, body: str, value: Any
) -> None:
    result = render(cli, tmp_path, body, "--no-labels")
    assert result.code == 0, result.err
    assert [d["v"] for d in result.docs] == [value, value]


def test_a_loop_keeps_its_loop_variable(cli: Any, tmp_path: Path) -> None:
    """Counting iterations does not change what `loop` says."""
    body = (
        "v: [{% for x in ['a', 'b', 'c'] %}"
        "<<loop.index>>/<<loop.length>><< ',' if not loop.last >>{% endfor %}]\n"
    )
    result = render(cli, tmp_path, body, "--no-labels")
    assert result.code == 0, result.err
    assert [d["v"] for d in result.docs] == [["1/3", "2/3", "3/3"]] * 2


def test_binop_checks() -> None:
    sandbox.check_binop("*", "x", 1000)
    sandbox.check_binop("*", 3, [0])
    sandbox.check_binop("**", 2, sandbox.MAX_INT_BITS)
    sandbox.check_binop("**", 1, 10**100)
    sandbox.check_binop("**", -1, 10**100)
    sandbox.check_binop("**", 0, 10**100)
    for operator, left, right in [
        ("*", "x", sandbox.MAX_TEXT + 1),
        ("*", sandbox.MAX_TEXT + 1, ["x"]),
        ("*", 2**60000, 2**60000),
        ("**", 3, 2 * sandbox.MAX_INT_BITS),
        ("**", -10, 10**9),
        ("**", 10**4000, 10**5000),  # too long to show: the message says 'a power'
    ]:
        with pytest.raises(sandbox.RenderLimit):
            sandbox.check_binop(operator, left, right)


def test_no_constant_is_folded_at_compile_time(tmp_path: Path) -> None:
    """A constant expression is computed when rendered, within the bounds, not when compiled."""
    from simpletfjob.frameworks import TASK_VARIABLES, framework
    from simpletfjob.template.compiled import CompiledTemplate

    known = [*TASK_VARIABLES, *framework().variables]
    compiled = CompiledTemplate(JOB + "v: << 'x' | center(10**10) >>\n", "t.yaml", known)
    assert compiled is not None  # compiling did not compute it


@pytest.mark.parametrize(
    ("use", "said"),
    [
        ("<< [1, 2] | random >>", r"template syntax error: No filter named 'random'\."),
        ("<< lipsum(1) >>", r"'lipsum' is undefined"),
    ],
)
def test_nothing_is_drawn_at_random(cli: Any, tmp_path: Path, use: str, said: str) -> None:
    """The same inputs always give the same bytes: jinja's random filter and lipsum are not
    there (a render once per role would also have given every worker the same draw)."""
    assert_one_line_error(render(cli, tmp_path, f"v: {use}\n"), 1, rf"t.yaml:4: {said}")
