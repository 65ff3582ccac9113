"""Helpers for the tests of the commands on runs: a template, `apply` and `delete` as a user runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT, Result, write
from tests.support.cluster import ADMIN, Cluster
from tests.support.templates import MNIST as TEMPLATE

RUN = "app.kubernetes.io/managed-by=simpletfjob,simpletfjob/job=mnist"


def jobs(cluster: Cluster, ns: str, selector: str = RUN) -> dict[str, dict[str, Any]]:
    answer = cluster.admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs", labelSelector=selector)
    return {job["metadata"]["name"]: job for job in answer["items"]}


def services(cluster: Cluster, ns: str) -> dict[str, dict[str, Any]]:
    answer = cluster.admin.get(f"/api/v1/namespaces/{ns}/services", labelSelector=RUN)
    return {svc["metadata"]["name"]: svc for svc in answer["items"]}


class Apply:
    """`simpletfjob apply mnist.yaml --nodes ... --kubeconfig KC` for one user in one namespace."""

    def __init__(
        self,
        cli: Any,
        cluster: Cluster | None,
        tmp_path: Path,
        ns: str,
        user: str = ADMIN,
        kubeconfig: Path | None = None,
    ) -> None:
        self.cli = cli
        self.template = write(tmp_path / "mnist.yaml", TEMPLATE)
        if kubeconfig is None:
            assert cluster is not None
            kubeconfig = cluster.kubeconfig(tmp_path / f"kc-{user}", user, ns)
        self.kubeconfig = str(kubeconfig)

    def __call__(self, *args: str, hosts: str = "h1,h2,h3", image: str = "busybox") -> Result:
        return self.cli(  # type: ignore[no-any-return]
            "apply", str(self.template), "--nodes", hosts, "--set", f"image={image}",
            "--kubeconfig", self.kubeconfig, *args,
        )  # fmt: skip

    def delete(self, *args: str) -> Result:
        return self.cli("delete", "mnist", "--kubeconfig", self.kubeconfig, *args)  # type: ignore[no-any-return]


def lines(result: Result) -> list[str]:
    return result.err.splitlines()


def docs_rbac(kind: str, name: str | None = None) -> dict[str, Any]:
    """The Role or the ClusterRole that docs/rbac.md gives (by `name`: its other Roles, such as
    the queue's)."""
    text = (ROOT / "docs" / "rbac.md").read_text()
    blocks = [yaml.safe_load(b.split("```", 1)[0]) for b in text.split("```yaml\n")[1:]]
    name = name or {"Role": "simpletfjob", "ClusterRole": "simpletfjob-nodes"}[kind]
    (found,) = [b for b in blocks if b["kind"] == kind and b["metadata"]["name"] == name]
    return found  # type: ignore[no-any-return]
