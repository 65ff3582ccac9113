"""--validate: documents checked offline against the Kubernetes schema, before anything is written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.errors import SchemaError, UsageError
from simpletfjob.manifest.validate import INSTALL_HINT, Validator, resolve_version
from tests.conftest import (
    EXAMPLES,
    PLACEMENTS,
    assert_one_line_error,
    job_template,
    needs_extra,
    write,
)
from tests.support.templates import SERVICE_AND_JOB as SERVICE

JOB = job_template(PLACEMENTS["literal-indented"]).replace("      restartPolicy: Never\n", "")
JOB += """\
          ports:
            - containerPort: <<port>>
      restartPolicy: Never
  backoffLimit: 2
"""


def run_broken(cli: Any, tmp_path: Path, text: str, *args: str) -> Any:
    template = write(tmp_path / "t.yaml", text)
    out = write(tmp_path / "out.yaml", "old: content\n")
    result = cli(str(template), "--nodes", "a,b", "--validate", "-o", str(out), *args)
    assert out.read_text() == "old: content\n"
    return result


@needs_extra("validate")
def test_a_sound_template_validates(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", JOB)
    result = cli("t.yaml", "--nodes", "a,b", "--validate", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    assert result.err.rstrip().endswith("; valid for Kubernetes " + Validator(None).short_version)
    assert len(result.docs) == 2


@needs_extra("validate")
def test_the_mnist_example_validates_and_comes_out_the_same(cli: Any) -> None:
    args = ("mnist.yaml", "--nodes-file", "../hosts", "-N", "3", "--no-labels", "-o", "-")
    original = EXAMPLES / "mnist"  # the original tool's template, and its output
    plain, checked = cli(*args, cwd=original), cli(*args, "--validate", cwd=original)
    assert checked.code == 0, checked.err
    assert checked.out == plain.out == (EXAMPLES / "mnist" / "expected.yaml").read_text()


@needs_extra("validate")
def test_a_misspelled_field(cli: Any, tmp_path: Path) -> None:
    result = run_broken(cli, tmp_path, JOB.replace("containers:", "contianers:"))
    assert_one_line_error(
        result,
        1,
        r"^simpletfjob: error: document 1 \(Job 't-ps-0'\): spec\.template\.spec\.contianers: "
        r"unknown field \(additional property not allowed\)",
    )


@needs_extra("validate")
def test_a_string_where_an_integer_belongs(cli: Any, tmp_path: Path) -> None:
    result = run_broken(cli, tmp_path, JOB.replace("backoffLimit: 2", 'backoffLimit: "2"'))
    assert_one_line_error(
        result,
        1,
        r"document 1 \(Job 't-ps-0'\): spec\.backoffLimit: must be an integer, not a string \"2\"",
    )


@needs_extra("validate")
def test_a_wrong_type_inside_a_list(cli: Any, tmp_path: Path) -> None:
    result = run_broken(
        cli, tmp_path, JOB.replace("containerPort: <<port>>", "containerPort: p<<port>>")
    )
    assert_one_line_error(
        result,
        1,
        r"spec\.template\.spec\.containers\[0\]\.ports\[0\]\.containerPort: must be an integer, "
        r"not a string \"p2222\"",
    )


@needs_extra("validate")
def test_only_some_documents_wrong(cli: Any, tmp_path: Path) -> None:
    broken = JOB.replace("backoffLimit: 2", "backoffLimit: <<2 if type == 'ps' else 'x'>>")
    result = run_broken(cli, tmp_path, broken)
    assert_one_line_error(
        result,
        1,
        r"^simpletfjob: error: document 2 \(Job 't-worker-0'\): spec\.backoffLimit: must be",
    )


@needs_extra("validate")
def test_more_problems_are_counted(cli: Any, tmp_path: Path) -> None:
    broken = JOB.replace("containers:", "contianers:").replace("backoffLimit: 2", "backoffLimit: x")
    result = run_broken(cli, tmp_path, broken)
    # The misspelling comes first; the type error and the missing `containers` are counted.
    assert_one_line_error(result, 1, r"contianers: unknown field .* \(and 2 more problems\)")


@needs_extra("validate")
def test_kinds_without_a_schema(cli: Any, tmp_path: Path) -> None:
    result = run_broken(cli, tmp_path, JOB.replace("batch/v1", "batch/v2"))
    assert_one_line_error(
        result,
        1,
        r"document 1 \(Job 't-ps-0'\): Kubernetes 1\.\d+ has no kind 'Job' in apiVersion 'batch/v2'",
    )
    result = run_broken(cli, tmp_path, JOB.replace("kind: Job", "kind: Jobb"))
    assert_one_line_error(result, 1, r"has no kind 'Jobb' in apiVersion 'batch/v1'")
    result = run_broken(cli, tmp_path, "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n")
    assert_one_line_error(
        result, 1, r"document 1 \(Job 'j-ps-0'\): apiVersion: required field is missing"
    )


@needs_extra("validate")
def test_custom_resources_are_warned_about_not_checked(cli: Any, tmp_path: Path) -> None:
    write(
        tmp_path / "t.yaml",
        JOB.replace("batch/v1", "example.com/v1").replace("kind: Job", "kind: Trainer"),
    )
    result = cli("t.yaml", "--nodes", "a,b", "--validate", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    assert result.err.startswith(
        "simpletfjob: warning: document 1 (Trainer 't-ps-0'): Trainer example.com/v1 is a custom "
        "resource; --validate cannot check it\n"
    )
    assert result.err.count("warning") == 1


@needs_extra("validate")
def test_kube_version(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", JOB)
    # --kube-version alone turns validation on
    result = cli("t.yaml", "--nodes", "a,b", "--kube-version", "v1.29.3", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    assert "valid for Kubernetes 1.29" in result.err
    for version, pattern in [
        (
            "1.12",
            r"--kube-version 1.12: no schema for Kubernetes 1.12; the installed kubernetes-validate covers 1\.\d+ to 1\.\d+",
        ),
        ("9.99", r"no schema for Kubernetes 9.99; .* \(upgrade it for newer ones\)$"),
        ("1.12", r"covers 1\.\d+ to 1\.\d+$"),  # an upgrade would not help
        ("latest", r"--kube-version 'latest' is not a version such as 1.30"),
    ]:
        result = cli(
            "t.yaml", "--nodes", "a,b", "--validate", "--kube-version", version, cwd=tmp_path
        )
        assert_one_line_error(result, 2, pattern)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.yaml"]


def test_resolve_version() -> None:
    available = [(1, 28, 0), (1, 29, 0), (1, 30, 0)]
    assert resolve_version(None, available) == "1.30.0"
    assert resolve_version("1.29", available) == "1.29.0"
    assert resolve_version("v1.29.7", available) == "1.29.0"
    with pytest.raises(UsageError, match=r"covers 1\.28 to 1\.30"):
        resolve_version("1.3", available)
    with pytest.raises(SchemaError):
        resolve_version(None, [])


def test_without_kubernetes_validate(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes_validate", None)
    write(tmp_path / "t.yaml", JOB)
    result = cli("t.yaml", "--nodes", "a,b", "--validate", cwd=tmp_path)
    assert_one_line_error(
        result,
        1,
        r"--validate needs the kubernetes-validate package: pip install 'simpletfjob\[validate\]'",
    )
    assert INSTALL_HINT in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.yaml"]


# ---- the checks that run without --validate -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        (
            "<<index>>-<<type>>",
            r"Service name '0-ps' is not a valid DNS label \(RFC 1035: start with a letter",
        ),
        ("svc-<<index>>", r"documents 1 and 3 are both Service 'svc-0'"),
        ("s" * 60 + "-<<type[0]>><<index>>", r"is 63 characters"),
        ("s" * 60 + "-<<type>>-<<index>>", r"is 65 characters; the limit is 63"),
        ("tf_<<type>>-<<index>>", r"Service name 'tf_ps-0' is not a valid DNS label"),
    ],
)
def test_names_are_checked_without_validate(
    cli: Any, tmp_path: Path, name: str, pattern: str
) -> None:
    template = write(tmp_path / "t.yaml", SERVICE.format(name=name))
    result = cli(str(template), "--nodes", "a,b", "-o", "-")
    if "is 63 characters" in pattern:
        # exactly 63 is allowed; the Job and the Service may share a name
        assert result.code == 0, result.err
        assert [d["kind"] for d in result.docs] == ["Service", "Job", "Service", "Job"]
        return
    assert_one_line_error(result, 1, pattern)


@needs_extra("validate")
def test_a_schema_layout_it_cannot_read(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old kubernetes-validate laid its schemas out differently: say so, and how to fix it."""
    schemas = tmp_path / "schemas"
    write(schemas / "v1.30.0-local-strict" / "job-batch-v1.json", '{"type": "object"}')
    monkeypatch.setattr("simpletfjob.manifest.validate._schemas", lambda: schemas)
    write(tmp_path / "t.yaml", JOB)
    result = cli("t.yaml", "--nodes", "a,b", "--validate", cwd=tmp_path)
    assert_one_line_error(
        result,
        1,
        r"cannot read the installed kubernetes-validate's schemas \(no _definitions.json for "
        r"Kubernetes 1.30.0\); upgrade it: pip install -U 'simpletfjob\[validate\]'",
    )
