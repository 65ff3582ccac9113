"""Shared helpers: run the CLI in-process as a user would, and read its YAML back."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from simpletfjob.cli import main

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
