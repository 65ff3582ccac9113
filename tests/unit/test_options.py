"""The option table: one declaration per option feeds click, the typed Options, headers and the checks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.cli.params import first_sentence, make_command
from simpletfjob.cli.render import command as render_command
from simpletfjob.errors import TemplateError, UsageError
from simpletfjob.frameworks.tensorflow import TensorFlowOptions
from simpletfjob.options.render import (
    ConnectionOptions,
    Options,
    check_options,
    header_fields,
    output_format,
    timeout,
)
from simpletfjob.options.rules import format_duration, parse_duration
from simpletfjob.options.table import (
    OneOf,
    OptionGroup,
    argument,
    fields,
    option,
    options_of,
)
from simpletfjob.template.catalog import parse_header
from tests.conftest import assert_one_line_error, write

BODY = "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n"


def click_params(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if p.name is not None}


# ---- one declaration, three consumers -------------------------------------------------------


def test_every_option_is_a_click_parameter_as_declared() -> None:
    params = click_params(render_command)
    for field, declared in options_of(Options):
        param = params[field.name]
        assert isinstance(param, click.Option), field
        assert param.opts == list(declared.flags), field
        if declared.negatable:
            assert param.secondary_opts == [f"--no-{f[2:]}" for f in declared.flags]
        # --help shows the first sentence of the declared help; the whole is on the command's page
        assert param.help == first_sentence(declared.help)
        assert declared.help.startswith(param.help) and len(param.help) <= 60, field
        assert param.multiple == declared.multiple
        expected_default = declared.default if not declared.multiple else ()
        if declared.parse is not None:  # click reads text (--port auto), as a user writes it
            expected_default = (declared.format or str)(declared.default)
        assert param.default == expected_default, field
    # Nothing on the command line that the table does not declare, except --version, --help
    # and --task (which of the planned documents render writes; apply and run have no such).
    declared_names = {f.name for f in fields(Options) if f.declaration is not None}
    assert set(params) - declared_names == {"version", "help", "task"}
    assert isinstance(params["template"], click.Argument)


def test_the_command_line_fills_each_field_of_the_same_name(cli: Any, tmp_path: Path) -> None:
    """A value given on the command line reaches its Options field (read back from the output)."""
    write(tmp_path / "t.yaml", BODY + "port: <<port>>\nps: '<<ps_hosts>>'\n")
    result = cli(
        "t.yaml",
        "--nodes",
        "a,b,c,d",
        "--port",
        "3000",
        "--psn",
        "2",
        "--chief",
        "--no-labels",
        "-o",
        "-",
        cwd=tmp_path,
    )
    assert result.code == 0, result.err
    docs = result.docs
    assert [d["metadata"]["name"] for d in docs] == ["t-chief-0", "t-ps-0", "t-ps-1", "t-worker-0"]
    assert {d["port"] for d in docs} == {3000}
    assert docs[0]["ps"] == "b:3000,c:3000"
    assert all("labels" not in d["metadata"] for d in docs)


# A valid value other than the default for every option a header may set.
HEADER_VALUES: dict[str, Any] = {
    "num": 2,
    "psn": 0,
    "port": 3000,
    "tasks_per_host": 2,
    "network": "pod",
    "chief": True,
    "evaluator": True,
    "evaluator_in_cluster": True,
    "framework": "pytorch",
    "nproc_per_node": 2,
    "min_workers": 2,
    "deadline": 300.0,
    "cleanup_after": 600.0,
    "restart_on": "disruption",
    "queue": "team",
    "progress_task": "worker-1",
    "progress_pattern": "step (?P<step>[0-9]+)",
    "stall_timeout": 60.0,
}


def test_a_header_sets_exactly_the_options_declared_for_it() -> None:
    table = header_fields()
    assert set(table) == {*HEADER_VALUES, "restart_exit_codes"}  # (written as text: below)
    for name, value in HEADER_VALUES.items():
        assert value != table[name].default
        for key in (name, name.replace("_", "-")):
            header = parse_header(
                f"# simpletfjob:\n#   options:\n#     {key}: {value!r}\n", "t.yaml"
            )
            assert header.options == {name: value}
    with pytest.raises(TemplateError) as raised:
        parse_header("# simpletfjob:\n#   options:\n#     nodes: a\n", "t.yaml")
    allowed = ", ".join(sorted(n.replace("_", "-") for n in table))
    assert str(raised.value).endswith(f"a header can set: {allowed}")


def test_a_header_default_reaches_the_options_field(cli: Any, tmp_path: Path) -> None:
    header = "# simpletfjob:\n#   options:\n#     chief: true\n#     psn: 0\n#     port: 3000\n"
    write(tmp_path / "t.yaml", header + BODY + "port: <<port>>\n")
    docs = cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path).docs
    assert [(d["metadata"]["name"], d["port"]) for d in docs] == [
        ("t-chief-0", 3000),
        ("t-worker-0", 3000),
    ]
    # The command line wins, even when it gives the option's own default.
    docs = cli("t.yaml", "--nodes", "a,b,c", "--psn", "1", "-o", "-", cwd=tmp_path).docs
    assert [d["metadata"]["name"] for d in docs] == ["t-chief-0", "t-ps-0", "t-worker-0"]


def test_a_header_gives_apply_and_run_their_limits_and_a_render_leaves_them_out(
    cli: Any, tmp_path: Path
) -> None:
    from simpletfjob.options.runs import ApplyOptions, RunOptions
    from simpletfjob.template.catalog import prepare_options

    header = "# simpletfjob:\n#   options:\n#     deadline: 5m\n#     cleanup-after: 1h\n"
    template = write(tmp_path / "t.yaml", header + BODY)
    for group in (ApplyOptions, RunOptions):
        options = prepare_options(group(template=str(template)), frozenset())
        assert (options.deadline, options.cleanup_after) == (300.0, 3600.0)
        # The command line wins.
        given = group(template=str(template), deadline=60.0)
        assert prepare_options(given, frozenset({"deadline"})).deadline == 60.0
    docs = cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path).docs
    assert docs and all("activeDeadlineSeconds" not in d.get("spec", {}) for d in docs)


def test_a_header_gives_run_what_it_restarts_and_the_command_line_wins(tmp_path: Path) -> None:
    from simpletfjob.options.runs import RunOptions
    from simpletfjob.template.catalog import prepare_options

    header = (
        "# simpletfjob:\n#   options:\n#     restart-on: disruption\n"
        "#     restart-exit-codes: 3,40-42\n"
    )
    template = write(tmp_path / "t.yaml", header + BODY)
    options = prepare_options(RunOptions(template=str(template)), frozenset())
    assert (options.restart_on, options.restart_exit_codes) == ("disruption", {3, 40, 41, 42})
    given = RunOptions(template=str(template), restart_on="failure", restart_exit_codes={7})
    mine = prepare_options(given, frozenset({"restart_on", "restart_exit_codes"}))
    assert (mine.restart_on, mine.restart_exit_codes) == ("failure", {7})


# ---- one rule, one wording --------------------------------------------------------------------

# Values that break each header option's rule.
BROKEN: dict[str, list[Any]] = {
    "num": [0, -2],
    "psn": [-1],
    "port": [0, 65536],
    "tasks_per_host": [0, -3],
    "network": ["hostx", "POD"],
    "framework": ["torch", "TensorFlow"],
    "nproc_per_node": [0, -1],
    "min_workers": [0, -1],
}
# Only `run` (and `apply`) have these on the command line: tests/error_table.py holds both wordings.
RUN_ONLY = {"restart_on", "queue", "progress_pattern", "stall_timeout"}


def test_every_rule_of_a_header_option_has_broken_values_here() -> None:
    ruled = {name for name, f in header_fields().items() if f.option and f.option.rule}
    assert ruled == set(BROKEN) | RUN_ONLY


@pytest.mark.parametrize(
    ("name", "value"), [(name, value) for name, values in BROKEN.items() for value in values]
)
def test_a_rule_reads_the_same_on_the_command_line_and_in_a_header(
    cli: Any, tmp_path: Path, name: str, value: Any
) -> None:
    declared = header_fields()[name].option
    assert declared is not None
    key = name.replace("_", "-")
    write(
        tmp_path / "t.yaml", f"# x\n# simpletfjob:\n#   options:\n#     {key}: {value!r}\n" + BODY
    )
    from_header = cli("t.yaml", "--nodes", "a,b", cwd=tmp_path)
    assert_one_line_error(from_header, 1, "")
    prefix = f"simpletfjob: error: t.yaml:4: option '{key}' in the template header "
    assert from_header.err.startswith(prefix)
    phrase = from_header.err.strip()[len(prefix) :]
    assert re.fullmatch(r"must be .+, not .+", phrase)

    from_command_line = cli(
        "t.yaml", "--nodes", "a,b", declared.flags[-1], str(value), cwd=tmp_path
    )
    assert from_command_line.err == f"simpletfjob: error: {declared.shown} {phrase}\n"
    assert from_command_line.code == 2
    assert from_command_line.out == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-N", "0"], "-N must be a positive number of hosts or -1 for all, not 0"),
        (["--psn", "-1"], "--psn must be 0 or more, not -1"),
        (["--gpus", "-1"], "--gpus must be 0 or more, not -1"),
        (["--port", "70000"], "--port must be between 1 and 65535, not 70000"),
        (["--tasks-per-host", "0"], "--tasks-per-host must be at least 1, not 0"),
        (["--network", "hostx"], "--network must be host or pod, not 'hostx'"),
        (["--address", "ip"], "--address must be name, internal-ip or hostname, not 'ip'"),
        (["-n", "Bad_"], "--namespace 'Bad_' is not a valid DNS name"),
        (["--namespace", "a.b"], "--namespace 'a.b' is not a valid namespace (a DNS label)"),
        (["--cluster-domain", "x_y"], "--cluster-domain 'x_y' is not a valid DNS name"),
        (["--name", ""], "--name must not be empty"),
        (["-l", "a in ("], "--selector 'a in (': cannot parse the label selector at 'a in ('"),
    ],
)
def test_a_broken_rule_on_the_command_line_is_one_line_before_anything_is_read(
    cli: Any, tmp_path: Path, args: list[str], message: str
) -> None:
    # The template does not exist: the option is reported first, as a usage error.
    result = cli("missing.yaml", "--nodes", "a,b", *args, cwd=tmp_path)
    assert (result.code, result.out, result.err) == (2, "", f"simpletfjob: error: {message}\n")


def test_options_made_in_code_are_checked_by_the_same_rules() -> None:
    options = Options(template="t.yaml")
    check_options(options)
    for changes, message in [
        ({"psn": -1}, "--psn must be 0 or more, not -1"),
        ({"network": "x"}, "--network must be host or pod, not 'x'"),
        ({"nodes": "a", "nodes_file": "f"}, "give --nodes or --nodes-file, not both"),
        ({"port": 65535, "tasks_per_host": 2}, "--port 65535 with 2 tasks per host goes past"),
        ({"nodes": "a", "context": "c"}, "--context reads nodes from a cluster"),
    ]:
        with pytest.raises(UsageError, match=re.escape(message)):
            check_options(options.replace(**changes))


# ---- the typed Options -------------------------------------------------------------------------


def test_options_are_flat_frozen_and_keyword_only() -> None:
    options = Options(template="t.yaml", psn=2, num=3)
    assert (options.psn, options.num, options.port, options.labels) == (2, 3, 2222, True)
    assert isinstance(options, TensorFlowOptions) and isinstance(options, ConnectionOptions)
    with pytest.raises(AttributeError):
        options.psn = 1  # type: ignore[misc]
    assert options.replace(psn=0).psn == 0 and options.psn == 2
    assert options.replace(psn=2) == options
    with pytest.raises(TypeError, match="unexpected keyword argument 'psm'"):
        Options(template="t.yaml", psm=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'template'"):
        Options()  # type: ignore[call-arg]


def test_the_framework_group_is_part_of_the_table() -> None:
    tf = {f.name for f in fields(TensorFlowOptions)}
    assert tf == {"psn", "psf", "chief", "evaluator", "evaluator_in_cluster"}
    assert {f.name for f in fields(Options) if f.group is TensorFlowOptions} == tf
    sections = getattr(render_command, "sections", {})
    assert {name for name, section in sections.items() if section == "TensorFlow options"} == tf


def test_an_option_is_declared_once() -> None:
    class Core(OptionGroup):
        psn: int = option("--psn-core", default=1, help="")

    with pytest.raises(TypeError, match="'psn' is in"):

        class Both(Core, TensorFlowOptions):
            pass

    class Other(OptionGroup):
        parameter_servers: int = option("--psn", default=1, help="")

    with pytest.raises(TypeError, match="--psn is both"):

        class Clash(Other, TensorFlowOptions):
            pass


# ---- shared declarations for the commands to come: cluster, timeout, output format -------------


class RunOptions(ConnectionOptions):
    run: str | None = argument(required=False)
    wait: float | None = timeout(300.0, help="How long to wait.")
    output: str = output_format("table", "json", "yaml", help="How to print.")


def _run_command() -> tuple[click.Command, list[RunOptions]]:
    seen: list[RunOptions] = []

    @make_command("status", RunOptions, short_help="Show a run.")
    def command(values: dict[str, Any], given: frozenset[str]) -> None:
        """Show a run."""
        seen.append(RunOptions(**values))

    return command, seen


def test_a_command_from_shared_groups() -> None:
    command, seen = _run_command()
    command.main(
        ["mnist", "-n", "ml", "--context", "c", "--timeout", "1h30m", "-o", "json"],
        standalone_mode=False,
    )
    assert seen == [
        RunOptions(run="mnist", namespace="ml", context="c", wait=5400.0, output="json")
    ]
    command.main([], standalone_mode=False)
    assert seen[-1] == RunOptions(run=None, wait=300.0, output="table")
    help_text = command.get_help(click.Context(command, info_name="status"))
    assert "--timeout DURATION" in help_text and "[default: 5m]" in help_text
    assert "-o, --output [table|json|yaml]" in help_text
    assert "Cluster options:" in help_text and "-n, --namespace NS" in help_text


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (["--timeout", "5x"], click.BadParameter, "'5x' is not a duration; write a number and"),
        (["--timeout", "30"], click.BadParameter, "such as 30s, 5m or 1h"),
        (["-o", "xml"], UsageError, "--output must be table, json or yaml, not 'xml'"),
    ],
)
def test_shared_declarations_refuse_bad_values(
    args: list[str], error: type[Exception], message: str
) -> None:
    command, seen = _run_command()
    with pytest.raises(error, match=re.escape(message)):
        command.main(args, standalone_mode=False)
    assert seen == []


def test_one_of_words() -> None:
    assert OneOf("a")("b") == "must be a, not 'b'"
    assert OneOf("a", "b")("c") == "must be a or b, not 'c'"
    assert OneOf("a", "b", "c")("a") is None


# ---- durations -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("1h", 3600),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("2m30s", 150),
        ("500ms", 0.5),
        ("0", 0),
        ("0s", 0),
        (".5s", 0.5),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "-5s", "5x", "m", "1h-", " 5s", "5s ", "1d", "5 m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["2562047h47m17s", "3000000h", "99999999999h", "9" * 400 + "s"])
def test_durations_longer_than_gos_longest_are_refused(text: str) -> None:
    # kubectl's --timeout is a Go duration: an int64 of nanoseconds, at most 2562047h47m16.85s.
    with pytest.raises(
        ValueError, match=r"longer than the longest duration, 2562047h \(as in kubectl\)$"
    ):
        parse_duration(text)


def test_gos_longest_duration_is_taken() -> None:
    assert parse_duration("2562047h47m16.854s") == pytest.approx((2**63 - 1) / 1e9)


@given(st.integers(min_value=0, max_value=10**7))
def test_a_duration_reads_back_as_written(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


def test_duration_formats() -> None:
    assert [format_duration(s) for s in (300, 30, 3600, 90, 0.5, 0)] == [
        "5m",
        "30s",
        "1h",
        "90s",
        "0.5s",
        "0s",
    ]


def test_a_group_compares_hashes_and_shows_itself_as_a_dataclass_would() -> None:
    from simpletfjob.options.commands import InitOptions

    init = InitOptions(name="mnist")
    assert repr(init) == "InitOptions(name='mnist', output=None, force=False)"
    assert init == InitOptions(name="mnist") and hash(init) == hash(InitOptions(name="mnist"))
    assert init != InitOptions(name="mnist", force=True)
    assert init.__eq__(("mnist", None, False)) is NotImplemented
    assert repr(TensorFlowOptions(psn=2)).startswith("TensorFlowOptions(")
    assert "psn=2" in repr(TensorFlowOptions(psn=2))
