"""Reading nodes from a cluster: kubeconfig resolution, paging, retries and every failure, for real.

Each test writes a kubeconfig, starts the loopback API server (tests/support/kubeapi)
and goes through the real `kubernetes` client to it, either by the CLI or by
`read_cluster_nodes`, which lets a test shorten the timeouts and the backoff.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.errors import ClusterError, InputError
from simpletfjob.hosts.cluster import Cluster
from simpletfjob.hosts.nodes import Node
from simpletfjob.kube.connection import Settings
from tests.conftest import EXAMPLES, assert_one_line_error, write
from tests.support.kubeapi import (
    Answer,
    KubeAPI,
    closed_port,
    make_node,
    realistic_cluster,
    serve,
    write_kubeconfig,
)

TOKEN = "sha256~s3cr3t-token-value"
CI_USER = "system:serviceaccount:ci:runner"


def read_cluster_nodes(settings: Settings) -> list[Node]:
    """Every node the cluster lists, sorted by name, as a render reads them."""
    with Cluster(settings) as cluster:
        return cluster.nodes()


def fast(kubeconfig: Path, **overrides: Any) -> Settings:
    """Settings for tests: short timeouts and backoff, sleeps recorded when asked."""
    settings: dict[str, Any] = {
        "kubeconfig": str(kubeconfig),
        "connect_timeout": 1.0,
        "read_timeout": 1.0,
        "deadline": 10.0,
        "backoff": 0.01,
    }
    settings.update(overrides)
    return Settings(**settings)


def refused(result: Any, code: int, *fragments: str) -> str:
    """A one-line refusal holding each fragment, and no token in it."""
    line = assert_one_line_error(result, code, contains=fragments)
    assert TOKEN not in result.err
    return line


@pytest.fixture
def secured(kubeapi: KubeAPI) -> KubeAPI:
    """The server with a token for a user who may list nodes and one for a user who may not."""
    kubeapi.anonymous_auth = False  # a request without a token is 401
    kubeapi.add_user("alice", TOKEN)
    kubeapi.add_user(CI_USER, "ci-token")
    kubeapi.grant("alice", "list", "nodes")
    kubeapi.set_nodes([make_node(f"h{i}") for i in (10, 100, 14, 23)])
    return kubeapi


def names(nodes: list[Any]) -> list[str]:
    return [n.name for n in nodes]


# -- reading, paging, the token ----------------------------------------------------------


def test_cli_reads_the_cluster_sorted_by_name(cli: Any, secured: KubeAPI, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", secured.url, token=TOKEN)
    result = cli("mnist.yaml", "--kubeconfig", str(kubeconfig), "-N", "3", "-o", "-", cwd=EXAMPLES)
    assert result.code == 0, result.err
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs] == [
        "h10",
        "h100",
        "h14",
    ]
    # mnist.yaml runs on the host network, so its ports are checked against the nodes' pods;
    # alice cannot list pods, which costs that check and one warning, not the render.
    assert result.err == (
        "simpletfjob: warning: cannot list pods: host ports not checked "
        "(user 'alice' cannot list pods in all namespaces (403 Forbidden))\n"
        "simpletfjob: wrote 3 tasks to stdout: 1 ps (h10), 2 worker (h100, h14)\n"
    )
    (request,) = secured.nodes_requests()
    assert request.authorization == f"Bearer {TOKEN}"
    assert request.query == {"limit": "500"}


def few_nodes(count: int) -> list[dict[str, Any]]:
    """Small nodes, in an order the server sorts: paging needs a small page, not a large cluster."""
    return [make_node(f"n{i:03d}", images=1) for i in reversed(range(count))]


def test_pages_follow_continue(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.set_nodes(few_nodes(13))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    nodes = read_cluster_nodes(fast(kubeconfig, page_size=5))
    assert len(nodes) == 13
    assert names(nodes) == sorted(names(nodes))
    requests = kubeapi.nodes_requests()
    assert [r.query.get("limit") for r in requests] == ["5", "5", "5"]
    assert "continue" not in requests[0].query
    assert all("continue" in r.query for r in requests[1:])


def test_the_fixture_answers_like_kube_apiserver(kubeapi: KubeAPI) -> None:
    kubeapi.set_nodes(realistic_cluster(7))
    import json

    code, _, body = kubeapi.answer("/api/v1/nodes", {"limit": "5"}, None)
    page = json.loads(body)
    assert (code, page["kind"], len(page["items"])) == (200, "NodeList", 5)
    assert page["metadata"]["remainingItemCount"] == 2 and page["metadata"]["continue"]
    kubeapi.anonymous_auth = False
    kubeapi.add_user("bob", "t")
    code, _, body = kubeapi.answer("/api/v1/nodes", {}, None)
    assert code == 401
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    code, _, body = kubeapi.answer("/api/v1/nodes", {}, "Bearer t")
    assert code == 403 and 'User "bob" cannot list resource "nodes"' in json.loads(body)["message"]
    sizes = [len(json.dumps(n)) for n in kubeapi.nodes]
    assert min(sizes) >= 7_000 and max(sizes) <= 10_500


def test_selector_goes_to_the_server(cli: Any, kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.set_nodes(
        [make_node(f"n{i}", labels={"pool": "a" if i % 2 else "b"}) for i in range(6)]
    )
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    args = ("mnist.yaml", "--kubeconfig", str(kubeconfig), "-l", "pool=a", "-o", "-")
    result = cli(*args, cwd=EXAMPLES)
    assert result.code == 0, result.err
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs] == ["n1", "n3", "n5"]
    assert kubeapi.nodes_requests()[0].query == {"limit": "500", "labelSelector": "pool=a"}


# -- kubeconfig resolution -----------------------------------------------------------------


def test_kubeconfig_env_merges_files_and_the_first_current_context_wins(
    kubeapi: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeapi.set_nodes([make_node("from-first")])
    dead = f"http://127.0.0.1:{closed_port()}"
    first = write_kubeconfig(tmp_path / "a", kubeapi.url, context="one")
    second = write_kubeconfig(tmp_path / "b", dead, context="two")
    missing = tmp_path / "does-not-exist"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(map(str, (missing, first, second))))
    assert names(read_cluster_nodes(Settings())) == ["from-first"]
    with pytest.raises(ClusterError, match=r"127\.0\.0\.1:\d+ \(context 'two'\): unreachable"):
        read_cluster_nodes(Settings(context="two"))


def test_home_kube_config_is_the_default(kubeapi: KubeAPI, kube_env: Path) -> None:
    kubeapi.set_nodes([make_node("home")])
    write_kubeconfig(kube_env / ".kube" / "config", kubeapi.url)
    assert names(read_cluster_nodes(Settings())) == ["home"]


def test_no_configuration_at_all_is_one_line(cli: Any, kube_env: Path) -> None:
    result = cli("mnist.yaml", "-o", "-", cwd=EXAMPLES)
    refused(result, 1, "no cluster to read nodes from", "--kubeconfig", "--nodes")


def test_unknown_context_lists_the_known_ones(cli: Any, kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url, context="prod")
    result = cli(
        "mnist.yaml", "--kubeconfig", str(kubeconfig), "--context", "dev", "-o", "-", cwd=EXAMPLES
    )
    refused(result, 1, "context 'dev' is not in kubeconfig", "(it has: prod)")


def test_missing_kubeconfig_and_no_current_context(kube_env: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="kubeconfig 'nope' does not exist"):
        read_cluster_nodes(Settings(kubeconfig="nope"))
    kubeconfig = write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", current=False)
    with pytest.raises(ClusterError, match="sets no current context; choose one with --context"):
        read_cluster_nodes(Settings(kubeconfig=str(kubeconfig)))


def test_in_cluster_service_account(
    kubeapi_tls: KubeAPI, kube_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeapi_tls.anonymous_auth = False
    kubeapi_tls.add_user("system:serviceaccount:jobs:launcher", TOKEN)
    kubeapi_tls.grant("system:serviceaccount:jobs:launcher", "list", "nodes")
    kubeapi_tls.set_nodes([make_node("in-pod")])
    account = tmp_path / "serviceaccount"
    write(account / "token", TOKEN)
    assert kubeapi_tls.ca_file is not None
    write(account / "ca.crt", kubeapi_tls.ca_file.read_text())
    host, port = kubeapi_tls.url.removeprefix("https://").split(":")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    settings = Settings(service_account_dir=str(account))
    assert names(read_cluster_nodes(settings)) == ["in-pod"]
    assert kubeapi_tls.nodes_requests()[0].authorization == f"bearer {TOKEN}"
    with pytest.raises(ClusterError, match="--context 'prod' names a kubeconfig context"):
        read_cluster_nodes(Settings(service_account_dir=str(account), context="prod"))
    (account / "token").unlink()
    with pytest.raises(ClusterError, match=r"in-cluster config .*token file does not exist"):
        read_cluster_nodes(settings)


# -- refusals -------------------------------------------------------------------------------


def test_401_credentials_refused(cli: Any, secured: KubeAPI, tmp_path: Path) -> None:
    for token in ("wrong-" + TOKEN, None):
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", secured.url, token=token)
        result = cli("mnist.yaml", "--kubeconfig", str(kubeconfig), "-o", "-", cwd=EXAMPLES)
        line = refused(
            result, 1, secured.url, "(context 'loopback')", "refused your credentials (401"
        )
        assert "wrong-" not in line


def test_403_names_the_user_and_the_permission(cli: Any, secured: KubeAPI, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", secured.url, token="ci-token")
    result = cli("mnist.yaml", "--kubeconfig", str(kubeconfig), "-o", "-", cwd=EXAMPLES)
    refused(
        result,
        1,
        secured.url,
        f"user '{CI_USER}' cannot list nodes (403 Forbidden)",
        "a ClusterRole with verb 'list' on 'nodes'",
    )


def test_bad_selector_is_a_usage_error_before_any_request(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    args = ("mnist.yaml", "--kubeconfig", str(kubeconfig), "-l", "pool=(a", "-o", "-")
    refused(cli(*args, cwd=EXAMPLES), 2, "--selector")
    assert kubeapi.requests == []


# -- faults and retries ---------------------------------------------------------------------


def test_first_500s_are_retried_with_backoff(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.set_nodes(realistic_cluster(10))
    kubeapi.faults.fail_first = 3
    delays: list[float] = []
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    nodes = read_cluster_nodes(fast(kubeconfig, sleep=delays.append, backoff=0.5))
    assert len(nodes) == 10
    assert delays == [0.5, 1.0, 2.0]
    assert len(kubeapi.nodes_requests()) == 4


def test_a_server_that_keeps_failing_gives_up(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.faults.fail_first = 100
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    with pytest.raises(ClusterError) as caught:
        read_cluster_nodes(fast(kubeconfig, attempts=3))
    assert "kept failing after 3 attempts (last: 500 InternalError: Internal error occurred" in str(
        caught.value
    )
    assert len(kubeapi.nodes_requests()) == 3


def test_429_honours_retry_after(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.set_nodes(realistic_cluster(3))
    kubeapi.faults.throttle_first = 2
    kubeapi.faults.retry_after = 3
    delays: list[float] = []
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    assert len(read_cluster_nodes(fast(kubeconfig, sleep=delays.append))) == 3
    assert delays == [3.0, 3.0]


def test_retry_after_past_the_deadline_stops_at_once(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.faults.throttle_first = 1
    kubeapi.faults.retry_after = 120
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    with pytest.raises(ClusterError, match=r"no complete node list within 10 s \(last: 429"):
        read_cluster_nodes(fast(kubeconfig))


def test_dropped_connections_are_retried(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.set_nodes(realistic_cluster(3))
    kubeapi.faults.drop_first = 2
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    assert len(read_cluster_nodes(fast(kubeconfig))) == 3


def test_expired_continue_restarts_the_list_once(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.set_nodes(few_nodes(11))
    kubeapi.faults.expire_continue = 1
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    nodes = read_cluster_nodes(fast(kubeconfig, page_size=5))
    assert len(nodes) == 11 and len(set(names(nodes))) == 11
    starts = ["continue" in r.query for r in kubeapi.nodes_requests()]
    assert starts == [False, True, False, True, True]


def test_continue_expiring_twice_is_an_error(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.set_nodes(few_nodes(6))
    kubeapi.faults.expire_continue = 2
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    with pytest.raises(ClusterError, match=r"continue token expired twice, 410 Expired"):
        read_cluster_nodes(fast(kubeconfig, page_size=5))


def test_slow_server_times_out(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.faults.delay = 3.0
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    started = time.monotonic()
    with pytest.raises(ClusterError) as caught:
        read_cluster_nodes(fast(kubeconfig, read_timeout=0.3))
    assert time.monotonic() - started < 2.5
    assert str(caught.value) == (
        f"{kubeapi.url} (context 'loopback'): unreachable: the server took the request "
        "but sent no answer within 0.3 s"
    )


def test_overall_deadline_bounds_the_retries(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeapi.faults.fail_first = 100
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"no complete node list within 0.5 s \(last: 500"):
        read_cluster_nodes(fast(kubeconfig, deadline=0.5, backoff=0.2, attempts=10))
    assert time.monotonic() - started < 1.5


def test_closed_port_is_unreachable(cli: Any, kube_env: Path, tmp_path: Path) -> None:
    server = f"http://127.0.0.1:{closed_port()}"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server, token=TOKEN)
    result = cli("mnist.yaml", "--kubeconfig", str(kubeconfig), "-o", "-", cwd=EXAMPLES)
    refused(result, 1, f"{server} (context 'loopback'): unreachable: connection refused")


# -- TLS --------------------------------------------------------------------------------------


def test_tls_with_the_cluster_ca(cli: Any, kubeapi_tls: KubeAPI, tmp_path: Path) -> None:
    kubeapi_tls.set_nodes([make_node("secure-1"), make_node("secure-0")])
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", kubeapi_tls.url, ca_file=kubeapi_tls.ca_file
    )
    result = cli("mnist.yaml", "--kubeconfig", str(kubeconfig), "-o", "-", cwd=EXAMPLES)
    assert result.code == 0, result.err
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs] == [
        "secure-0",
        "secure-1",
    ]
    assert result.err.count("\n") == 1


def test_tls_with_the_wrong_ca(cli: Any, kubeapi_tls: KubeAPI, tmp_path: Path) -> None:
    import trustme

    other = tmp_path / "other-ca.crt"
    trustme.CA().cert_pem.write_to_path(str(other))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi_tls.url, ca_file=other)
    result = cli("mnist.yaml", "--kubeconfig", str(kubeconfig), "-o", "-", cwd=EXAMPLES)
    refused(
        result, 1, kubeapi_tls.url, "TLS error: certificate verify failed", "certificate-authority"
    )


def test_https_to_a_plain_http_server_is_a_tls_error(kubeapi: KubeAPI, tmp_path: Path) -> None:
    server = kubeapi.url.replace("http://", "https://")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)
    with pytest.raises(ClusterError, match="TLS error"):
        read_cluster_nodes(fast(kubeconfig))


def test_insecure_skip_tls_verify_is_one_line_of_our_own(
    kubeapi_tls: KubeAPI, tmp_path: Path, kube_env: Path
) -> None:
    """In a separate process, with Python's default warning filters, as a user runs it."""
    kubeapi_tls.set_nodes([make_node(f"h{i}") for i in range(3)])
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi_tls.url, insecure=True)
    env = {**os.environ, "HOME": str(kube_env), "PYTHONWARNINGS": "default"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "simpletfjob",
            "mnist.yaml",
            "--kubeconfig",
            str(kubeconfig),
            "-o",
            "-",
        ],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"simpletfjob: warning: {kubeapi_tls.url} (context 'loopback'): insecure-skip-tls-verify "
        "is set, so the server's certificate is not checked",
        "simpletfjob: wrote 3 tasks to stdout: 1 ps (h0), 2 worker (h1, h2)",
    ]


# -- reading pages ----------------------------------------------------------------------------


def test_a_saved_lists_images_are_cut_before_it_is_parsed() -> None:
    import json

    from simpletfjob.hosts.nodes import without_images as _without_images

    nodes = [make_node("a"), make_node("none", images=0), make_node("b", images=3)]
    compact = json.dumps({"items": nodes}, separators=(",", ":")).encode()
    expected = json.loads(compact)
    for node in expected["items"]:
        node["status"]["images"] = []
    slim = _without_images(compact)
    assert json.loads(slim) == expected
    assert len(slim) < len(compact) * 0.6
    assert _without_images(b'{"items":[]}') == b'{"items":[]}'
    # A layout it does not expect gives JSON that does not parse, and the file is parsed whole.
    odd = b'{"status":{"images":[{"names":["x}]y"]}],"allocatable":{}}}'
    with pytest.raises(ValueError):
        json.loads(_without_images(odd))


def test_a_page_with_odd_image_names_is_read(kubeapi: KubeAPI, tmp_path: Path) -> None:
    odd = make_node("odd")
    odd["status"]["images"][0]["names"].append("weird}]name")
    kubeapi.set_nodes([odd, make_node("plain")])
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    assert names(read_cluster_nodes(fast(kubeconfig))) == ["odd", "plain"]


# -- every node message, word for word (derived from kube/'s mapping for any resource) --------


def test_node_refusals_word_for_word(secured: KubeAPI, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", secured.url, token="ci-token")
    with pytest.raises(ClusterError) as caught:
        read_cluster_nodes(fast(kubeconfig))
    assert str(caught.value) == (
        f"{secured.url} (context 'loopback'): user '{CI_USER}' cannot list nodes (403 Forbidden); "
        "it needs a ClusterRole with verb 'list' on 'nodes', "
        "or give the hosts with --nodes or --nodes-file"
    )
    # A server that is not a Kubernetes API server answers 404 to whoever asks.
    admin = secured.add_admin()
    elsewhere = write_kubeconfig(tmp_path / "kc", secured.url + "/not-an-api", token=admin)
    with pytest.raises(ClusterError) as caught:
        read_cluster_nodes(fast(elsewhere))
    assert str(caught.value) == (
        f"{secured.url}/not-an-api (context 'loopback'): GET /api/v1/nodes was not found (404); "
        "is this a Kubernetes API server?"
    )


def test_node_failures_word_for_word(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    target = f"{kubeapi.url} (context 'loopback')"
    kubeapi.set_nodes(realistic_cluster(7))
    kubeapi.faults.fail_first = 100
    with pytest.raises(ClusterError) as caught:
        read_cluster_nodes(fast(kubeconfig, attempts=3))
    assert str(caught.value) == (
        f"{target}: the server kept failing after 3 attempts (last: 500 InternalError: "
        "Internal error occurred: etcdserver: request timed out)"
    )
    kubeapi.faults.fail_first = 0
    kubeapi.faults.throttle_first = 1
    kubeapi.faults.retry_after = 120
    with pytest.raises(ClusterError) as caught:
        read_cluster_nodes(fast(kubeconfig))
    assert str(caught.value) == (
        f"{target}: no complete node list within 10 s "
        "(last: 429 TooManyRequests: Too many requests, please try again later.)"
    )
    kubeapi.faults.throttle_first = 0
    kubeapi.faults.expire_continue = 2
    with pytest.raises(ClusterError) as caught:
        read_cluster_nodes(fast(kubeconfig, page_size=3))
    assert str(caught.value) == (
        f"{target}: the node list changes faster than it can be read in pages "
        "(the continue token expired twice, 410 Expired); try again"
    )


def test_no_cluster_word_for_word(
    cli: Any, kube_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = cli("mnist.yaml", "-o", "-", cwd=EXAMPLES)
    assert assert_one_line_error(result, 1) == (
        "simpletfjob: error: no cluster to read nodes from: there is no --kubeconfig, "
        "$KUBECONFIG or ~/.kube/config, and this is not a pod; point at a cluster with "
        "--kubeconfig FILE (or $KUBECONFIG), or give the hosts with --nodes H1,H2,... "
        "or --nodes-file FILE"
    )
    listed = f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"
    monkeypatch.setenv("KUBECONFIG", listed)
    result = cli("mnist.yaml", "-o", "-", cwd=EXAMPLES)
    assert assert_one_line_error(result, 1) == (
        f"simpletfjob: error: no file named in $KUBECONFIG exists ({listed}); fix $KUBECONFIG, "
        "or give the hosts with --nodes H1,H2,... or --nodes-file FILE"
    )


class Garbled(KubeAPI):
    """A server (or a proxy in front of one) whose node list is not one."""

    body = b""

    def handle(self, method: str, path: str, *args: Any, **kwargs: Any) -> Answer:
        if path == "/api/v1/nodes":
            return Answer(200, {"Content-Type": "application/json"}, self.body)
        return super().handle(method, path, *args, **kwargs)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html>bad gateway</html>", "is not JSON"),
        (b'["not", "a", "list"]', "is not a NodeList"),
        (b'{"kind": "NodeList", "metadata": {"continue": 7}, "items": []}', "is not a NodeList"),
    ],
)
def test_an_answer_that_is_not_a_node_list(
    kube_env: Path, tmp_path: Path, body: bytes, problem: str
) -> None:
    with serve(Garbled()) as garbled:
        garbled.body = body
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", garbled.url)
        with pytest.raises(ClusterError) as caught:
            read_cluster_nodes(fast(kubeconfig))
    assert (
        str(caught.value)
        == f"{garbled.url} (context 'loopback'): the answer to GET /api/v1/nodes {problem}"
    )
