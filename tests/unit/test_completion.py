"""Shell completion through click's protocol (`_SIMPLETFJOB_COMPLETE`): command words, choices, templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.completion import complete, plain

BUILT_INS = [
    "jax-multiprocess",
    "pod-network",
    "pytorch-ddp",
    "tf1-flags",
    "tf1-ps-hostnetwork",
    "tf2-multiworker",
    "tf2-parameter-server",
]


def test_the_first_word_offers_the_commands_and_the_templates(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = complete(monkeypatch, capsys, "simpletfjob ")
    commands = [
        "render",
        "templates",
        "init",
        "nodes",
        "apply",
        "run",
        "status",
        "wait",
        "logs",
        "delete",
        "diagnose",
        "queue",
    ]
    assert plain(found) == [*commands, *BUILT_INS]
    assert ("file", "") in found  # and the shell's file names, for a template file
    assert plain(complete(monkeypatch, capsys, "simpletfjob st")) == ["status"]
    assert plain(complete(monkeypatch, capsys, "simpletfjob tf2")) == [
        "tf2-multiworker",
        "tf2-parameter-server",
    ]


def test_an_option_at_the_first_word_is_the_render_s(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plain(complete(monkeypatch, capsys, "simpletfjob --ps")) == ["--psn", "--psf"]


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("simpletfjob status -o ", ["table", "json", "yaml", "name"]),
        ("simpletfjob mnist.yaml --network ", ["host", "pod"]),
        ("simpletfjob render mnist.yaml --network p", ["pod"]),
        ("simpletfjob wait mnist --cleanup ", ["running", "all", "none"]),
        ("simpletfjob mnist.yaml --address ", ["name", "internal-ip", "hostname"]),
    ],
)
def test_choices_are_offered(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    line: str,
    offered: list[str],
) -> None:
    assert plain(complete(monkeypatch, capsys, line)) == offered


def test_a_template_is_a_built_in_or_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = complete(monkeypatch, capsys, "simpletfjob apply pod")
    assert found == [("plain", "pod-network"), ("file", "pod")]
    assert plain(complete(monkeypatch, capsys, "simpletfjob nodes --template tf1")) == [
        "tf1-flags",
        "tf1-ps-hostnetwork",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "simpletfjob mnist.yaml -f ",
        "simpletfjob render mnist.yaml --values va",
        "simpletfjob apply mnist.yaml --nodes-file ho",
        "simpletfjob nodes --nodes-file ",
        "simpletfjob nodes --template t.yaml -f ",
        "simpletfjob status --kubeconfig ~/.kube/",
        "simpletfjob --kubeconfig ",
        "simpletfjob mnist.yaml --psf ",
        "simpletfjob mnist.yaml -E ",
        "simpletfjob mnist.yaml -o ",
        "simpletfjob init tf1-flags -o ",
    ],
)
def test_a_file_option_offers_the_shells_file_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    """As kubectl's -f: the shell completes file names (bash's `compgen -f` for a `file` item)."""
    typed = "" if line.endswith(" ") else line.split()[-1]
    assert complete(monkeypatch, capsys, line) == [("file", typed)]


def test_no_cluster_offers_no_run_and_says_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert complete(monkeypatch, capsys, "simpletfjob status ") == []


def test_init_offers_the_built_ins(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plain(complete(monkeypatch, capsys, "simpletfjob init ")) == BUILT_INS
    assert complete(monkeypatch, capsys, "simpletfjob init py") == [("plain", "pytorch-ddp")]


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("simpletfjob tf2-multiworker --set gp", ["gpus="]),
        ("simpletfjob render tf2-multiworker -N 2 --set im", ["image="]),
        ("simpletfjob apply pytorch-ddp --set scr", ["script=", "script_args="]),
        ("simpletfjob run jax-multiprocess --set na", ["name="]),
        # the tasks' and the frameworks' own variables are no values to give
        ("simpletfjob tf2-multiworker --set hos", []),
        ("simpletfjob tf2-multiworker --set TF", []),
        # no template yet, or one that is not there: nothing
        ("simpletfjob --set gp", []),
        ("simpletfjob nope.yaml --set gp", []),
    ],
)
def test_set_offers_the_names_the_template_reads(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    line: str,
    offered: list[str],
) -> None:
    assert plain(complete(monkeypatch, capsys, line)) == offered


def test_set_offers_a_template_files_own_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(
        "# simpletfjob:\n#   values:\n#     workdir: /w\n"
        "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>-<< workers >>-<< workdir >>\n"
    )
    assert plain(complete(monkeypatch, capsys, f"simpletfjob {template} --set wor")) == [
        "workdir=",
        "workers=",
    ]


def test_context_offers_the_kubeconfigs_contexts_without_a_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: kind-one\n"
        "clusters: [{name: c, cluster: {server: 'https://192.0.2.1:6443'}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts:\n"
        "- {name: kind-one, context: {cluster: c, user: u}}\n"
        "- {name: kind-two, context: {cluster: c, user: u}}\n"
        "- {name: prod, context: {cluster: c, user: u}}\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(config))
    assert plain(complete(monkeypatch, capsys, "simpletfjob status --context ")) == [
        "kind-one",
        "kind-two",
        "prod",
    ]
    assert plain(complete(monkeypatch, capsys, "simpletfjob logs --context ki")) == [
        "kind-one",
        "kind-two",
    ]
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nothing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert complete(monkeypatch, capsys, "simpletfjob status --context ") == []


def test_no_cluster_offers_no_namespace_and_no_task(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert complete(monkeypatch, capsys, "simpletfjob status -n ") == []
    assert complete(monkeypatch, capsys, "simpletfjob logs mnist ") == []


def kubectl_complete(capsys: pytest.CaptureFixture[str], *words: str) -> list[str]:
    """What `kubectl_complete-simpletfjob WORDS...` prints, one candidate a line."""
    from simpletfjob.cli import kubectl_complete_main

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr("sys.argv", ["kubectl_complete-simpletfjob", *words])
    monkeypatch.setattr("os._exit", lambda code: (_ for _ in ()).throw(SystemExit(code)))
    try:
        with pytest.raises(SystemExit) as done:
            kubectl_complete_main()
    finally:
        monkeypatch.undo()
    assert done.value.code == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out.splitlines()


def test_kubectl_plugin_completion_prints_candidates_then_a_cobra_directive(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # :0, file names allowed (a template file); :4, none; :6, none and no space after NAME=
    assert kubectl_complete(capsys, "st") == ["status", ":0"]
    assert kubectl_complete(capsys, "apply", "pod") == ["pod-network", ":0"]
    assert kubectl_complete(capsys, "init", "tf2") == [
        "tf2-multiworker",
        "tf2-parameter-server",
        ":4",
    ]
    assert kubectl_complete(capsys, "status", "-o", "") == ["table", "json", "yaml", "name", ":4"]
    assert kubectl_complete(capsys, "tf2-multiworker", "--set", "gp") == ["gpus=", ":6"]
    # a file goes after -f, --values, --nodes-file, --kubeconfig: the shell's file names (:0)
    assert kubectl_complete(capsys, "tf2-multiworker", "-f", "") == [":0"]
    assert kubectl_complete(capsys, "apply", "mnist.yaml", "--values", "v") == [":0"]
    assert kubectl_complete(capsys, "nodes", "--nodes-file", "") == [":0"]
    assert kubectl_complete(capsys, "status", "--kubeconfig", "") == [":0"]
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert kubectl_complete(capsys, "status", "") == [":4"]
    assert kubectl_complete(capsys) == kubectl_complete(capsys, "")
