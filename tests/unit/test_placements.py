"""Where <<TF_CONFIG>> may stand: every scalar style and context, read back as each task's config.

Each case puts TF_CONFIG somewhere in a container: in a quoted, plain or block
scalar, in block or flow context, on one line or several. The emitted YAML is
read back with PyYAML's safe loader, the JSON is taken from the string after `=`
(or the whole string), and json.loads must give that task's config exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.cli import main
from tests.conftest import load_all, write
from tests.support.kubeapi import make_node
from tests.support.templates import SNIPPET as TEMPLATE
from tests.support.templates import SNIPPET_LINE


def after_equals(value: str) -> Any:
    """The JSON that starts after the first '=' (and an opening quote), read with json.loads."""
    rest = value[value.index("=") + 1 :].lstrip()
    if rest[:1] in ("'", '"'):
        rest = rest[1:]
    config, end = json.JSONDecoder().raw_decode(rest)
    assert json.loads(rest[:end]) == config
    return config


def whole(value: str) -> Any:
    return json.loads(value)


def line_starting_with_brace(value: str) -> Any:
    (line,) = [x for x in value.splitlines() if x.lstrip().startswith("{")]
    return json.loads(line)


class Case(NamedTuple):
    snippet: str  # container fields, indented 10 spaces
    field: Callable[[dict[str, Any]], str]  # the string that holds TF_CONFIG
    read: Callable[[str], Any]  # that string -> the config


def arg(i: int) -> Callable[[dict[str, Any]], str]:
    return lambda c: str(c["args"][i])


def command(i: int) -> Callable[[dict[str, Any]], str]:
    return lambda c: str(c["command"][i])


def env(c: dict[str, Any]) -> str:
    (value,) = [e["value"] for e in c["env"] if e["name"] == "TF_CONFIG"]
    return str(value)


CASES: dict[str, Case] = {
    # double-quoted
    "flow-list-double-quoted": Case(
        '          args: ["--tf_config=<<TF_CONFIG>>"]', arg(0), after_equals
    ),
    "value-double-quoted": Case(
        '          env:\n            - name: TF_CONFIG\n              value: "<<TF_CONFIG>>"',
        env,
        whole,
    ),
    "sh-c-double-quoted-with-single-quotes-inside": Case(
        """          command: ["sh", "-c", "TF_CONFIG='<<TF_CONFIG>>' python train.py"]""",
        command(2),
        after_equals,
    ),
    "double-quoted-over-lines": Case(
        '          args: ["--x", "--tf_config=<<TF_CONFIG>>\n            --steps=5"]',
        arg(1),
        after_equals,
    ),
    "double-quoted-marker-alone-on-a-line": Case(
        '          command: ["sh", "-c", "export TF_CONFIG=\n            <<TF_CONFIG>>\n'
        '            && python train.py"]',
        command(2),
        after_equals,
    ),
    "block-list-double-quoted": Case(
        '          args:\n            - "--tf_config=<<TF_CONFIG>>"', arg(0), after_equals
    ),
    # single-quoted
    "flow-list-single-quoted": Case(
        "          args: ['--tf_config=<<TF_CONFIG>>']", arg(0), after_equals
    ),
    "value-single-quoted": Case(
        "          env:\n            - name: TF_CONFIG\n              value: '<<TF_CONFIG>>'",
        env,
        whole,
    ),
    "sh-c-single-quoted-with-double-quotes-inside": Case(
        """          command: ['sh', '-c', 'TF_CONFIG="<<TF_CONFIG>>" python train.py']""",
        command(2),
        after_equals,
    ),
    "single-quoted-over-lines": Case(
        "          args:\n            - '--it''s=<<TF_CONFIG>>\n              --more'",
        arg(0),
        after_equals,
    ),
    # plain, flow context
    "flow-list-plain": Case("          args: [--tf_config=<<TF_CONFIG>>]", arg(0), after_equals),
    "flow-list-plain-whole": Case("          args: [--tf_config, <<TF_CONFIG>>]", arg(1), whole),
    "flow-list-plain-over-lines": Case(
        "          args: [--a,\n            --tf_config=<<TF_CONFIG>>,\n            --b]",
        arg(1),
        after_equals,
    ),
    "flow-list-marker-alone-on-a-line": Case(
        "          args: [\n            --a,\n            <<TF_CONFIG>>\n          ]", arg(1), whole
    ),
    "flow-list-plain-with-a-quote-and-text-after": Case(
        "          args: [--it's=<<TF_CONFIG>>;x]",
        arg(0),
        lambda v: json.loads(v[v.index("=") + 1 : -2]),
    ),
    "flow-list-plain-with-anchor": Case(
        "          args: [&a --tf_config=<<TF_CONFIG>>]", arg(0), after_equals
    ),
    "flow-mapping-plain": Case(
        "          env: [{name: TF_CONFIG, value: <<TF_CONFIG>>}]", env, whole
    ),
    "flow-mapping-plain-over-lines": Case(
        "          env: [{name: TF_CONFIG,\n            value: --tf=<<TF_CONFIG>>}]",
        env,
        after_equals,
    ),
    "flow-plain-two-markers": Case(
        "          args: [--a=<<TF_CONFIG>> --b=<<TF_CONFIG>>]",
        arg(0),
        lambda v: after_equals(v.split(" --b")[0]),
    ),
    # plain, block context
    "block-list-plain": Case(
        "          args:\n            - --tf_config=<<TF_CONFIG>>", arg(0), after_equals
    ),
    "block-list-plain-whole": Case("          args:\n            - <<TF_CONFIG>>", arg(0), whole),
    "block-list-plain-starting-with-marker": Case(
        "          args:\n            - <<TF_CONFIG>> --verbose",
        arg(0),
        lambda v: json.loads(v.removesuffix(" --verbose")),
    ),
    "value-plain": Case(
        "          env:\n            - name: TF_CONFIG\n              value: <<TF_CONFIG>>",
        env,
        whole,
    ),
    "value-plain-with-comment": Case(
        "          env:\n            - name: TF_CONFIG\n              value: <<TF_CONFIG>>  # c",
        env,
        whole,
    ),
    "value-plain-tagged-str": Case(
        "          env:\n            - name: TF_CONFIG\n              value: !!str <<TF_CONFIG>>",
        env,
        whole,
    ),
    "value-next-line": Case(
        "          env:\n            - name: TF_CONFIG\n              value:\n<<TF_CONFIG>>",
        env,
        whole,
    ),
    "block-plain-over-lines": Case(
        "          args:\n            - --tf_config=\n              <<TF_CONFIG>>",
        arg(0),
        after_equals,
    ),
    # block scalars
    "folded-column-0": Case(
        "          env:\n            - name: TF_CONFIG\n              value: >\n<<TF_CONFIG>>",
        env,
        whole,
    ),
    "literal-indented": Case(
        "          env:\n            - name: TF_CONFIG\n              value: |-\n"
        "                <<TF_CONFIG>>",
        env,
        whole,
    ),
    "literal-script": Case(
        "          command:\n            - sh\n            - -c\n            - |\n"
        "              export TF_CONFIG='<<TF_CONFIG>>'\n              python train.py",
        command(2),
        after_equals,
    ),
    "literal-script-marker-alone-on-a-line": Case(
        "          command:\n            - sh\n            - -c\n            - |\n"
        "              echo config:\n              <<TF_CONFIG>>\n              python train.py",
        command(2),
        line_starting_with_brace,
    ),
    "literal-json-then-more-lines": Case(
        "          args:\n            - |\n              <<TF_CONFIG>>\n              more",
        arg(0),
        line_starting_with_brace,
    ),
    "legacy-syntax-in-flow": Case(
        "          args: [--tf_config={{.TF_CONFIG}}]", arg(0), after_equals
    ),
}


def cluster_of(
    roles: list[str], endpoints: list[str], evaluator_in_cluster: bool = False
) -> dict[str, list[str]]:
    cluster: dict[str, list[str]] = {}
    for role, endpoint in zip(roles, endpoints, strict=True):
        if role != "evaluator" or evaluator_in_cluster:
            cluster.setdefault(role, []).append(endpoint)
    return dict(sorted(cluster.items()))


def tasks_of(roles: list[str]) -> list[tuple[str, int]]:
    counters: dict[str, int] = {}
    tasks = []
    for role in roles:
        tasks.append((role, counters.get(role, 0)))
        counters[role] = counters.get(role, 0) + 1
    return tasks


class Run(NamedTuple):
    args: tuple[str, ...]
    roles: list[str]
    endpoints: list[str]  # in the order of the roles


def node_list(tmp_path: Path, count: int) -> Path:
    """A saved `kubectl get nodes -o json`, with one IPv6 node and one tainted node left out."""
    nodes = [
        make_node(f"n{i}", internal_ip=f"10.1.0.{i + 1}" if i != 1 else "fd00::2")
        for i in range(count)
    ]
    nodes.append(make_node("z-tainted", gpu_taint=True, gpus=1))
    items = [{"apiVersion": "v1", "kind": "Node", **n} for n in nodes]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    return write(tmp_path / "nodes.json", text)


def runs(tmp_path: Path) -> dict[str, Run]:
    many = [f"host-{i}.example.com" for i in range(9)]
    ips = ["10.1.0.1", "[fd00::2]", "10.1.0.3", "10.1.0.4"]
    return {
        "one-host": Run(("--nodes", "solo", "--psn", "0"), ["worker"], ["solo:2222"]),
        "three-hosts": Run(
            ("--nodes", "a,b,c"), ["ps", "worker", "worker"], ["a:2222", "b:2222", "c:2222"]
        ),
        "many-hosts-all-roles": Run(
            ("--nodes", ",".join(many), "--chief", "--evaluator", "--psn", "2", "--port", "7000"),
            ["chief", "ps", "ps", *["worker"] * 5, "evaluator"],
            [f"{h}:7000" for h in many],
        ),
        "address-internal-ip": Run(
            ("--nodes-file", str(node_list(tmp_path, 4)), "--address", "internal-ip"),
            ["ps", "worker", "worker", "worker"],
            [f"{ip}:2222" for ip in ips],
        ),
        "network-pod": Run(
            ("--nodes", "a,b,c", "--network", "pod", "--namespace", "ml"),
            ["ps", "worker", "worker"],
            [f"t-{r}.ml.svc:2222" for r in ("ps-0", "worker-0", "worker-1")],
        ),
        "network-pod-tasks-per-host": Run(
            ("--nodes", "a,b", "--network", "pod", "--tasks-per-host", "2", "--no-labels"),
            ["ps", "worker", "worker", "worker"],
            [
                "t-ps-0.default.svc:2222",
                "t-worker-0.default.svc:2223",
                "t-worker-1.default.svc:2222",
                "t-worker-2.default.svc:2223",
            ],
        ),
    }


RUNS = (
    "one-host",
    "three-hosts",
    "many-hosts-all-roles",
    "address-internal-ip",
    "network-pod",
    "network-pod-tasks-per-host",
)


@pytest.mark.parametrize("run_name", RUNS)
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_tf_config_reads_back_in_every_style(
    cli: Any, tmp_path: Path, case_name: str, run_name: str
) -> None:
    case = CASES[case_name]
    run = runs(tmp_path)[run_name]
    template = write(tmp_path / "t.yaml", TEMPLATE.format(snippet=case.snippet))
    result = cli(str(template), *run.args, "-o", "-")
    assert result.code == 0, result.err
    jobs = [d for d in result.docs if d["kind"] == "Job"]
    cluster = cluster_of(run.roles, run.endpoints)
    assert [j["metadata"]["name"] for j in jobs] == [f"t-{r}-{i}" for r, i in tasks_of(run.roles)]
    for job, (role, index) in zip(jobs, tasks_of(run.roles), strict=True):
        first, after = job["spec"]["template"]["spec"]["containers"]
        assert after == {"name": "after", "image": "busybox"}
        config = case.read(case.field(first))
        assert config == {"cluster": cluster, "task": {"type": role, "index": index}}


def test_a_tf_config_in_a_comment_stays_a_comment(cli: Any, tmp_path: Path) -> None:
    snippet = "          # the cluster: <<TF_CONFIG>>\n          args: [--tf_config=<<TF_CONFIG>>]"
    template = write(tmp_path / "t.yaml", TEMPLATE.format(snippet=snippet))
    result = cli(str(template), "--nodes", "a,b", "-o", "-")
    assert result.code == 0, result.err
    assert [
        after_equals(d["spec"]["template"]["spec"]["containers"][0]["args"][0]) for d in result.docs
    ] == [
        {"cluster": {"ps": ["a:2222"], "worker": ["b:2222"]}, "task": {"type": t, "index": 0}}
        for t in ("ps", "worker")
    ]
    assert '          # the cluster: {"cluster":' in result.out


def test_existing_layouts_keep_their_bytes(cli: Any, tmp_path: Path) -> None:
    """The original tool's block layout, and quoting where a plain or quoted value already worked."""
    snippet = (
        "          args: [--tf, <<TF_CONFIG>>, '--q=<<TF_CONFIG>>', \"--d=<<TF_CONFIG>>\"]\n"
        "          env:\n            - name: TF_CONFIG\n              value: >\n<<TF_CONFIG>>"
    )
    template = write(tmp_path / "t.yaml", TEMPLATE.format(snippet=snippet))
    out = cli(str(template), "--nodes", "a,b", "--no-labels", "-o", "-").out
    compact = '{"cluster":{"ps":["a:2222"],"worker":["b:2222"]},"task":{"index":0,"type":"ps"}}'
    escaped = compact.replace('"', '\\"')
    assert f"          args: [--tf, '{compact}', '--q={compact}', \"--d={escaped}\"]\n" in out
    pad = " " * 16
    assert (
        f'              value: >\n{pad}{{\n{pad}  "cluster": {{\n'
        f'{pad}    "ps": ["a:2222"],\n{pad}    "worker": ["b:2222"]\n{pad}  }},\n'
        f'{pad}  "task": {{\n{pad}    "index": 0,\n{pad}    "type": "ps"\n{pad}  }}\n{pad}}}\n\n'
    ) in out


FAILURES = {
    "a-mapping-key": (
        "          args: {<<TF_CONFIG>>: x}",
        SNIPPET_LINE,
        r"<<TF_CONFIG>> stands in a mapping key",
    ),
    "a-flow-mapping-key-on-a-later-line": (
        "          env:\n            - {name: TF_CONFIG,\n               <<TF_CONFIG>>: x}",
        SNIPPET_LINE + 2,
        r"<<TF_CONFIG>> stands in a mapping key",
    ),
    "a-value-tagged-int": (
        "          env:\n            - name: TF_CONFIG\n              value: !!int <<TF_CONFIG>>",
        SNIPPET_LINE + 2,
        r"<<TF_CONFIG>> stands in a value tagged tag:yaml.org,2002:int",
    ),
    "an-anchor-name": (
        "          args: &<<TF_CONFIG>> [x]",
        SNIPPET_LINE,
        r"is not valid YAML .*'args: &<<TF_CONFIG>> \[x\]'",
    ),
    "an-unterminated-double-quote": (
        '          args: "--tf_config=<<TF_CONFIG>>',
        SNIPPET_LINE,
        r"is not valid YAML .*end of stream",
    ),
    "an-unclosed-flow-list": (
        '          args: ["--tf_config=<<TF_CONFIG>>"\n          image: x',
        SNIPPET_LINE + 1,
        r"is not valid YAML",
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_a_place_that_cannot_hold_tf_config_names_the_template_line(
    cli: Any, tmp_path: Path, name: str
) -> None:
    snippet, line, pattern = FAILURES[name]
    template = write(tmp_path / "t.yaml", TEMPLATE.format(snippet=snippet))
    result = cli(str(template), "--nodes", "host-a,host-b", "-o", "-")
    assert result.code == 1
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("simpletfjob: error: ")
    assert re.search(pattern, lines[0]), lines[0]
    assert f"t.yaml:{line}" in lines[0]
    assert "stub" not in lines[0] and "\ue000" not in lines[0] and "\ue001" not in lines[0]
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    "metadata",
    ["  name: t-<<TF_CONFIG>>", "  name: t-<<type>>-<<index>>\n  namespace: <<TF_CONFIG>>"],
)
def test_tf_config_in_a_name_or_namespace_is_refused(
    cli: Any, tmp_path: Path, metadata: str
) -> None:
    text = TEMPLATE.format(snippet="          args: [x]").replace(
        "  name: t-<<type>>-<<index>>", metadata
    )
    result = cli(str(write(tmp_path / "t.yaml", text)), "--nodes", "a,b", "-o", "-")
    assert result.code == 1 and result.out == ""
    (line,) = result.err.splitlines()
    assert "t.yaml:4" in line or "t.yaml:5" in line, line
    assert "<<TF_CONFIG>>" in line and "\ue000" not in line and "stub" not in line


LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
HOSTS = st.lists(
    st.builds(".".join, st.lists(LABEL, min_size=1, max_size=3)),
    min_size=1,
    max_size=8,
    unique=True,
)


@given(
    hosts=HOSTS,
    case_name=st.sampled_from(sorted(CASES)),
    psn=st.integers(0, 2),
    chief=st.booleans(),
    evaluator=st.booleans(),
    per_host=st.integers(1, 2),
    network=st.sampled_from(["host", "pod"]),
)
def test_any_hosts_and_style_read_back_with_no_endpoint_twice(
    tmp_path_factory: Any,
    capsys: Any,
    hosts: list[str],
    case_name: str,
    psn: int,
    chief: bool,
    evaluator: bool,
    per_host: int,
    network: str,
) -> None:
    case = CASES[case_name]
    template = write(tmp_path_factory.mktemp("p") / "t.yaml", TEMPLATE.format(snippet=case.snippet))
    args = [str(template), "--nodes", ",".join(hosts), "--psn", str(psn), "-o", "-"]
    args += ["--tasks-per-host", str(per_host), "--network", network]
    args += ["--chief"] * chief + ["--evaluator"] * evaluator
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    slots = len(hosts) * per_host
    if slots - psn - chief - evaluator < 1:
        assert code == 1 and out == "" and "no task is left for a worker" in err
        return
    assert code == 0, err
    jobs = [d for d in load_all(out) if d["kind"] == "Job"]
    assert len(jobs) == slots
    configs = []
    for job in jobs:
        first = job["spec"]["template"]["spec"]["containers"][0]
        configs.append(case.read(case.field(first)))
    cluster = configs[0]["cluster"]
    endpoints = [e for role in cluster.values() for e in role]
    assert len(endpoints) == len(set(endpoints)) == slots - int(evaluator)
    for job, config in zip(jobs, configs, strict=True):
        role, index = config["task"]["type"], config["task"]["index"]
        assert job["metadata"]["name"] == f"t-{role}-{index}"
        assert config["cluster"] == cluster
