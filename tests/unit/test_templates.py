"""Built-in templates, template headers, values layering, and the `templates` and `init` commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.errors import TemplateError
from simpletfjob.template.catalog import (
    Header,
    TemplateSource,
    builtin_names,
    parse_header,
    read_builtin,
)
from tests.conftest import ROOT, assert_one_line_error, needs_extra, tf_config_of, write
from tests.support.templates import HEADER_VALUES as BODY
from tests.support.templates import OPTIONAL_VALUES as OPTIONAL

TF_BUILTINS = [
    "pod-network",
    "tf1-flags",
    "tf1-ps-hostnetwork",
    "tf2-multiworker",
    "tf2-parameter-server",
]
BUILTINS = sorted([*TF_BUILTINS, "pytorch-ddp", "jax-multiprocess"])
HOSTS = ["a", "b", "c", "d"]


def test_the_built_ins_are_there() -> None:
    assert builtin_names() == BUILTINS
    for name in BUILTINS:
        assert (ROOT / "templates" / f"{name}.yaml").read_text() == read_builtin(name)


def roles_of(docs: list[Any]) -> list[str]:
    return [d["metadata"]["labels"]["tf-role"] for d in docs]


@needs_extra("validate")
@pytest.mark.parametrize("name", TF_BUILTINS)
def test_each_built_in_renders_from_a_host_list_alone_and_validates(
    cli: Any, tmp_path: Path, name: str
) -> None:
    result = cli(name, "--nodes", ",".join(HOSTS), "-o", "-", "--validate", cwd=tmp_path)
    assert result.code == 0, result.err
    assert "valid for Kubernetes" in result.err
    docs = [d for d in result.docs if d["kind"] != "Service"]
    assert len(docs) == len(HOSTS)
    assert list(tmp_path.iterdir()) == []
    for doc, host in zip(docs, HOSTS, strict=True):
        assert (doc["apiVersion"], doc["kind"]) == ("batch/v1", "Job")
        spec = doc["spec"]["template"]["spec"]
        if name == "pod-network":  # the scheduler places the pods; each has a Service
            assert "nodeName" not in spec and "hostNetwork" not in spec
            assert len(result.docs) == 2 * len(HOSTS)
        else:
            assert spec["nodeName"] == host
        assert spec["restartPolicy"] in ("OnFailure", "Never")
        assert isinstance(doc["spec"]["backoffLimit"], int)
        container = spec["containers"][0]
        assert container["resources"]["requests"]
        assert container["ports"][0]["containerPort"] == 2222
        if name != "tf1-flags":
            config = tf_config_of(doc)
            assert config["task"]["type"] == doc["metadata"]["labels"]["tf-role"]


def test_header_option_defaults(cli: Any, tmp_path: Path) -> None:
    nodes = ("--nodes", ",".join(HOSTS), "-o", "-")
    assert roles_of(cli("tf2-multiworker", *nodes, cwd=tmp_path).docs) == ["worker"] * 4
    assert roles_of(cli("tf2-parameter-server", *nodes, cwd=tmp_path).docs) == [
        "chief",
        "ps",
        "worker",
        "worker",
    ]
    assert roles_of(cli("tf1-flags", *nodes, cwd=tmp_path).docs) == [
        "ps",
        "worker",
        "worker",
        "worker",
    ]


def test_the_command_line_overrides_header_option_defaults(cli: Any, tmp_path: Path) -> None:
    nodes = ("--nodes", ",".join(HOSTS), "-o", "-")
    result = cli("tf2-multiworker", "--psn", "1", *nodes, cwd=tmp_path)
    assert roles_of(result.docs) == ["ps", "worker", "worker", "worker"]
    result = cli("tf2-parameter-server", "--no-chief", "--psn", "2", *nodes, cwd=tmp_path)
    assert roles_of(result.docs) == ["ps", "ps", "worker", "worker"]
    result = cli("tf2-parameter-server", "--evaluator", *nodes, cwd=tmp_path)
    assert roles_of(result.docs) == ["chief", "ps", "worker", "evaluator"]
    assert "evaluator" not in tf_config_of(result.docs[0])["cluster"]
    # Giving an option its default value explicitly still counts as giving it.
    result = cli("tf2-multiworker", "--psn", "1", "--port", "2222", *nodes, cwd=tmp_path)
    assert roles_of(result.docs)[0] == "ps"


def test_a_built_ins_default_output_is_in_the_current_directory(cli: Any, tmp_path: Path) -> None:
    result = cli("tf1-flags", "--nodes", "a,b", cwd=tmp_path)
    assert result.code == 0, result.err
    assert [p.name for p in tmp_path.iterdir()] == ["tf1-flags_tfjob.yaml"]
    assert "wrote 2 tasks to tf1-flags_tfjob.yaml" in result.err


@needs_extra("validate")
def test_values_switch_the_data_volume(cli: Any, tmp_path: Path) -> None:
    nodes = ("--nodes", "a,b", "-o", "-")
    volume = cli("tf2-multiworker", *nodes, cwd=tmp_path).docs[0]["spec"]["template"]["spec"][
        "volumes"
    ][0]
    assert volume == {"name": "data", "emptyDir": {}}  # nothing to set up on the nodes
    result = cli("tf2-multiworker", "--set", "pvc=shared", *nodes, "--validate", cwd=tmp_path)
    volume = result.docs[0]["spec"]["template"]["spec"]["volumes"][0]
    assert volume == {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}
    result = cli(
        "tf1-ps-hostnetwork",
        "--set",
        "nfs_server=10.1.2.3",
        *nodes,
        "--validate",
        cwd=tmp_path,
    )
    volume = result.docs[0]["spec"]["template"]["spec"]["volumes"][0]
    assert volume["nfs"] == {"server": "10.1.2.3", "path": "/"}
    result = cli("tf2-multiworker", "--set", "gpus=0", *nodes, cwd=tmp_path)
    limits = result.docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in limits


def test_tf1_flags_passes_hosts_as_flags(cli: Any, tmp_path: Path) -> None:
    result = cli("tf1-flags", "--nodes", "a,b,c", "--port", "3333", "-o", "-", cwd=tmp_path)
    commands = [d["spec"]["template"]["spec"]["containers"][0]["command"] for d in result.docs]
    assert [c[-4:] for c in commands] == [
        [
            "--ps_hosts=a:3333",
            "--worker_hosts=b:3333,c:3333",
            f"--job_name={role}",
            f"--task_index={index}",
        ]
        for role, index in [("ps", 0), ("worker", 0), ("worker", 1)]
    ]
    assert all("env" not in d["spec"]["template"]["spec"]["containers"][0] for d in result.docs)


# ---- the templates command -------------------------------------------------------------------


def test_templates_lists_every_built_in_with_its_description(cli: Any) -> None:
    result = cli("templates")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert [line.split()[0] for line in lines] == BUILTINS
    for line, name in zip(lines, BUILTINS, strict=True):
        description = parse_header(read_builtin(name), name).description
        assert description and line.endswith(description)
    assert cli("templates", "--help").out.startswith("Usage: simpletfjob templates")


@pytest.mark.parametrize(
    ("args", "code", "pattern"),
    [
        (
            ["init", "tf3"],
            1,
            r"no built-in template 'tf3'; available: jax-multiprocess, pod-network, pytorch-ddp, tf1",
        ),
        (["init"], 2, r"Missing argument 'NAME'.*simpletfjob init --help"),
        (
            ["tf3", "--nodes", "a,b"],
            1,
            r"'tf3' is neither a file nor a built-in template; built-ins: jax-multiprocess, pod-network,",
        ),
        (["templates", "extra"], 2, r"unexpected extra argument"),
    ],
)
def test_command_errors(cli: Any, tmp_path: Path, args: list[str], code: int, pattern: str) -> None:
    assert_one_line_error(cli(*args, cwd=tmp_path), code, pattern)
    assert list(tmp_path.iterdir()) == []


def test_a_file_wins_over_a_built_in_name(cli: Any, tmp_path: Path) -> None:
    template = "kind: Job\nmetadata:\n  name: mine-<<type>>-<<index>>\n"
    write(tmp_path / "tf1-flags", template)
    write(tmp_path / "templates", template)
    result = cli("tf1-flags", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert [d["metadata"]["name"] for d in result.docs] == ["mine-ps-0", "mine-worker-0"]
    # The word `templates` first is the command; ./templates is the file.
    assert cli("templates", cwd=tmp_path).out.startswith("jax-multiprocess")
    result = cli("./templates", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert [d["metadata"]["name"] for d in result.docs] == ["mine-ps-0", "mine-worker-0"]


# ---- headers ------------------------------------------------------------------------------

HEADER = """\
# A test job.
#
# More words, even <<not_a_variable>> and <<TF_CONFIG>>.
#
# simpletfjob:
#   options:
#     psn: 0
#     evaluator-in-cluster: true
#   values:
#     image: from-header
#     tag: header
#     res:
#       cpu: 1
#       memory: 1Gi
"""


def annotations(result: Any) -> dict[str, str]:
    """The template's own annotations (simpletfjob adds the run's success policy and the
    document's name beside them)."""
    assert result.code == 0, result.err
    found = dict(result.docs[0]["metadata"]["annotations"])
    assert found.pop("simpletfjob/success-policy") == "worker0"
    assert found.pop("simpletfjob/name") == result.docs[0]["metadata"]["name"]
    return found


def test_parse_header() -> None:
    header = parse_header(HEADER + BODY, "t.yaml")
    assert header == Header(
        description="A test job.",
        values={"image": "from-header", "tag": "header", "res": {"cpu": 1, "memory": "1Gi"}},
        options={"psn": 0, "evaluator_in_cluster": True},
        lines=len(HEADER.splitlines()),
    )
    assert parse_header("# just a comment\nkind: Job\n", "t.yaml") == Header("just a comment")
    assert parse_header("kind: Job\n# simpletfjob:\n#  values: {a: 1}\n", "t") == Header()


def test_the_header_leaves_nothing_in_the_output_and_keeps_line_numbers(
    cli: Any, tmp_path: Path
) -> None:
    write(tmp_path / "t.yaml", HEADER + BODY + "  bad: <<missing>>\n")
    result = cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    line = len((HEADER + BODY).splitlines()) + 1
    assert_one_line_error(result, 1, rf"^simpletfjob: error: t.yaml:{line}: 'missing' is undefined")
    write(tmp_path / "t.yaml", HEADER + BODY)
    result = cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    assert result.out.startswith("apiVersion: batch/v1\n")
    assert "#" not in result.out


def test_a_template_without_a_header_keeps_its_leading_comments(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", "# my job\n" + BODY.replace("<<image>>:<<tag>>", "x"))
    source = TemplateSource("t.yaml", "# my job\n", parse_header("# my job\n", "t.yaml"))
    assert source.render_text() == "# my job\n"
    result = cli(
        "t.yaml",
        "--nodes",
        "a,b",
        "--set",
        "res.cpu=1",
        "--set",
        "res.memory=1",
        "-o",
        "-",
        cwd=tmp_path,
    )
    assert result.code == 0, result.err
    assert result.out.startswith("# my job\napiVersion")


def test_header_defaults_apply_and_the_command_line_wins(cli: Any, tmp_path: Path) -> None:
    body = BODY.replace("name: t-", "name: t-x-") + "    tf: '<<TF_CONFIG>>'\n"
    write(tmp_path / "t.yaml", HEADER + body)
    result = cli("t.yaml", "--nodes", "a,b", "--evaluator", "-o", "-", cwd=tmp_path)
    found = annotations(result)
    assert json.loads(found.pop("tf"))["cluster"] == {"worker": ["a:2222"], "evaluator": ["b:2222"]}
    assert found == {"image": "from-header:header", "cpu": "1", "memory": "1Gi"}
    assert [d["metadata"]["name"] for d in result.docs] == ["t-x-worker-0", "t-x-evaluator-0"]
    result = cli(
        "t.yaml",
        "--nodes",
        "a,b",
        "--evaluator",
        "--no-evaluator-in-cluster",
        "-o",
        "-",
        cwd=tmp_path,
    )
    assert json.loads(annotations(result)["tf"])["cluster"] == {"worker": ["a:2222"]}
    result = cli("t.yaml", "--nodes", "a,b", "--psn", "1", "-o", "-", cwd=tmp_path)
    assert [d["metadata"]["name"] for d in result.docs] == ["t-x-ps-0", "t-x-worker-0"]


def test_values_precedence_header_then_files_in_order_then_set(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", HEADER + BODY)
    write(tmp_path / "one.yaml", "image: from-one\ntag: one\nres:\n  cpu: 2\n")
    write(tmp_path / "two.yaml", "tag: two\n")

    def run(*args: str) -> dict[str, str]:
        return annotations(cli("t.yaml", "--nodes", "a,b", "-o", "-", *args, cwd=tmp_path))

    assert run() == {"image": "from-header:header", "cpu": "1", "memory": "1Gi"}
    # -f beats the header, and nested mappings merge key by key
    assert run("-f", "one.yaml") == {"image": "from-one:one", "cpu": "2", "memory": "1Gi"}
    # a later -f beats an earlier one
    assert run("-f", "one.yaml", "--values", "two.yaml") == {
        "image": "from-one:two",
        "cpu": "2",
        "memory": "1Gi",
    }
    assert run("-f", "two.yaml", "-f", "one.yaml")["image"] == "from-one:one"
    # --set beats every -f, wherever it stands; the later --set wins
    assert run("--set", "tag=set", "-f", "one.yaml", "-f", "two.yaml")["image"] == "from-one:set"
    assert run("--set", "tag=1", "--set", "tag=2", "--set", "res.memory=3Gi") == {
        "image": "from-header:2",
        "cpu": "1",
        "memory": "3Gi",
    }


@pytest.mark.parametrize(
    ("header", "pattern"),
    [
        (
            "# simpletfjob:\n#   options:\n#     psm: 0\n",
            r"t.yaml:3: unknown option 'psm' in the template header; a header can set: chief, "
            r"cleanup-after, deadline, evaluator, evaluator-in-cluster, framework, min-workers, network, nproc-per-node, num, port, "
            r"progress-pattern, progress-task, psn, queue, restart-exit-codes, restart-on, "
            r"stall-timeout, tasks-per-host",
        ),
        (
            "# x\n# simpletfjob:\n#   options:\n#     psn: two\n",
            r"t.yaml:4: option 'psn' .* must be an integer, not 'two'",
        ),
        (
            "# simpletfjob:\n#   options:\n#     chief: 1\n",
            r"t.yaml:3: option 'chief' .* must be true or false, not 1",
        ),
        (
            "# simpletfjob:\n#   options:\n#     psn: true\n",
            r"option 'psn' .* must be an integer, not True",
        ),
        (
            "# simpletfjob:\n#   options:\n#     port: 0\n",
            r"t.yaml:3: option 'port' .* between 1 and 65535",
        ),
        ("# simpletfjob:\n#   options:\n#     nodes: a,b\n", r"unknown option 'nodes'"),
        (
            "# simpletfjob:\n#   options:\n#     network: hostx\n",
            r"t.yaml:3: option 'network' .* must be host or pod, not 'hostx'",
        ),
        (
            "# simpletfjob:\n#   options:\n#     tasks-per-host: 0\n",
            r"t.yaml:3: option 'tasks-per-host' .* must be at least 1",
        ),
        ("# simpletfjob:\n#   option:\n#     psn: 0\n", r"t.yaml:2: unknown header key 'option'"),
        (
            "# simpletfjob:\n#   options: [psn]\n",
            r"t.yaml:2: 'options:' in the template header must be a mapping",
        ),
        ("# simpletfjob:\n#   values: [1\n", r"t.yaml:3: the template header is not valid YAML"),
        ("# simpletfjob:\n#   values:\n#     port: 1\n", r"t.yaml:3: 'port' is set by simpletfjob"),
        (
            "# simpletfjob:\n#   values:\n#     a-b: 1\n",
            r"t.yaml:3: 'a-b' in the header's values is not a variable name",
        ),
        ("# simpletfjob:\n#   - 1\n", r"t.yaml:1: the simpletfjob: header must be a mapping"),
    ],
)
def test_bad_headers(cli: Any, tmp_path: Path, header: str, pattern: str) -> None:
    write(tmp_path / "t.yaml", header + BODY)
    result = cli("t.yaml", "--nodes", "a,b", cwd=tmp_path)
    assert_one_line_error(result, 1, pattern)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.yaml"]
    with pytest.raises(TemplateError):
        parse_header(header, "t.yaml")


def test_a_value_with_no_default_is_named(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", "# simpletfjob:\n#   values:\n#     image: x\n" + BODY)
    result = cli("t.yaml", "--nodes", "a,b", cwd=tmp_path)
    assert_one_line_error(
        result, 1, r"t.yaml:9: 'tag' is undefined; give it with --set tag=VALUE or -f values.yaml"
    )


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("- a\n- b\n", r"values file 'v.yaml' must be a YAML mapping, not a list"),
        ("just text\n", r"values file 'v.yaml' must be a YAML mapping, not a str"),
        ("a: [1\n", r"v.yaml:2: not valid YAML"),
        ("type: ps\n", r"'type' is set by simpletfjob for each task"),
    ],
)
def test_bad_values_files(cli: Any, tmp_path: Path, content: str, pattern: str) -> None:
    write(tmp_path / "v.yaml", content)
    result = cli("tf1-flags", "--nodes", "a,b", "-f", "v.yaml", cwd=tmp_path)
    assert_one_line_error(result, 1 if "set by" not in pattern else 2, pattern)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.yaml"]
    assert_one_line_error(
        cli("tf1-flags", "--nodes", "a,b", "-f", "nope.yaml", cwd=tmp_path),
        1,
        r"values file 'nope.yaml' does not exist",
    )


def test_built_ins_are_found_when_installed_without_the_source_tree(tmp_path: Path) -> None:
    """The package data path: a copy of the package with templates/ inside it, as a wheel has."""
    import shutil

    package = tmp_path / "simpletfjob"
    shutil.copytree(ROOT / "simpletfjob", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "templates", package / "templates")
    code = "from simpletfjob.template.catalog import builtin_names, _builtin_dir; print(_builtin_dir(), builtin_names())"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert str(package / "templates") in proc.stdout
    assert json.dumps(BUILTINS).replace('"', "'") in proc.stdout


def test_a_header_can_choose_pod_networking_and_tasks_per_host(cli: Any, tmp_path: Path) -> None:
    header = "# simpletfjob:\n#   options:\n#     network: pod\n#     tasks-per-host: 2\n"
    body = (
        "kind: Job\napiVersion: batch/v1\nmetadata:\n  name: t-<<type>>-<<index>>\n"
        "spec:\n  template:\n    spec:\n      containers: [{name: c, image: i, "
        "env: [{name: TF_CONFIG, value: '<<TF_CONFIG>>'}]}]\n"
    )
    write(tmp_path / "t.yaml", header + body)
    result = cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    kinds = [d["kind"] for d in result.docs]
    assert kinds == ["Job", "Service"] * 4
    host = cli(
        "t.yaml",
        "--nodes",
        "a,b",
        "--network",
        "host",
        "--tasks-per-host",
        "1",
        "-o",
        "-",
        cwd=tmp_path,
    )
    assert [d["kind"] for d in host.docs] == ["Job", "Job"]


def test_an_optional_value_is_asked_about_as_in_jinja_and_helm(cli: Any, tmp_path: Path) -> None:
    """`is defined` and `default(...)` make a value optional; left out, the template says what then."""
    write(tmp_path / "t.yaml", OPTIONAL)
    plain = cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert plain.code == 0, plain.err
    containers = [d["spec"]["template"]["spec"]["containers"][0] for d in plain.docs]
    assert [c["image"] for c in containers] == ["tensorflow/tensorflow"] * 2
    assert all("resources" not in c for c in containers)
    given = cli("t.yaml", "--nodes", "a,b", "--set", "gpus=2", "--set", "image=tf:2", "-o", "-",
                cwd=tmp_path)  # fmt: skip
    containers = [d["spec"]["template"]["spec"]["containers"][0] for d in given.docs]
    assert [(c["image"], c["resources"]["limits"]["nvidia.com/gpu"]) for c in containers] == [
        ("tf:2", 2),
        ("tf:2", 2),
    ]
    # A use that no test guards is still an error, at render time, naming its line.
    unguarded = "  name: t-<<type>>-<<index>>\n  labels: {image: '<< image >>'}\n"
    write(tmp_path / "t.yaml", OPTIONAL.replace("  name: t-<<type>>-<<index>>\n", unguarded))
    refused = cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert_one_line_error(
        refused,
        1,
        r"^simpletfjob: error: t.yaml:5: 'image' is undefined; give it with "
        r"--set image=VALUE or -f values.yaml$",
    )
    # A name nothing asks about is refused before anything renders, as before.
    write(tmp_path / "t.yaml", OPTIONAL.replace("{% if gpus is defined %}", "{% if True %}"))
    assert_one_line_error(
        cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path),
        1,
        r"^simpletfjob: error: t.yaml:14: 'gpus' is undefined; give it with --set gpus=VALUE "
        r"or -f values.yaml, or use one of: ",
    )


def _jobs(docs: list[Any]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == "Job"]


@pytest.mark.parametrize("name", BUILTINS)
def test_a_built_in_asks_for_no_gpu_and_no_volume_until_one_set_asks(
    cli: Any, tmp_path: Path, name: str
) -> None:
    """Out of the box a built-in runs on a one-node CPU cluster; GPUs come back with one --set."""
    gpus = "worker_gpus" if name == "tf2-parameter-server" else "gpus"
    assert f"--set {gpus}=1" in read_builtin(name)  # its header says how
    plain = cli(name, "--nodes", "a,b,c", "-o", "-", cwd=tmp_path)
    assert plain.code == 0, plain.err
    for job in _jobs(plain.docs):
        spec = job["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        assert "nvidia.com/gpu" not in container["resources"]["limits"]
        data = next(v for v in spec["volumes"] if v["name"] == "data")
        assert data == {"name": "data", "emptyDir": {}}
        assert "workingDir" not in container
        # The program is in the template: `python -c PROGRAM`, directly or through torchrun.
        argv = [*container["command"], *container.get("args", [])]
        assert "-c" in argv and "import " in argv[argv.index("-c") + 1], argv
    plain_images = {
        j["spec"]["template"]["spec"]["containers"][0]["image"] for j in _jobs(plain.docs)
    }
    asked = cli(name, "--nodes", "a,b,c", "-o", "-", "--set", f"{gpus}=1", cwd=tmp_path)
    assert asked.code == 0, asked.err
    limits = [
        j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        for j in _jobs(asked.docs)
    ]
    assert any(limit.get("nvidia.com/gpu") == 1 for limit in limits)
    images = {j["spec"]["template"]["spec"]["containers"][0]["image"] for j in _jobs(asked.docs)}
    if name in TF_BUILTINS:  # TensorFlow's GPU build is another image
        assert plain_images == {"tensorflow/tensorflow:2.21.0"}
        assert images == {"tensorflow/tensorflow:2.21.0-gpu"}
    else:  # one image for both
        assert images == plain_images


def test_the_mnist_example_needs_no_volume_and_runs_the_tf1_built_ins_program(
    cli: Any, tmp_path: Path
) -> None:
    """examples/mnist.yaml, a template of the user's own kind, runs where tf1-ps-hostnetwork runs."""
    mnist = cli(str(ROOT / "examples" / "mnist.yaml"), "--nodes", "a,b", "-o", "-")
    builtin = cli("tf1-ps-hostnetwork", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert mnist.code == 0, mnist.err

    def program(doc: dict[str, Any]) -> tuple[str, list[str]]:
        spec = doc["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        assert "volumes" not in spec or spec["volumes"][0] == {"name": "data", "emptyDir": {}}
        code = container["command"][2].splitlines()
        return container["image"], [line for line in code if not line.startswith("#")]

    assert [program(d) for d in mnist.docs] == [program(d) for d in builtin.docs]
    assert [d["metadata"]["name"] for d in mnist.docs] == ["mnist-ps-0", "mnist-worker-0"]
