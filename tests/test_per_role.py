"""Eligibility judged per role, and the errors when hosts fall short.

The nodes come from the loopback API server or from a saved NodeList; the
output is parsed and each task's TF_CONFIG read back with json.loads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import tf_config_of, write
from tests.kubeapi import KubeAPI, make_node, write_kubeconfig

SPOT = {"key": "spot", "value": "true", "effect": "NoSchedule"}

# The pods of the roles in `{roles}` tolerate the spot taint; the others do not.
TEMPLATE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
{{% if type in {roles} %}}
      tolerations:
        - key: spot
          operator: Exists
{{% endif %}}
      containers:
        - name: tf
          image: tensorflow/tensorflow
          args: ["--listen=<<host>>:<<port>>"]
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


def template_for(*roles: str) -> str:
    return TEMPLATE.format(roles=json.dumps(list(roles)))


def unconditional_template() -> str:
    """The same template with the tolerations for every role, without the condition."""
    lines = template_for().splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("{%"))


def spot_nodes() -> list[dict[str, Any]]:
    """a1, a2 take any pod; s1, s2, s3 carry the spot taint."""
    return [
        make_node("a1", internal_ip="10.0.0.1"),
        make_node("a2", internal_ip="10.0.0.2"),
        make_node("s1", internal_ip="10.0.1.1", taints=[SPOT]),
        make_node("s2", internal_ip="10.0.1.2", taints=[SPOT]),
        make_node("s3", internal_ip="10.0.1.3", taints=[SPOT]),
    ]


def saved_list(nodes: list[dict[str, Any]]) -> str:
    items = [{"apiVersion": "v1", "kind": "Node", **n} for n in nodes]
    return json.dumps({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {}})


class Source:
    """Where the nodes come from: the loopback cluster or a saved NodeList; same arguments otherwise."""

    def __init__(self, kind: str, directory: Path, kubeapi: KubeAPI | None) -> None:
        self.kind = kind
        self.directory = directory
        self.kubeapi = kubeapi

    def set_nodes(self, nodes: list[dict[str, Any]]) -> None:
        if self.kubeapi is not None:
            self.kubeapi.set_nodes(nodes)
            write_kubeconfig(self.directory / "kubeconfig", self.kubeapi.url)
        else:
            write(self.directory / "nodes.json", saved_list(nodes))

    def args(self) -> list[str]:
        if self.kubeapi is not None:
            return ["--kubeconfig", "kubeconfig"]
        return ["--nodes-file", "nodes.json"]


@pytest.fixture(params=["cluster", "saved list"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Source:
    kubeapi = request.getfixturevalue("kubeapi") if request.param == "cluster" else None
    found = Source(request.param, tmp_path, kubeapi)
    found.set_nodes(spot_nodes())
    return found


def run(cli: Any, source: Source, template: str, *args: str) -> Any:
    write(source.directory / "t.yaml", template)
    return cli("t.yaml", *source.args(), "-o", "-", *args, cwd=source.directory)


def placed(result: Any) -> list[tuple[str, int, str]]:
    """(role, index, nodeName) of every task, checking each TF_CONFIG names the task itself."""
    assert result.code == 0, result.err
    tasks = []
    for doc in result.docs:
        config = tf_config_of(doc)
        role, index = config["task"]["type"], config["task"]["index"]
        assert doc["metadata"]["name"] == f"t-{role}-{index}"
        tasks.append((role, index, doc["spec"]["template"]["spec"]["nodeName"]))
    return tasks


def assert_one_line_error(result: Any, code: int = 1) -> str:
    assert result.code == code, result.err
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("simpletfjob: error: ")
    assert "Traceback" not in result.err and "internal error" not in result.err
    return lines[0]


# -- each role on the nodes its own pods tolerate --------------------------------------------


def test_workers_that_tolerate_a_taint_use_those_nodes_and_ps_does_not(
    cli: Any, source: Source
) -> None:
    result = run(cli, source, template_for("worker"))
    assert placed(result) == [
        ("ps", 0, "a1"),
        ("worker", 0, "a2"),
        ("worker", 1, "s1"),
        ("worker", 2, "s2"),
        ("worker", 3, "s3"),
    ]
    docs = result.docs
    assert "tolerations" not in docs[0]["spec"]["template"]["spec"]
    assert all("tolerations" in d["spec"]["template"]["spec"] for d in docs[1:])


def test_ps_that_tolerates_a_taint_still_takes_the_first_host_it_may_use(
    cli: Any, source: Source
) -> None:
    # The documented order: the ps takes a1, the first host it may use; the workers may
    # use only a2, so the spot nodes stay unused with -N -1.
    assert placed(run(cli, source, template_for("ps"))) == [("ps", 0, "a1"), ("worker", 0, "a2")]


def test_minus_n_counts_the_hosts_used_and_the_evaluator_keeps_a_host_it_may_use(
    cli: Any, source: Source
) -> None:
    # Only a1 and a2 take the evaluator; a worker passes over a2 to leave it one.
    result = run(cli, source, template_for("worker"), "-N", "3", "--evaluator")
    assert placed(result) == [("ps", 0, "a1"), ("worker", 0, "s1"), ("evaluator", 0, "a2")]
    assert tf_config_of(result.docs[0])["cluster"] == {"ps": ["a1:2222"], "worker": ["s1:2222"]}
    result = run(cli, source, template_for("worker"), "-N", "4", "--chief", "--psn", "0")
    assert placed(result) == [
        ("chief", 0, "a1"),
        ("worker", 0, "a2"),
        ("worker", 1, "s1"),
        ("worker", 2, "s2"),
    ]


def test_psf_accepts_a_host_only_ps_may_use(cli: Any, source: Source) -> None:
    write(source.directory / "psf", "s2\n")
    result = run(cli, source, template_for("ps"), "--psf", "psf", "-N", "3")
    assert placed(result) == [("ps", 0, "s2"), ("worker", 0, "a1"), ("worker", 1, "a2")]
    assert tf_config_of(result.docs[1])["cluster"] == {
        "ps": ["s2:2222"],
        "worker": ["a1:2222", "a2:2222"],
    }


def test_psf_refuses_a_host_only_workers_may_use(cli: Any, source: Source) -> None:
    write(source.directory / "psf", "s2\n")
    line = assert_one_line_error(run(cli, source, template_for("worker"), "--psf", "psf"))
    assert line == (
        "simpletfjob: error: --psf host 's2' is not eligible: taint spot=true:NoSchedule (ps)"
    )


def test_tasks_per_host_with_roles_judged_apart(cli: Any, source: Source) -> None:
    result = run(
        cli,
        source,
        template_for("worker"),
        *("-N", "3", "--tasks-per-host", "2", "--evaluator", "--address", "internal-ip"),
    )
    tasks = placed(result)
    endpoints = [
        (tf_config_of(d)["task"]["type"], d["spec"]["template"]["spec"]["containers"][0]["args"])
        for d in result.docs
    ]
    assert tasks == [
        ("ps", 0, "a1"),
        ("worker", 0, "a1"),
        ("worker", 1, "a2"),
        ("worker", 2, "s1"),
        ("worker", 3, "s1"),
        ("evaluator", 0, "a2"),
    ]
    assert [args for _, args in endpoints] == [
        ["--listen=10.0.0.1:2222"],
        ["--listen=10.0.0.1:2223"],
        ["--listen=10.0.0.2:2222"],
        ["--listen=10.0.1.1:2222"],
        ["--listen=10.0.1.1:2223"],
        ["--listen=10.0.0.2:2223"],
    ]
    assert len({node for _, _, node in tasks}) == 3  # -N counts hosts, not tasks


def test_explain_shows_the_roles_a_node_is_for(cli: Any, source: Source) -> None:
    result = run(cli, source, template_for("worker"), "-N", "3", "--explain")
    assert result.code == 0, result.err
    assert result.err.splitlines()[:7] == [
        "NODE  ELIGIBLE     TASK      WHY NOT",
        "a1    yes          ps 0",
        "a2    yes          worker 0",
        "s1    only worker  worker 1  taint spot=true:NoSchedule (ps)",
        "s2    only worker  -         not needed (-N); taint spot=true:NoSchedule (ps)",
        "s3    only worker  -         not needed (-N); taint spot=true:NoSchedule (ps)",
        "5 nodes: 5 eligible (3 only for worker)",
    ]


def test_roles_that_agree_give_the_same_bytes_as_one_pod_spec(cli: Any, source: Source) -> None:
    """A template whose tolerations are the same for every role renders as if unconditional."""
    everyone = template_for("chief", "ps", "worker", "evaluator")
    for args in (
        ("--chief", "--evaluator", "-N", "4", "--explain", "--address", "internal-ip"),
        ("--psn", "2", "--tasks-per-host", "2", "--evaluator", "--explain"),
    ):
        a = run(cli, source, everyone, *args)
        b = run(cli, source, unconditional_template(), *args)
        assert a.code == 0, a.err
        assert (a.code, a.out, a.err) == (b.code, b.out, b.err)
        assert "only" not in a.err
    assert [node for _, _, node in placed(a)][-1] == "s3"  # the evaluator on the last slot


# -- hosts that fall short -------------------------------------------------------------------


def test_no_host_a_worker_may_use(cli: Any, source: Source) -> None:
    source.set_nodes([make_node(f"s{i}", taints=[SPOT]) for i in range(3)])
    line = assert_one_line_error(run(cli, source, template_for("ps")))
    assert line == (
        "simpletfjob: error: no eligible host may take a worker: each has a taint that the "
        "worker pods do not tolerate (3 nodes: 3 eligible (3 only for ps))"
    )


def test_the_only_hosts_a_worker_may_use_are_taken(cli: Any, source: Source) -> None:
    line = assert_one_line_error(run(cli, source, template_for(), "--chief", "--psn", "1"))
    assert line == (
        "simpletfjob: error: no task is left for a worker: 2 tasks in all, taken by "
        "1 ps + 1 chief; use more hosts or fewer parameter servers (--psn) "
        "(5 nodes: 2 eligible, 3 tainted)"
    )
    line = assert_one_line_error(run(cli, source, template_for("ps"), "--chief", "-N", "3"))
    assert line == (
        "simpletfjob: error: no host is left for worker 0: the 2 eligible hosts a worker may "
        "use (a1, a2) are taken by chief 0, ps 0 (5 nodes: 5 eligible (3 only for ps))"
    )


def test_minus_n_beyond_what_the_roles_can_use(cli: Any, source: Source) -> None:
    line = assert_one_line_error(run(cli, source, template_for("ps"), "-N", "3"))
    assert line == (
        "simpletfjob: error: -N 3 asks for more hosts than the tasks can use: 2 take them all, "
        "and the other 3 eligible hosts may not take a worker; --psf can put the parameter "
        "servers there (5 nodes: 5 eligible (3 only for ps))"
    )


@pytest.mark.parametrize(
    ("exclude", "extra", "breakdown"),
    [
        ("a1\na2\ns1\ns2\ns3\n", (), "5 nodes: 0 eligible, 5 excluded"),
        ("a1\na2\n", (), "5 nodes: 0 eligible, 2 excluded, 3 tainted"),
        ("a1\n", ("--psn", "1"), None),
        ("", ("-l", "pool=none"), "5 nodes: 0 eligible, 3 tainted, 2 selector"),
    ],
)
def test_too_few_hosts_with_the_default_minus_n(
    cli: Any, source: Source, exclude: str, extra: tuple[str, ...], breakdown: str | None
) -> None:
    if source.kind == "cluster" and "-l" in extra:
        # The server filters a live list: the nodes it leaves out are not seen at all.
        breakdown = None
    write(source.directory / "exc", exclude)
    result = run(cli, source, template_for(), "-E", "exc", *extra)
    line = assert_one_line_error(result)
    if breakdown is not None:
        assert line == f"simpletfjob: error: no host is eligible ({breakdown})"
    elif "-l" in extra:
        assert line == "simpletfjob: error: no host is eligible (0 nodes: 0 eligible)"
    else:
        assert line == (
            "simpletfjob: error: no task is left for a worker: 1 task in all, taken by 1 ps; "
            "use more hosts or fewer parameter servers (--psn) "
            "(5 nodes: 1 eligible, 1 excluded, 3 tainted)"
        )


def test_every_node_unusable_for_every_reason(cli: Any, source: Source) -> None:
    source.set_nodes(
        [
            make_node("down", ready=False),
            make_node("new", just_admitted=True),
            make_node("off", cordoned=True),
            make_node("spot", taints=[SPOT]),
            make_node("skip"),
        ]
    )
    write(source.directory / "exc", "skip\n")
    line = assert_one_line_error(run(cli, source, template_for(), "-E", "exc"))
    assert line == (
        "simpletfjob: error: no host is eligible "
        "(5 nodes: 0 eligible, 1 excluded, 2 NotReady, 1 cordoned, 1 tainted)"
    )
