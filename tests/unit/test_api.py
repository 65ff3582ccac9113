"""The Python API without a cluster: `import simpletfjob`, its errors, and `render()` against `render -o -`."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import simpletfjob
from tests.conftest import EXAMPLES, ROOT, load_all
from tests.support.templates import LABELLED


def test_import_simpletfjob_imports_nothing_heavy() -> None:
    """Only the names read are imported: a script that imports the package pays for nothing else."""
    code = (
        "import sys, simpletfjob\n"
        "simpletfjob.Error, simpletfjob.TimedOut, simpletfjob.UsageError\n"
        "heavy = ('click', 'jinja2', 'yaml', 'kubernetes', 'urllib3')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]"


def test_every_public_name_is_there_and_listed() -> None:
    for name in simpletfjob.__all__:
        assert getattr(simpletfjob, name) is not None
        assert name in dir(simpletfjob)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = simpletfjob.nothing  # type: ignore[attr-defined]


def test_the_errors_are_one_family_with_the_cli_exit_codes() -> None:
    assert simpletfjob.Error is simpletfjob.SimpleTFJobError
    families = [
        simpletfjob.UsageError,
        simpletfjob.InputError,
        simpletfjob.TemplateError,
        simpletfjob.RenderCheckError,
        simpletfjob.SelectionError,
        simpletfjob.ClusterError,
        simpletfjob.OutputError,
        simpletfjob.SchemaError,
        simpletfjob.NoRunError,
        simpletfjob.RunFailed,
        simpletfjob.TimedOut,
    ]
    assert all(issubclass(family, simpletfjob.Error) for family in families)
    assert simpletfjob.UsageError.exit_code == 2
    assert simpletfjob.TimedOut.exit_code == 3
    assert simpletfjob.RunFailed.exit_code == simpletfjob.ClusterError.exit_code == 1
    from simpletfjob.runs.wait import RunFailed, TimedOut

    assert (RunFailed, TimedOut) == (simpletfjob.RunFailed, simpletfjob.TimedOut)


MNIST = EXAMPLES / "mnist"


@pytest.mark.parametrize(
    ("keywords", "args"),
    [
        ({}, []),
        ({"num": 3, "psn": 1}, ["-N", "3", "--psn", "1"]),
        ({"tasks_per_host": 2, "port": 3000}, ["--tasks-per-host", "2", "--port", "3000"]),
        ({"network": "pod", "namespace": "ml"}, ["--network", "pod", "-n", "ml"]),
        ({"no_labels": True, "name": "other"}, ["--no-labels", "--name", "other"]),
        ({"success_policy": "all-workers"}, ["--success-policy", "all-workers"]),
    ],
)
def test_render_gives_the_documents_render_writes(
    cli: Any, keywords: dict[str, Any], args: list[str]
) -> None:
    hosts = "h1,h2,h3,h4"
    written = cli("mnist.yaml", "--nodes", hosts, *args, "-o", "-", cwd=MNIST)
    assert written.code == 0, written.err
    old = os.getcwd()
    os.chdir(MNIST)
    try:
        documents = simpletfjob.render("mnist.yaml", nodes=hosts.split(","), **keywords)
    finally:
        os.chdir(old)
    assert documents == load_all(written.out)
    assert len(documents) >= 3


def test_render_takes_a_path_and_a_builtin(cli: Any) -> None:
    from_path = simpletfjob.render(MNIST / "mnist.yaml", nodes="a,b", num=2)
    assert [d["metadata"]["name"] for d in from_path] == ["mnist-ps-0", "mnist-worker-0"]
    written = cli("tf2-multiworker", "--nodes", "a,b", "--set", "image=x:1", "-o", "-")
    assert written.code == 0, written.err
    builtin = simpletfjob.render("tf2-multiworker", nodes=["a", "b"], values={"image": "x:1"})
    assert builtin == load_all(written.out)


def test_values_layer_under_set_values() -> None:
    docs = simpletfjob.render(
        "tf2-multiworker",
        nodes="a",
        values={"image": "from-values:1"},
        set_values=["image=from-set:2"],
    )
    images = {c["image"] for d in docs for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {"from-set:2"}


@pytest.mark.parametrize(
    ("keywords", "args"),
    [
        ({"psn": -1}, ["--psn", "-1"]),
        ({"tasks_per_host": 0}, ["--tasks-per-host", "0"]),
        ({"network": "bridge"}, ["--network", "bridge"]),
        ({"port": 70000}, ["--port", "70000"]),
        ({"selector": "a in ("}, ["--selector", "a in ("]),
        ({"nodes_file": "hosts"}, ["--nodes-file", "hosts"]),  # with --nodes: not both
        ({"port": 65535, "tasks_per_host": 2}, ["--port", "65535", "--tasks-per-host", "2"]),
    ],
)
def test_a_bad_option_is_the_cli_error(cli: Any, keywords: dict[str, Any], args: list[str]) -> None:
    written = cli("mnist.yaml", "--nodes", "a,b", *args, "-o", "-", cwd=MNIST)
    assert written.code != 0 and written.out == ""
    line = written.err.strip().removeprefix("simpletfjob: error: ")
    with pytest.raises(simpletfjob.Error) as raised:
        simpletfjob.render(MNIST / "mnist.yaml", nodes="a,b", **keywords)
    assert raised.value.exit_code == written.code
    assert line.startswith(str(raised.value)), (line, str(raised.value))


def test_an_unknown_keyword_or_a_wrong_type_is_a_usage_error() -> None:
    with pytest.raises(simpletfjob.UsageError, match=r"unknown option 'pns'; did you mean 'psn'"):
        simpletfjob.render(MNIST / "mnist.yaml", nodes="a", pns=1)
    with pytest.raises(simpletfjob.UsageError, match="unknown option 'output'"):
        simpletfjob.render(MNIST / "mnist.yaml", nodes="a", output="-")
    with pytest.raises(simpletfjob.UsageError, match="--psn must be an integer, not '1'"):
        simpletfjob.render(MNIST / "mnist.yaml", nodes="a", psn="1")
    with pytest.raises(simpletfjob.UsageError, match="Invalid value for '--port': 'x'"):
        simpletfjob.render(MNIST / "mnist.yaml", nodes="a", port="x")


def test_apply_sends_nothing_with_a_client_dry_run_and_says_to_render_instead(
    tmp_path: Path,
) -> None:
    """The command line prints what a client dry run would send; the API's render() returns it."""
    client = simpletfjob.Client(kubeconfig=str(tmp_path / "no-kubeconfig"))
    with pytest.raises(
        simpletfjob.UsageError, match=r"dry_run='client'\) sends nothing.*render\(\)"
    ):
        client.apply(MNIST / "mnist.yaml", nodes="a,b", dry_run="client")


def _offline() -> simpletfjob.Client:
    """A client whose every call that reached the cluster would fail: the checks come first."""
    return simpletfjob.Client(kubeconfig="/nonexistent/kubeconfig")


def _run() -> simpletfjob.Run:
    return simpletfjob.Run(_offline(), "mnist", "ml")


# Calls with an argument of the wrong type: each raised a plain TypeError (issue 35).
WRONG_TYPES = {
    "Client(kubeconfig=5)": (lambda: simpletfjob.Client(kubeconfig=5), "kubeconfig", "5"),
    "Client(namespace=5)": (lambda: simpletfjob.Client(namespace=5), "namespace", "5"),
    "get(None)": (lambda: _offline().get(None), "name", "None"),
    "get(5)": (lambda: _offline().get(5), "name", "5"),
    "render(nodes=['h1', 2])": (
        lambda: simpletfjob.render(MNIST / "mnist.yaml", nodes=["h1", 2]),
        "nodes",
        "['h1', 2]",
    ),
    "render(nodes=b'h1,h2')": (
        lambda: simpletfjob.render(MNIST / "mnist.yaml", nodes=b"h1,h2"),
        "nodes",
        "b'h1,h2'",
    ),
    "render(5)": (lambda: simpletfjob.render(5), "template", "5"),
    "render(values=[1])": (
        lambda: simpletfjob.render(MNIST / "mnist.yaml", nodes="a", values=[1]),
        "values",
        "[1]",
    ),
    "apply(5)": (lambda: _offline().apply(5), "template", "5"),
    "apply(values=5)": (
        lambda: _offline().apply(MNIST / "mnist.yaml", nodes="a,b", values=5),
        "values",
        "5",
    ),
    "run(max_restarts='2')": (
        lambda: _offline().run(MNIST / "mnist.yaml", nodes="a,b", max_restarts="2"),
        "max_restarts",
        "'2'",
    ),
    "logs(task=5)": (lambda: _run().logs(task=5), "task", "5"),
    "logs(follow='yes')": (lambda: _run().logs(follow="yes"), "follow", "'yes'"),
    "delete(wait='yes')": (lambda: _run().delete(wait="yes"), "wait", "'yes'"),
    "wait(tail_on_failure=1.5)": (
        lambda: _run().wait(tail_on_failure=1.5),
        "tail_on_failure",
        "1.5",
    ),
}


@pytest.mark.parametrize("call", sorted(WRONG_TYPES))
def test_a_wrong_type_at_any_public_call_is_a_usage_error(call: str) -> None:
    """docs/python.md: every error is a simpletfjob.Error, and a wrong type a UsageError."""
    made, name, shown = WRONG_TYPES[call]
    with pytest.raises(simpletfjob.UsageError) as raised:
        made()
    message = str(raised.value)
    assert f" takes {name} as " in message and message.endswith(f", not {shown}"), message


def test_wait_takes_stall_timeout_as_the_command_line_does() -> None:
    with pytest.raises(simpletfjob.UsageError, match="--stall-timeout must be more than 0, not 0s"):
        _run().wait(stall_timeout="0s")
    with pytest.raises(simpletfjob.UsageError, match="'--stall-timeout': 'x' is not a duration"):
        _run().wait(stall_timeout="x")


# Calls with an argument missing or too many: each raised a plain TypeError.
WRONG_ARITY = {
    "render()": (lambda: simpletfjob.render(), "render(): missing a required argument: 'template'"),
    "render(t, nodes)": (
        lambda: simpletfjob.render("x", ["h1"]),
        "render(): too many positional arguments",
    ),
    "Client(a, b, c, d)": (
        lambda: simpletfjob.Client("a", "b", "c", "d"),
        "Client(): too many positional arguments",
    ),
    "get()": (lambda: _offline().get(), "get(): missing a required argument: 'name'"),
    "get(a, b)": (lambda: _offline().get("a", "b"), "get(): too many positional arguments"),
    "apply()": (lambda: _offline().apply(), "apply(): missing a required argument: 'template'"),
    "runs(5)": (lambda: _offline().runs(5), "runs(): too many positional arguments"),
    "status(5)": (lambda: _run().status(5), "status(): too many positional arguments"),
}


@pytest.mark.parametrize("call", sorted(WRONG_ARITY))
def test_an_argument_missing_or_too_many_is_a_usage_error(call: str) -> None:
    """docs/python.md: never a TypeError, whatever the call's arguments."""
    made, message = WRONG_ARITY[call]
    with pytest.raises(simpletfjob.UsageError) as raised:
        made()
    assert str(raised.value) == message


@pytest.mark.parametrize("codes", [[3], (3, 42), {3}, frozenset({3}), "3", "3,42"])
def test_restart_exit_codes_take_any_collection_of_ints_or_the_clis_text(codes: Any) -> None:
    from simpletfjob.options.keywords import from_keywords
    from simpletfjob.options.runs import RunOptions

    settings = from_keywords(RunOptions, {"restart_exit_codes": codes}, caller="run()")
    expected = {3, 42} if codes in ((3, 42), "3,42") else {3}
    assert settings["restart_exit_codes"] == frozenset(expected)


@pytest.mark.parametrize(
    ("codes", "message"),
    [
        ([0], "must be exit codes from 1 to 255, as 3,42 or 3-5, not '0'"),
        (["3"], "--restart-exit-codes takes integers, or the command line's text, not ['3']"),
        ([True], "--restart-exit-codes takes integers, or the command line's text, not [True]"),
        (3, "--restart-exit-codes takes integers, or the command line's text, not 3"),
    ],
)
def test_restart_exit_codes_that_are_no_exit_codes_are_refused(codes: Any, message: str) -> None:
    from simpletfjob.options.keywords import from_keywords
    from simpletfjob.options.runs import RunOptions

    with pytest.raises(simpletfjob.UsageError, match=re.escape(message)):
        from_keywords(RunOptions, {"restart_exit_codes": codes}, caller="run()")


def test_render_errors_are_the_cli_families(tmp_path: Path) -> None:
    with pytest.raises(simpletfjob.InputError):
        simpletfjob.render(tmp_path / "missing.yaml", nodes="a")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Job\nmetadata: {name: <<type>\n")
    with pytest.raises(simpletfjob.Error):
        simpletfjob.render(broken, nodes="a")
    with pytest.raises(simpletfjob.SelectionError, match="more hosts than are eligible"):
        simpletfjob.render(MNIST / "mnist.yaml", nodes="a", num=2)


def test_render_prints_nothing_and_logs_its_warnings(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(LABELLED)
    caplog.set_level(logging.INFO, logger="simpletfjob")
    docs = simpletfjob.render(template, nodes="a,b")
    assert capfd.readouterr() == ("", "")
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "simpletfjob"] == [
        (
            "WARNING",
            "the template sets label simpletfjob/job=custom; keeping it (simpletfjob would set 't')",
        )
    ]
    assert docs[0]["metadata"]["labels"]["simpletfjob/job"] == "custom"


def test_states_are_a_str_enum_exported_from_the_package() -> None:
    state = simpletfjob.State.SUCCEEDED
    assert state == "Succeeded" and str(state) == "Succeeded" and f"{state}" == "Succeeded"
    assert simpletfjob.State("Running") is simpletfjob.State.RUNNING
    assert [s.finished for s in (simpletfjob.State.FAILED, simpletfjob.State.UNKNOWN)] == [
        True,
        False,
    ]
    assert simpletfjob.CauseKind.NODE_LOST == "node lost"


def _judged_run(*events: Any) -> Any:
    from tests.support.recorded import running, states

    jobs, pods = running()
    return list(states(jobs, pods, list(events)))[-1]


def test_an_outcome_carries_the_followers_typed_cause_not_a_message() -> None:
    """A lost node ends `run` while the run's state still says Running: the Outcome is Failed,
    with the cause as the follower classified it (its kind, tasks and node)."""
    from simpletfjob.api.results import outcome
    from simpletfjob.runs.classify import node_lost

    run = _judged_run()
    lost = node_lost(["worker-1"], "h3", "NotReady", "1m")
    ended = outcome(
        run, "run 'mnist' failed: worker-1 on node h3: NotReady for more than 1m", cause=lost
    )
    assert (ended.state, ended.succeeded) == (simpletfjob.State.FAILED, False)
    cause = ended.cause
    assert isinstance(cause, simpletfjob.Cause)
    assert (cause.kind, cause.tasks, cause.node, cause.exit_code, cause.category) == (
        simpletfjob.CauseKind.NODE_LOST,
        ("worker-1",),
        "h3",
        None,
        "disruption",
    )
    assert str(cause) == "worker-1 on node h3: NotReady for more than 1m"


def test_a_failed_runs_outcome_without_a_cause_given_is_classified_from_its_state() -> None:
    from simpletfjob.api.results import outcome
    from simpletfjob.kube.watch import Event
    from tests.support.recorded import job, pod

    failed = job("worker-1", failed=1, failed_reason="BackoffLimitExceeded")
    run = _judged_run(
        ("pods", Event("MODIFIED", pod(failed, "Failed", exit_code=137, reason="OOMKilled"))),
        ("jobs", Event("MODIFIED", failed)),
    )
    ended = outcome(run, "run 'mnist' failed: ...")
    assert ended.state is simpletfjob.State.FAILED and not ended.succeeded
    assert ended.cause is not None
    assert (ended.cause.kind, ended.cause.exit_code, ended.cause.category) == (
        "task failed",
        137,
        "disruption",
    )
    assert str(ended.cause) == "worker-1 Failed: OOMKilled" == run.outcome()


def test_a_job_failed_at_its_backoff_limit_carries_the_exit_code_its_pod_showed() -> None:
    """OnFailure: the container restarts in place, and at the backoff limit the Job controller
    deletes the pod before it marks the Job failed (BackoffLimitExceeded). The exit code was
    seen while the pod was there: the cause carries it, and is classified by it."""
    from simpletfjob.api.results import outcome
    from simpletfjob.kube.watch import Event
    from tests.support.recorded import job, pod, running

    jobs, _ = running()
    crashing = pod(jobs[1], "Running", restarts=2, waiting="CrashLoopBackOff")
    failed = job("worker-1", failed=1, failed_reason="BackoffLimitExceeded")
    run = _judged_run(
        ("pods", Event("MODIFIED", crashing)),
        ("pods", Event("DELETED", crashing)),
        ("jobs", Event("MODIFIED", failed)),
    )
    ended = outcome(run, "run 'mnist' failed: worker-1 Failed: BackoffLimitExceeded")
    assert ended.cause is not None
    assert (ended.cause.kind, ended.cause.exit_code, ended.cause.category) == (
        "task failed",
        1,
        "program error",
    )
    assert str(ended.cause) == "worker-1 Failed: BackoffLimitExceeded" == run.outcome()


def test_wait_takes_its_cleanup_grace_as_the_command_line_does_before_it_connects() -> None:
    from simpletfjob.api.client import Run

    waiting = Run(simpletfjob.Client(kubeconfig="/nonexistent/kubeconfig"), "mnist", "ml")
    with pytest.raises(simpletfjob.UsageError, match="--cleanup-grace"):
        waiting.wait(cleanup_grace="soon")
