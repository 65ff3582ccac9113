"""Eligibility judged per role, endpoints that never repeat, and the errors when hosts fall short.

The nodes come from the loopback API server or from a saved NodeList; the
output is parsed and each task's TF_CONFIG read back with json.loads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import assert_one_line_error, load_all, tf_config_of, write
from tests.support.kubeapi import KubeAPI, make_node, write_kubeconfig
from tests.support.templates import SPOT_BY_ROLE as TEMPLATE

SPOT = {"key": "spot", "value": "true", "effect": "NoSchedule"}


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
        "1 ps + 1 chief; use more hosts, more tasks per host (--tasks-per-host 2) or fewer "
        "parameter servers (--psn) "
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
            "use more hosts, more tasks per host (--tasks-per-host 2) or fewer parameter "
            "servers (--psn) (5 nodes: 1 eligible, 1 excluded, 3 tainted)"
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


# -- two tasks never share an endpoint -------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "node_args", "shared"),
    [
        ("internal-ip", {"internal_ip": "10.9.9.9"}, "InternalIP 10.9.9.9"),
        ("hostname", {"hostname": "box"}, "kubernetes.io/hostname label box"),
    ],
)
def test_two_chosen_nodes_with_one_address_are_refused(
    cli: Any, source: Source, address: str, node_args: dict[str, str], shared: str
) -> None:
    source.set_nodes(
        [
            make_node("n1", internal_ip="10.0.0.1", hostname="one"),
            make_node("n2", **node_args),
            make_node("n3", internal_ip="10.0.0.3", hostname="three"),
            make_node("n4", **node_args),
        ]
    )
    line = assert_one_line_error(run(cli, source, template_for(), "--address", address))
    assert line == (
        f"simpletfjob: error: nodes 'n2' and 'n4' have the same {shared}, so worker 0 and "
        f"worker 2 would both listen at {shared.split()[-1]}:2222; exclude one of them (-E) "
        "or choose another --address"
    )
    # Only the tasks chosen matter: -N 3 leaves n4 out.
    assert [node for _, _, node in placed(run(cli, source, template_for(), "-N", "3"))] == [
        "n1",
        "n2",
        "n3",
    ]
    ok = run(cli, source, template_for(), "--address", address, "-N", "3")
    assert [node for _, _, node in placed(ok)] == ["n1", "n2", "n3"]
    # With pod networking each task has its own Service name, so nothing is shared.
    pod = run(cli, source, template_for(), "--address", address, "--network", "pod")
    assert pod.code == 0, pod.err


def test_ip_addresses_are_compared_as_addresses(cli: Any, source: Source) -> None:
    source.set_nodes(
        [make_node("n1", internal_ip="fd00::1"), make_node("n2", internal_ip="fd00:0:0::1")]
    )
    line = assert_one_line_error(run(cli, source, template_for(), "--address", "internal-ip"))
    assert line.startswith(
        "simpletfjob: error: nodes 'n1' and 'n2' have the same InternalIP fd00::1 and "
        "fd00:0:0::1, so ps 0 and worker 0 would both listen at [fd00:0:0::1]:2222"
    )


def test_a_node_list_that_names_a_node_twice(cli: Any, tmp_path: Path) -> None:
    nodes = [make_node("a"), make_node("b"), make_node("a", internal_ip="10.0.0.9")]
    write(tmp_path / "nodes.json", saved_list(nodes))
    write(tmp_path / "t.yaml", template_for())
    result = cli("t.yaml", "--nodes-file", "nodes.json", "-o", "-", cwd=tmp_path)
    line = assert_one_line_error(result)
    assert line == (
        "simpletfjob: error: nodes.json: items[2]: host 'a' is listed twice "
        "(first at nodes.json: items[0])"
    )


def test_a_cluster_that_lists_a_node_twice(cli: Any, kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.set_nodes([make_node("a"), make_node("b")])
    kubeapi.faults.repeat_items = 1  # a proxy that lists 'a' again at the end
    write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    write(tmp_path / "t.yaml", template_for())
    # Even with -N 2, which would use only 'a' and 'b': the list itself is broken.
    result = cli("t.yaml", "--kubeconfig", "kubeconfig", "-N", "2", "-o", "-", cwd=tmp_path)
    line = assert_one_line_error(result)
    assert line == (
        f"simpletfjob: error: {kubeapi.url} (context 'loopback'): the node list names 'a' "
        "twice (items 0 and 2); a node name is unique, so the list cannot be used"
    )


# -- a property: random tolerations per role over random taints -------------------------------

TAINT_KEYS = ("a", "b", "c")
ROLES = ("chief", "ps", "worker", "evaluator")


def role_template(tolerated: dict[str, list[str]]) -> str:
    """A Job whose pods tolerate, per role, the taint keys given (an if/elif chain)."""
    branches = []
    for role, keys in tolerated.items():
        items = "".join(f"        - {{key: {k}, operator: Exists}}\n" for k in keys)
        body = f"      tolerations:\n{items}" if keys else ""
        branches.append(f'{{% {"if" if not branches else "elif"} type == "{role}" %}}\n{body}')
    head, tail = template_for().split("{% if type in [] %}\n")
    return head + "".join(branches) + "{% endif %}\n" + tail.split("{% endif %}\n", 1)[1]


# What a run may fail with here: too few hosts for the roles, or a shared InternalIP.
SELECTION_ERRORS = (
    "no host is left for ",
    "no eligible host may take ",
    "no task is left for a worker",
    "no host is eligible",
    "-N ",
    "nodes 'n",
)


@given(
    taints=st.lists(st.sets(st.sampled_from(TAINT_KEYS), max_size=2), min_size=2, max_size=8),
    tolerated=st.fixed_dictionaries({r: st.sets(st.sampled_from(TAINT_KEYS)) for r in ROLES}),
    ips=st.lists(st.sampled_from([f"10.0.0.{i}" for i in range(1, 13)]), min_size=8),
    psn=st.integers(0, 2),
    chief=st.booleans(),
    evaluator=st.booleans(),
    per_host=st.integers(1, 2),
    address=st.sampled_from(["name", "internal-ip"]),
    data=st.data(),
)
def test_every_task_on_a_node_its_role_tolerates(
    tmp_path_factory: Any,
    capsys: Any,
    taints: list[set[str]],
    tolerated: dict[str, set[str]],
    ips: list[str],
    psn: int,
    chief: bool,
    evaluator: bool,
    per_host: int,
    address: str,
    data: st.DataObject,
) -> None:
    from simpletfjob.cli import main

    directory: Path = tmp_path_factory.mktemp("r")
    names = [f"n{i}" for i in range(len(taints))]
    nodes = [
        make_node(
            name,
            internal_ip=ip,
            taints=[{"key": k, "effect": "NoSchedule"} for k in sorted(keys)],
        )
        for name, keys, ip in zip(names, taints, ips, strict=False)
    ]
    write(directory / "nodes.json", saved_list(nodes))
    write(directory / "t.yaml", role_template({r: sorted(k) for r, k in tolerated.items()}))
    num = data.draw(st.sampled_from([-1, -1, *range(2, len(names) + 1)]), label="num")
    args = ["t.yaml", "--nodes-file", "nodes.json", "-o", "-", "-N", str(num), "--psn", str(psn)]
    args += ["--tasks-per-host", str(per_host), "--address", address]
    args += ["--chief"] * chief + ["--evaluator"] * evaluator
    old = Path.cwd()
    os.chdir(directory)
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    if code != 0:
        assert code == 1 and out == "", err
        assert err.count("\n") == 1 and err.startswith("simpletfjob: error: "), err
        assert err[len("simpletfjob: error: ") :].startswith(SELECTION_ERRORS), err
        return
    docs = load_all(out)
    taints_of = dict(zip(names, taints, strict=True))
    ip_of = dict(zip(names, ips, strict=False))
    endpoints = set()
    nodes_used = set()
    configs = []
    for doc in docs:
        config = tf_config_of(doc)
        role, index = config["task"]["type"], config["task"]["index"]
        assert doc["metadata"]["name"] == f"t-{role}-{index}"
        node = doc["spec"]["template"]["spec"]["nodeName"]
        assert taints_of[node] <= tolerated[role], (role, node)
        listen = doc["spec"]["template"]["spec"]["containers"][0]["args"][0]
        host, port = listen.removeprefix("--listen=").rsplit(":", 1)
        assert host == (node if address == "name" else ip_of[node])
        assert (host, port) not in endpoints
        endpoints.add((host, port))
        nodes_used.add(node)
        configs.append(config)
        if role != "evaluator":
            assert config["cluster"][role][index] == f"{host}:{port}"
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)
    roles = [c["task"]["type"] for c in configs]
    assert roles.count("worker") >= 1
    assert roles.count("chief") == chief and roles.count("evaluator") == evaluator
    assert roles.count("ps") == psn
    if num != -1:
        assert len(nodes_used) == num
