"""Every RBAC refusal, whichever command meets it, is one line in one form that names the user.

The form: `user 'NAME' cannot VERB RESOURCE[ in namespace NS] (403 Forbidden[, to ...]);
it needs a Role|ClusterRole with verb 'VERB' on 'RESOURCE'...`, with the user as the server
names it (a service account as `system:serviceaccount:NS:NAME`), not as the kubeconfig does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.conftest import assert_one_line_error
from tests.support.cluster import Cluster, LoopbackCluster, loopback_cluster
from tests.support.kubeapi import write_kubeconfig
from tests.support.runs import Apply

REFUSAL = re.compile(
    r"user '(?P<user>[^']+)' cannot (?P<verb>list|watch|get|create|patch|delete) "
    r"(?P<resource>\w+)(?P<scope> in namespace \S+| in all namespaces)? "
    r"\(403 Forbidden(?:, to \w+ (?:them|\w+ '[^']+'))?\); "
    r"it needs a (?:Role|ClusterRole) with verb '(?P=verb)' on '(?P=resource)'"
)


def refusal(line: str, user: str) -> re.Match[str]:
    """The refusal in a line, in the one form, naming `user`."""
    found = REFUSAL.search(line)
    assert found is not None, line
    assert found["user"] == user, line
    return found


def test_every_command_words_a_refusal_alike_and_names_the_user(
    cli: Any, cluster: Cluster, tmp_path: Path, kube_env: Path
) -> None:
    ns = cluster.create_namespace()
    alice = Apply(cli, cluster, tmp_path, ns, "alice")
    kubeconfig = ("--kubeconfig", alice.kubeconfig)

    def refused(*args: str) -> re.Match[str]:
        return refusal(assert_one_line_error(cli(*args, *kubeconfig), 1), "alice")

    # status and wait read Jobs and pods at once: either refusal may come first.
    for command in (("status",), ("status", "mnist"), ("delete", "mnist"), ("wait", "mnist")):
        found = refused(*command)
        assert found["verb"] in ("list", "watch") and found["resource"] in ("jobs", "pods")
        assert found["scope"] == f" in namespace {ns}"
    cluster.grant("alice", ["list"], ["jobs"], namespace=ns, api_group="batch")
    found = refused("status")
    assert (found["verb"], found["resource"]) == ("list", "pods")
    # apply: the read first, then the server-side apply; creating by apply needs `create`,
    # checked where the server's own message names no user.
    assert refused("apply", str(alice.template), "--nodes", "h1,h2", "--set", "image=x")
    cluster.grant("alice", ["get", "patch", "watch"], ["jobs"], namespace=ns, api_group="batch")
    cluster.grant("alice", ["get", "list", "watch", "patch", "create"], ["services"], namespace=ns)
    found = refused("apply", str(alice.template), "--nodes", "h1,h2", "--set", "image=x")
    assert (found["verb"], found["resource"], found["scope"]) == (
        "create",
        "jobs",
        f" in namespace {ns}",
    )
    assert found[0].split("; ")[0].endswith("(403 Forbidden, to apply job 'mnist-ps-0')")


def test_node_and_pod_refusals_name_the_service_account_as_the_server_does(
    cli: Any, tmp_path: Path, kube_env: Path
) -> None:
    account = "system:serviceaccount:ci:runner"
    cluster: LoopbackCluster
    with loopback_cluster() as cluster:
        assert cluster.api is not None
        cluster.api.add_user(account, "runner-token")
        # The kubeconfig calls the user 'runner'; the server knows it by its full name.
        kubeconfig = write_kubeconfig(
            tmp_path / "kc", cluster.url, token="runner-token", user="runner", namespace="ml"
        )
        apply = Apply(cli, None, tmp_path, "ml", kubeconfig=kubeconfig)
        render = (str(apply.template), "--set", "image=x", "--kubeconfig", str(kubeconfig))

        line = assert_one_line_error(cli(*render, "-o", "-"), 1)
        found = refusal(line, account)
        assert (found["verb"], found["resource"], found["scope"]) == ("list", "nodes", None)
        assert line.endswith(
            f"user '{account}' cannot list nodes (403 Forbidden); it needs a ClusterRole with "
            "verb 'list' on 'nodes', or give the hosts with --nodes or --nodes-file"
        )
        nodes = cli("nodes", "--kubeconfig", str(kubeconfig))
        assert refusal(assert_one_line_error(nodes, 1), account)["resource"] == "nodes"

        cluster.grant(account, ["list"], ["nodes"])
        cluster.create_node("gpu1", gpus=2)
        # Free GPUs need the pods: refused as an error when asked for, a warning otherwise.
        line = assert_one_line_error(cli(*render, "--gpus", "1", "-o", "-"), 1)
        found = refusal(line, account)
        assert (found["verb"], found["resource"], found["scope"]) == (
            "list",
            "pods",
            " in all namespaces",
        )
        listed = cli("nodes", "--kubeconfig", str(kubeconfig))
        assert listed.code == 0, listed.err
        warning = listed.err.splitlines()[0]
        assert warning.startswith("simpletfjob: warning: cannot list pods: "), warning
        assert f"(user '{account}' cannot list pods in all namespaces (403 Forbidden)" in warning
