"""Rendering through the CLI: placements of TF_CONFIG, legacy syntax, pass-through and template errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PLACEMENTS, expected_config, job_template, tf_config_of, write

CLUSTER = {"ps": ["a:2222"], "worker": ["b:2222", "c:2222"]}


@pytest.mark.parametrize("placement", sorted(PLACEMENTS))
def test_tf_config_round_trips_in_every_placement(cli: Any, tmp_path: Path, placement: str) -> None:
    template = write(tmp_path / "t.yaml", job_template(PLACEMENTS[placement]))
    result = cli(str(template), "--nodes", "a,b,c", "-o", "-")
    assert result.code == 0, result.err
    docs = result.docs
    assert [d["metadata"]["name"] for d in docs] == ["t-ps-0", "t-worker-0", "t-worker-1"]
    assert [tf_config_of(d) for d in docs] == [
        expected_config("ps", 0, CLUSTER),
        expected_config("worker", 0, CLUSTER),
        expected_config("worker", 1, CLUSTER),
    ]
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in docs] == ["a", "b", "c"]


def test_tf_config_in_a_list_and_in_other_text(cli: Any, tmp_path: Path) -> None:
    template = write(
        tmp_path / "t.yaml",
        "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n"
        "args: [--tf, <<TF_CONFIG>>]\n"
        "flag: --tf_config=<<TF_CONFIG>>\n",
    )
    result = cli(str(template), "--nodes", "a,b", "-o", "-")
    assert result.code == 0, result.err
    import json

    first = result.docs[0]
    config = expected_config("ps", 0, {"ps": ["a:2222"], "worker": ["b:2222"]})
    assert json.loads(first["args"][1]) == config
    assert json.loads(first["flag"].removeprefix("--tf_config=")) == config


def test_tf_config_used_in_an_expression(cli: Any, tmp_path: Path) -> None:
    template = write(
        tmp_path / "t.yaml",
        "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\nvalue: << TF_CONFIG | tojson >>\n",
    )
    result = cli(str(template), "--nodes", "a,b", "-o", "-")
    assert result.code == 0, result.err
    import json

    assert json.loads(result.docs[1]["value"])["task"] == {"type": "worker", "index": 0}


def test_legacy_and_new_syntax_render_the_same(cli: Any, tmp_path: Path) -> None:
    new = write(tmp_path / "new.yaml", job_template(PLACEMENTS["folded-column-0"]))
    legacy_text = (
        new.read_text()
        .replace("<<type>>", "{{.type}}")
        .replace("<<index>>", "{{ .index }}")
        .replace("<<host>>", "{{.host}}")
        .replace("<<TF_CONFIG>>", "{{.TF_CONFIG}}")
    )
    legacy = write(tmp_path / "legacy.yaml", legacy_text)
    a = cli(str(new), "--nodes", "a,b,c", "--name", "t", "-o", "-")
    b = cli(str(legacy), "--nodes", "a,b,c", "--name", "t", "-o", "-")
    assert a.code == b.code == 0
    assert a.out == b.out


def test_helm_and_argo_expressions_pass_through(cli: Any, tmp_path: Path) -> None:
    text = (
        "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n"
        "  annotations:\n"
        "    helm: '{{ .Values.image }}'\n"
        "    argo: '{{workflow.name}}'\n"
        "    go: '{{.Release.Name}}'\n"
        "    shell: 'echo ${#ARR[@]}'\n"
        "base: &base {a: 1}\n"
        "merged:\n  <<: *base\n  b: 2\n"
    )
    result = cli(str(write(tmp_path / "t.yaml", text)), "--nodes", "a,b", "-o", "-")
    assert result.code == 0, result.err
    doc = result.docs[0]
    assert doc["metadata"]["annotations"] == {
        "helm": "{{ .Values.image }}",
        "argo": "{{workflow.name}}",
        "go": "{{.Release.Name}}",
        "shell": "echo ${#ARR[@]}",
        "simpletfjob/success-policy": "worker0",  # added beside them
        "simpletfjob/name": "j-ps-0",
    }
    assert doc["merged"] == {"a": 1, "b": 2}


def test_other_variables(cli: Any, tmp_path: Path) -> None:
    text = (
        "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n"
        "args: ['--ps_hosts=<<ps_hosts>>', '--worker_hosts=<<worker_hosts>>', '--port=<<port>>',"
        " '<<node>>', '<<image>>', '<<num_tasks>>', '<<opts.lr>>']\n"
        "{% if type == 'ps' %}\nps_only: true\n{% endif %}\n"
    )
    result = cli(
        str(write(tmp_path / "t.yaml", text)),
        "--nodes",
        "a,b,c",
        "--port",
        "3000",
        "--set",
        "image=tf:2",
        "--set",
        "opts.lr=0.1",
        "-o",
        "-",
    )
    assert result.code == 0, result.err
    ps, worker, _ = result.docs
    assert ps["args"] == [
        "--ps_hosts=a:3000",
        "--worker_hosts=b:3000,c:3000",
        "--port=3000",
        "a",
        "tf:2",
        "3",
        "0.1",
    ]
    assert ps["ps_only"] is True
    assert "ps_only" not in worker


def test_set_values_are_typed_like_helm(cli: Any, tmp_path: Path) -> None:
    text = "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n{% if debug %}\ndebug: on\n{% endif %}\n"
    template = str(write(tmp_path / "t.yaml", text))
    off = cli(template, "--nodes", "a,b", "--set", "debug=false", "-o", "-")
    on = cli(template, "--nodes", "a,b", "--set", "debug=true", "-o", "-")
    assert "debug" not in off.docs[0]
    assert on.docs[0]["debug"] is True


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Job\nmetadata:\n  name: <<nme>>\n", r"t\.yaml:3: 'nme' is undefined"),
        ("kind: Job\nmetadata:\n  name: << type \n", r"t\.yaml:3: template syntax error"),
        ("kind: Job\n{% if %}\n", r"t\.yaml:2: template syntax error"),
        (
            "kind: Job\nmetadata:\n  name: << type.nope >>\n",
            r"t\.yaml:3: .*has no attribute 'nope'",
        ),
        ("kind: Job\n\nx: << 1 // 0 >>\n", r"t\.yaml:3: ZeroDivisionError"),
        ("kind: Job\nx: << ''.__class__.__mro__ >>\n", r"t\.yaml:2: .*unsafe"),
    ],
)
def test_template_errors_name_file_and_line(
    cli: Any, tmp_path: Path, text: str, message: str
) -> None:
    result = cli(str(write(tmp_path / "t.yaml", text)), "--nodes", "a,b", "-o", "-")
    assert result.code == 1
    assert result.out == ""
    assert len(result.err.strip().splitlines()) == 1
    import re

    assert re.search(message, result.err), result.err


def test_windows_line_endings(cli: Any, tmp_path: Path) -> None:
    template = tmp_path / "t.yaml"
    template.write_bytes(job_template(PLACEMENTS["folded-column-0"]).replace("\n", "\r\n").encode())
    result = cli(str(template), "--nodes", "a,b,c", "-o", "-")
    assert result.code == 0, result.err
    assert "\r" not in result.out
    assert tf_config_of(result.docs[2]) == expected_config("worker", 1, CLUSTER)
