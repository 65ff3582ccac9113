"""The command line as a user meets it: defaults, output files, the summary and every error."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, PLACEMENTS, assert_one_line_error, job_template, write


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    write(tmp_path / "mnist.yaml", (EXAMPLES / "mnist.yaml").read_text())
    write(tmp_path / "hosts", "h10\nh100\nh14\nh23\n")
    return tmp_path


def test_default_output_is_beside_the_template(cli: Any, workdir: Path) -> None:
    result = cli("mnist.yaml", "-N", "3", "--nodes-file", "hosts", "--no-labels", cwd=workdir)
    assert result.code == 0, result.err
    assert result.out == ""
    written = (workdir / "mnist_tfjob.yaml").read_text()
    assert written == (EXAMPLES / "mnist" / "expected.yaml").read_text()
    assert result.err == (
        "simpletfjob: wrote 3 tasks to mnist_tfjob.yaml: 1 ps (h10), 2 worker (h100, h14)\n"
    )


def test_template_in_another_directory(cli: Any, workdir: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    result = cli("../mnist.yaml", "--nodes-file", "../hosts", "-N", "2", cwd=other)
    assert result.code == 0, result.err
    assert (workdir / "mnist_tfjob.yaml").exists()
    assert not (other / "mnist_tfjob.yaml").exists()


def test_bare_exc_reads_exc_in_the_current_directory(cli: Any, workdir: Path) -> None:
    write(workdir / "exc", "h10\n# a comment\nh14\n")
    result = cli("mnist.yaml", "-N", "2", "-E", "--nodes-file", "hosts", "-o", "-", cwd=workdir)
    assert result.code == 0, result.err
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs] == ["h100", "h23"]


def test_exc_with_a_file_and_a_typo_warns(cli: Any, workdir: Path) -> None:
    write(workdir / "skip.txt", "h100\nh99\n")
    result = cli("mnist.yaml", "--exc", "skip.txt", "--nodes-file", "hosts", "-o", "-", cwd=workdir)
    assert result.code == 0
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs] == ["h10", "h14", "h23"]
    assert "warning: skip.txt: 'h99' is not among the hosts" in result.err


def test_exc_typos_are_warned_in_the_file_order_once_each(cli: Any, workdir: Path) -> None:
    names = ["zz9", "h100", "aa1", "m5", "zz9", "b2", "aa1", "q7"]
    write(workdir / "skip.txt", "".join(f"{n}\n" for n in names))
    result = cli("mnist.yaml", "--exc", "skip.txt", "--nodes-file", "hosts", "-o", "-", cwd=workdir)
    assert result.code == 0, result.err
    warned = [
        line.split("'")[1] for line in result.err.splitlines() if "is not among the hosts" in line
    ]
    assert warned == ["zz9", "aa1", "m5", "b2", "q7"]


def test_psf_overrides_psn(cli: Any, workdir: Path) -> None:
    write(workdir / "ps.txt", "h23\nh14\n")
    result = cli(
        "mnist.yaml",
        "--psf",
        "ps.txt",
        "--psn",
        "1",
        "--nodes-file",
        "hosts",
        "-o",
        "-",
        cwd=workdir,
    )
    assert result.code == 0, result.err
    names = [
        (d["metadata"]["name"], d["spec"]["template"]["spec"]["nodeName"]) for d in result.docs
    ]
    assert names == [
        ("mnist-ps-0", "h23"),
        ("mnist-ps-1", "h14"),
        ("mnist-worker-0", "h10"),
        ("mnist-worker-1", "h100"),
    ]


def test_output_is_byte_identical_across_runs(cli: Any, workdir: Path) -> None:
    args = ("mnist.yaml", "--nodes-file", "hosts", "--chief", "--evaluator", "-o", "-")
    assert cli(*args, cwd=workdir).out == cli(*args, cwd=workdir).out


def test_custom_port(cli: Any, workdir: Path) -> None:
    result = cli("mnist.yaml", "--nodes", "h1,h2", "--port", "5555", "-o", "-", cwd=workdir)
    assert '"ps": ["h1:5555"]' in result.out


def test_help_and_version(cli: Any) -> None:
    assert "--nodes-file" in cli("--help").out
    assert "--psf" in cli("-h").out
    from simpletfjob import __version__

    assert __version__ in cli("--version").out


@pytest.mark.parametrize(
    ("args", "code", "pattern"),
    [
        (["-N", "5"], 1, r"-N 5 asks for more hosts than are eligible \(4 nodes: 4 eligible\)"),
        (["-N", "0"], 2, r"-N must be a positive number"),
        (["-N", "-2"], 2, r"-N must be a positive number"),
        (["-N", "x"], 2, r"'x' is not a valid integer"),
        (["--psn", "4"], 1, r"no task is left for a worker"),
        (["--psn", "-1"], 2, r"--psn must be 0 or more"),
        (["--port", "70000"], 2, r"--port must be between 1 and 65535"),
        (["-E", "missing-exc"], 1, r"exclusion file 'missing-exc' does not exist"),
        (["-E"], 1, r"exclusion file 'exc' does not exist"),
        (["--psf", "nope"], 1, r"--psf file 'nope' does not exist"),
        (["--bogus"], 2, r"No such option.*--bogus"),
        (["--set", "novalue"], 2, r"expected KEY=VALUE"),
        (["--set", "type=x"], 2, r"'type' is set by simpletfjob"),
        (["-o", "mnist.yaml"], 1, r"output 'mnist.yaml' is the template"),
        (["-o", "hosts"], 1, r"output 'hosts' is the nodes file"),
        (["-o", "no/such/dir/out.yaml"], 1, r"directory 'no/such/dir' does not exist"),
        (["-o", "."], 1, r"is a directory"),
    ],
)
def test_errors(cli: Any, workdir: Path, args: list[str], code: int, pattern: str) -> None:
    before = {p.name: p.read_bytes() for p in workdir.iterdir()}
    result = cli("mnist.yaml", "--nodes-file", "hosts", *args, cwd=workdir)
    assert_one_line_error(result, code, pattern)
    assert {p.name: p.read_bytes() for p in workdir.iterdir()} == before


@pytest.mark.parametrize(
    ("hosts", "pattern"),
    [
        ("h10\nH11\n", r"hosts:2: 'H11' is not a valid Kubernetes node name"),
        ("h10\nh11\nh10\n", r"hosts:3: host 'h10' is listed twice \(first at hosts:1\)"),
        ("node_1\n", r"'node_1' is not a valid Kubernetes node name"),
        ("# nothing\n\n", r"lists no hosts"),
    ],
)
def test_bad_host_lists(cli: Any, workdir: Path, hosts: str, pattern: str) -> None:
    write(workdir / "hosts", hosts)
    assert_one_line_error(cli("mnist.yaml", "--nodes-file", "hosts", cwd=workdir), 1, pattern)


def test_bad_nodes_option(cli: Any, workdir: Path) -> None:
    result = cli("mnist.yaml", "--nodes", "a,b,a", cwd=workdir)
    assert_one_line_error(result, 1, r"host 'a' is listed twice")
    result = cli("mnist.yaml", "--nodes", "a", "--nodes-file", "hosts", cwd=workdir)
    assert_one_line_error(result, 2, r"--nodes or --nodes-file, not both")


def test_missing_and_binary_templates(cli: Any, workdir: Path) -> None:
    assert_one_line_error(
        cli("nope.yaml", "--nodes", "a,b", cwd=workdir), 1, r"template 'nope.yaml' does not exist"
    )
    (workdir / "bin.yaml").write_bytes(b"kind: Job\n\xff\xfe\x00")
    assert_one_line_error(
        cli("bin.yaml", "--nodes", "a,b", cwd=workdir), 1, r"template 'bin.yaml' is not UTF-8 text"
    )
    assert_one_line_error(cli("--nodes", "a,b", cwd=workdir), 2, r"missing the TEMPLATE argument")
    assert_one_line_error(
        cli("-E", "mnist.yaml", "--nodes", "a,b", cwd=workdir),
        2,
        r"-E took 'mnist.yaml' as the exclusion file",
    )


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("kind: Job\nmetadata:\n  name: j\n", r"documents 1 and 2 are both Job 'j'"),
        ("kind: Job\nmetadata:\n  name: j-<<index>>\n", r"documents 1 and 2 are both Job 'j-0'"),
        (
            "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\nbad: [\n",
            r"document 1 \(ps 0 on a\) is not valid YAML at line 5",
        ),
        (
            "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n  x: y: z\n",
            r"document 1 \(ps 0 on a\) is not valid YAML at line 4, column 7: .*'x: y: z'",
        ),
        ("- just\n- a list\n", r"document 1 \(ps 0 on a\) is a YAML list, not a mapping"),
        ("metadata:\n  name: x\n", r"document 1 \(ps 0 on a\) has no 'kind'"),
        ("", r"document 1 \(ps 0 on a\) is empty: the template renders no YAML document"),
        ("# just a comment\n", r"document 1 \(ps 0 on a\) is empty"),
        ("{% if type == 'worker' %}kind: Job\n{% endif %}", r"document 1 \(ps 0 on a\) is empty"),
        ("kind: Job\nmetadata: {}\n", r"has no metadata.name"),
        (
            "kind: Job\nmetadata:\n  name: J-<<type>>-<<index>>\n",
            r"Job name 'J-ps-0' is not a valid DNS label",
        ),
        (
            "kind: Job\nmetadata:\n  name: <<type>>" + "x" * 70 + "\n",
            r"is 72 characters; the limit is 63",
        ),
        (
            "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\nvalue:\n  a: 1\n  <<TF_CONFIG>>: 2\n",
            r"t\.yaml:6: <<TF_CONFIG>> stands in a mapping key",
        ),
    ],
)
def test_render_checks(cli: Any, tmp_path: Path, text: str, pattern: str) -> None:
    template = write(tmp_path / "t.yaml", text)
    out = write(tmp_path / "out.yaml", "old: content\n")
    result = cli(str(template), "--nodes", "a,b", "-o", str(out))
    assert_one_line_error(result, 1, pattern)
    assert out.read_text() == "old: content\n"


def test_a_failed_write_leaves_the_old_file(cli: Any, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores directory permissions; use a path the kernel refuses for everyone
        out = tmp_path / ("x" * 300)
        pattern = r"cannot write"
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        out = ro / "out.yaml"
        write(out, "old\n")
        ro.chmod(0o500)
        pattern = r"Permission denied"
    template = write(tmp_path / "t.yaml", job_template(PLACEMENTS["inline-unquoted"]))
    result = cli(str(template), "--nodes", "a,b", "-o", str(out))
    assert_one_line_error(result, 1, pattern)
    assert [p.name for p in out.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_overwrite_keeps_the_file_mode_and_leaves_no_temp_file(cli: Any, tmp_path: Path) -> None:
    template = write(tmp_path / "t.yaml", job_template(PLACEMENTS["inline-unquoted"]))
    out = write(tmp_path / "out.yaml", "old\n")
    out.chmod(0o640)
    result = cli(str(template), "--nodes", "a,b", "-o", str(out))
    assert result.code == 0, result.err
    assert out.stat().st_mode & 0o777 == 0o640
    assert out.read_text().startswith("apiVersion: batch/v1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml", "t.yaml"]


def test_template_file_is_never_touched(cli: Any, tmp_path: Path) -> None:
    template = write(tmp_path / "t.yaml", job_template(PLACEMENTS["folded-column-0"]))
    before = template.read_bytes(), template.stat().st_mtime_ns
    assert cli(str(template), "--nodes", "a,b").code == 0
    assert (template.read_bytes(), template.stat().st_mtime_ns) == before


def test_output_to_a_device_writes_in_place(cli: Any, workdir: Path) -> None:
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-o", os.devnull, cwd=workdir)
    assert result.code == 0, result.err
    assert not os.path.isfile(os.devnull)


def test_output_through_a_symlink_keeps_the_link(cli: Any, workdir: Path) -> None:
    target = write(workdir / "real.yaml", "old\n")
    (workdir / "link.yaml").symlink_to(target)
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-o", "link.yaml", cwd=workdir)
    assert result.code == 0, result.err
    assert (workdir / "link.yaml").is_symlink()
    assert target.read_text().startswith("apiVersion: batch/v1")


def test_output_may_not_be_a_values_file_or_the_kubeconfig(cli: Any, workdir: Path) -> None:
    write(workdir / "v.yaml", "a: 1\n")
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-f", "v.yaml", "-o", "v.yaml", cwd=workdir)
    assert_one_line_error(result, 1, r"output 'v.yaml' is the values file")
    assert (workdir / "v.yaml").read_text() == "a: 1\n"
    write(workdir / "kc", "apiVersion: v1\nkind: Config\n")
    result = cli("mnist.yaml", "--kubeconfig", "kc", "-o", "kc", cwd=workdir)
    assert_one_line_error(result, 1, r"output 'kc' is the kubeconfig")
