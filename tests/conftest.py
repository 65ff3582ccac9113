"""Shared helpers: run the CLI in-process as a user would, and read its YAML back."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from simpletfjob.cli import main
from tests.kubeapi import KubeAPI, serve

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def docs(self) -> list[Any]:
        return list(yaml.safe_load_all(self.out))


def tf_config_of(doc: dict[str, Any]) -> dict[str, Any]:
    """The TF_CONFIG env value of a Job document, read back with json.loads."""
    for container in doc["spec"]["template"]["spec"]["containers"]:
        for env in container.get("env", []):
            if env["name"] == "TF_CONFIG":
                assert isinstance(env["value"], str)
                return json.loads(env["value"])  # type: ignore[no-any-return]
    raise AssertionError("no TF_CONFIG env in document")


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """cli(*args, cwd=None) -> Result; runs simpletfjob's main() exactly as the console script does."""

    def run(*args: str, cwd: Path | None = None) -> Result:
        old = os.getcwd()
        if cwd is not None:
            os.chdir(cwd)
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        finally:
            os.chdir(old)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<host>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
{placement}
      restartPolicy: Never
"""

PLACEMENTS: dict[str, str] = {
    "folded-column-0": "              value: >\n<<TF_CONFIG>>",
    "literal-indented": "              value: |\n                <<TF_CONFIG>>",
    "inline-single-quoted": "              value: '<<TF_CONFIG>>'",
    "inline-unquoted": "              value: <<TF_CONFIG>>",
    "inline-double-quoted": '              value: "<<TF_CONFIG>>"',
    "next-line-plain": "              value:\n<<TF_CONFIG>>",
    "folded-strip-comment": "              value: >-  # the cluster\n<<TF_CONFIG>>",
}


def job_template(placement: str) -> str:
    return JOB.format(placement=placement)


def expected_config(role: str, index: int, cluster: dict[str, list[str]]) -> dict[str, Any]:
    return {"cluster": cluster, "task": {"type": role, "index": index}}


def hosts_arg(names: Sequence[str]) -> str:
    return ",".join(names)


# -- a loopback Kubernetes API server (tests/kubeapi.py) -------------------------------------


@pytest.fixture
def kube_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No kubeconfig or in-cluster settings from the developer's machine; returns the fake HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def kubeapi(kube_env: Path) -> Iterator[KubeAPI]:
    """A plain-http API server on 127.0.0.1 with no authentication; set nodes, tokens, faults."""
    with serve(KubeAPI()) as api:
        yield api


@pytest.fixture(scope="session")
def cluster_ca() -> Any:
    import trustme

    return trustme.CA()


@pytest.fixture
def kubeapi_tls(kube_env: Path, cluster_ca: Any, tmp_path: Path) -> Iterator[KubeAPI]:
    """The same server over https, with a certificate from a trustme CA written to api.ca_file."""
    with serve(KubeAPI(), tls=cluster_ca) as api:
        api.ca_file = tmp_path / "ca.crt"
        cluster_ca.cert_pem.write_to_path(str(api.ca_file))
        yield api
