"""apply's requests a few at a time: the reads and the server's dry runs go out
`in_flight` at once (counted at the loopback server), and what apply says is as it was:
its lines in the render's order, 429s with Retry-After ridden out, the first refusal in
the render's order said, nothing changed before every dry run has passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import assert_one_line_error, write
from tests.support.kubeapi import KubeAPI, write_kubeconfig
from tests.support.templates import MNIST as TEMPLATE

NS = "train"
HOSTS = 20
SPEC = {
    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}
}


def namespace(kubeapi: KubeAPI) -> None:
    if not any(n["metadata"]["name"] == NS for n in kubeapi.objects("namespaces")):
        kubeapi.create("namespaces", {"metadata": {"name": NS}})


def apply(cli: Any, kubeapi: KubeAPI, tmp_path: Path, *args: str) -> Any:
    namespace(kubeapi)
    template = write(tmp_path / "mnist.yaml", TEMPLATE)
    kubeconfig = write_kubeconfig(tmp_path / "kc", kubeapi.url, namespace=NS)
    hosts = ",".join(f"h{i}" for i in range(HOSTS))
    return cli(
        "apply", str(template), "--nodes", hosts, "--set", "image=busybox",
        "--kubeconfig", str(kubeconfig), *args,
    )  # fmt: skip


def objects(err: str) -> list[str]:
    """apply's line for each object, in the order said (on stderr, as kubectl's go to stdout)."""
    return [line for line in err.splitlines() if line.startswith("job.batch/")]


def in_render_order() -> list[str]:
    """What `render` makes of those hosts: a ps on the first, a worker on each other one."""
    return ["job.batch/mnist-ps-0"] + [f"job.batch/mnist-worker-{i}" for i in range(HOSTS - 1)]


def test_reads_and_dry_runs_go_a_few_at_a_time_and_the_lines_keep_the_renders_order(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeapi.add_faults(resource="jobs", delay=0.05)  # long enough for requests to meet
    result = apply(cli, kubeapi, tmp_path)
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created" for ref in in_render_order()]
    assert 1 < kubeapi.peak_in_flight <= 8  # the connection's in_flight, by default
    dry_runs = [r for r in kubeapi.requests_for("jobs", "patch") if r.query.get("dryRun")]
    assert len(dry_runs) == HOSTS
    assert len(kubeapi.objects("jobs", NS)) == HOSTS


def test_dry_runs_throttled_with_retry_after_are_ridden_out(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeapi.add_faults(resource="jobs", verb="patch", throttle_first=3, retry_after=1)
    result = apply(cli, kubeapi, tmp_path, "--dry-run=server")
    assert result.code == 0, result.err
    assert objects(result.err) == [f"{ref} created (server dry run)" for ref in in_render_order()]
    patches = kubeapi.requests_for("jobs", "patch")
    assert len(patches) == HOSTS + 3  # each throttled one sent again
    assert kubeapi.objects("jobs", NS) == []


def test_the_first_name_taken_in_the_renders_order_is_said_and_nothing_is_applied(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    kubeapi.add_faults(resource="jobs", delay=0.05)
    namespace(kubeapi)
    for name in ("mnist-worker-12", "mnist-worker-2"):  # another's Jobs, the later one first
        kubeapi.create("jobs", {"metadata": {"name": name, "namespace": NS}, "spec": SPEC})
    result = apply(cli, kubeapi, tmp_path)
    assert_one_line_error(result, 1, contains=["job.batch/mnist-worker-2 "])
    assert "mnist-worker-12" not in result.err
    assert sorted(j["metadata"]["name"] for j in kubeapi.objects("jobs", NS)) == [
        "mnist-worker-12",
        "mnist-worker-2",
    ]
