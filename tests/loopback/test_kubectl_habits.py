"""kubectl's habits against the loopback API server: a run in another namespace, and `status -A`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error
from tests.support.kubeapi import KubeAPI, write_kubeconfig
from tests.support.scenes import NS, finish_job, load_run


@pytest.fixture
def kubeconfig(kubeapi: KubeAPI, tmp_path: Path) -> str:
    return str(write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url, namespace="default"))


@pytest.mark.parametrize(
    "args",
    [("status", "mnist"), ("wait", "mnist"), ("logs", "mnist"), ("delete", "mnist")],
)
def test_a_run_in_another_namespace_is_pointed_to_with_its_n(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, args: tuple[str, ...]
) -> None:
    load_run(kubeapi)  # in ml
    result = cli(*args, "--kubeconfig", kubeconfig)
    assert_one_line_error(
        result,
        1,
        r"^simpletfjob: error: no run 'mnist' in namespace 'default'; "
        r"it is in namespace 'ml' \(use -n ml\)$",
    )
    assert kubeapi.objects("jobs", NS), "nothing of the run in ml is deleted"


def test_a_run_in_several_other_namespaces_names_each(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi)
    load_run(kubeapi, namespace="dev")
    result = cli("status", "mnist", "--kubeconfig", kubeconfig)
    assert_one_line_error(
        result,
        1,
        r"in namespace 'default'; it is in namespaces 'dev' and 'ml' "
        r"\(use -n dev or -n ml\)$",
    )


def test_a_run_in_no_namespace_keeps_todays_message(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi)
    result = cli("status", "other", "--kubeconfig", kubeconfig)
    assert_one_line_error(result, 1, r"error: no run 'other' in namespace 'default'$")


def test_when_listing_across_namespaces_is_forbidden_nothing_more_is_said(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    load_run(kubeapi)
    kubeapi.add_user("ci", "ci-token")
    kubeapi.grant("ci", ["list", "watch", "get"], ["jobs", "pods", "services"], namespace="dev")
    kubeconfig = write_kubeconfig(tmp_path / "ci", kubeapi.url, token="ci-token", namespace="dev")
    for command in ("status", "wait", "logs", "delete"):
        result = cli(command, "mnist", "--kubeconfig", str(kubeconfig))
        assert_one_line_error(result, 1, r"error: no run 'mnist' in namespace 'dev'$")
    refused = [r for r in kubeapi.requests_for("jobs", "list") if "/namespaces/" not in r.path]
    assert refused, "the list across namespaces was asked"


def test_status_all_namespaces_lists_every_namespace_with_a_namespace_column(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi, "mnist")
    load_run(kubeapi, "resnet", (("worker", 0),), namespace="dev")
    load_run(kubeapi, "mnist", (("worker", 0),), namespace="dev")
    finish_job(kubeapi, "mnist-worker-0")  # in ml
    for flag in ("-A", "--all-namespaces"):
        result = cli("status", flag, "--kubeconfig", kubeconfig)
        assert (result.code, result.err) == (0, ""), result.err
        rows = [line.split() for line in result.out.splitlines()]
        assert rows[0] == [
            "NAMESPACE",
            "NAME",
            "TASKS",
            "ACTIVE",
            "SUCCEEDED",
            "FAILED",
            "STATE",
            "AGE",
        ]
        assert [r[:7] for r in rows[1:]] == [
            ["dev", "mnist", "1", "1", "0", "0", "Pending"],
            ["dev", "resnet", "1", "1", "0", "0", "Pending"],
            ["ml", "mnist", "3", "2", "1", "0", "Succeeded"],
        ]
    data = json.loads(cli("status", "-A", "-o", "json", "--kubeconfig", kubeconfig).out)
    assert data["namespace"] is None
    assert [(r["namespace"], r["name"], len(r["tasks"])) for r in data["runs"]] == [
        ("dev", "mnist", 1),
        ("dev", "resnet", 1),
        ("ml", "mnist", 3),
    ]
    # Without -A, the namespace's runs only, as before.
    one = cli("status", "-n", "dev", "--kubeconfig", kubeconfig).out.splitlines()
    assert [line.split()[0] for line in one] == ["NAME", "mnist", "resnet"]


def test_status_all_namespaces_with_no_runs_says_so(cli: Any, kubeconfig: str) -> None:
    result = cli("status", "-A", "--kubeconfig", kubeconfig)
    assert (result.code, result.out, result.err) == (0, "", "No runs found.\n")


def test_status_all_namespaces_refuses_a_run_name(cli: Any, kubeconfig: str) -> None:
    result = cli("status", "mnist", "-A", "--kubeconfig", kubeconfig)
    assert_one_line_error(result, 2, r"-A/--all-namespaces cannot go with RUN")
