"""Elastic PyTorch (--min-workers M): torchrun's c10d rendezvous variables, the annotation, the refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simpletfjob.frameworks.pytorch import ELASTIC_CONF
from simpletfjob.runs.objects import named_tasks
from tests.conftest import assert_one_line_error, write
from tests.support.templates import FRAMEWORK_ENV as JOB

HEADER = "# simpletfjob:\n#   options:\n#     framework: {}\n"


def template(tmp_path: Path, framework: str) -> str:
    """A template of the framework (tests/support/templates.py's), as t.yaml."""
    env = {"pytorch": "TORCH_ENV", "jax": "JAX_ENV"}[framework]
    write(
        tmp_path / "t.yaml",
        HEADER.format(framework) + JOB.format(env=env).replace("<<extra>>", "x"),
    )
    return "t.yaml"


def env_of(doc: dict[str, Any]) -> dict[str, str]:
    container = doc["spec"]["template"]["spec"]["containers"][1]
    return {e["name"]: e["value"] for e in container["env"]}


def render(cli: Any, tmp_path: Path, *args: str) -> Any:
    result = cli(*args, "-o", "-", "--set", "gpus=2", cwd=tmp_path)
    assert result.code == 0, result.err
    return result


def job_with_env(env: dict[str, str]) -> dict[str, Any]:
    containers = [
        {"name": "sidecar", "image": "busybox"},
        {"name": "main", "env": [{"name": k, "value": v} for k, v in env.items()]},
    ]
    return {"spec": {"template": {"spec": {"containers": containers}}}}


def test_min_workers_renders_torchruns_elastic_variables_and_no_fixed_rank(
    cli: Any, tmp_path: Path
) -> None:
    name = template(tmp_path, "pytorch")
    result = render(cli, tmp_path, name, "--nodes", "a,b,c", "--min-workers", "2", "--port", "4000")
    docs = result.docs
    assert len(docs) == 3
    for rank, doc in enumerate(docs):
        host = "true" if rank == 0 else "false"
        assert env_of(doc) == {
            "FIRST": "one",
            "PET_NNODES": "2:3",
            "PET_NPROC_PER_NODE": "1",
            "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ENDPOINT": "a:4000",
            "PET_RDZV_ID": "t",
            "PET_MAX_RESTARTS": "1",
            # each round's processes meet in a store of that round's, not the agents' shared one
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
            "PET_RDZV_CONF": f"{ELASTIC_CONF},is_host={host}",
            "LAST": "two",
        }
        assert doc["metadata"]["annotations"] == {
            "simpletfjob/success-policy": "all-workers",
            "simpletfjob/min-workers": "2",
            "simpletfjob/name": doc["metadata"]["name"],
        }
    conf = dict(item.split("=") for item in ELASTIC_CONF.split(","))
    assert set(conf) == {
        "join_timeout",
        "last_call_timeout",
        "close_timeout",
        "keep_alive_interval",
        "keep_alive_max_attempt",
    }
    # a world re-forms in seconds: a dead agent noticed, then the last call
    assert int(conf["keep_alive_interval"]) * int(conf["keep_alive_max_attempt"]) <= 10
    assert int(conf["last_call_timeout"]) <= 10


def test_the_rendezvous_id_is_the_runs_name_and_m_equal_to_n_restarts_nothing(
    cli: Any, tmp_path: Path
) -> None:
    name = template(tmp_path, "pytorch")
    docs = render(
        cli, tmp_path, name, "--nodes", "a,b", "--min-workers", "2", "--name", "r1", "--no-labels"
    ).docs
    assert {env_of(d)["PET_RDZV_ID"] for d in docs} == {"r1"}
    assert {env_of(d)["PET_MAX_RESTARTS"] for d in docs} == {"0"}
    assert {env_of(d)["PET_NNODES"] for d in docs} == {"2:2"}
    assert all("annotations" not in d["metadata"] for d in docs)


def test_min_workers_pod_networking_meets_at_worker_0s_service(cli: Any, tmp_path: Path) -> None:
    name = template(tmp_path, "pytorch")
    args = ("--nodes", "a,b", "--min-workers", "1", "--network", "pod", "-n", "ml")
    docs = render(cli, tmp_path, name, *args).docs
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert {env_of(d)["PET_RDZV_ENDPOINT"] for d in jobs} == {"t-worker-0.ml.svc:29500"}
    # the Service's name matches no pod's host name: worker 0 is told it hosts the store
    assert [env_of(d)["PET_RDZV_CONF"].rsplit(",", 1)[1] for d in jobs] == [
        "is_host=true",
        "is_host=false",
    ]


def test_an_elastic_runs_tasks_are_read_from_m_colon_n() -> None:
    assert named_tasks([job_with_env({"PET_NNODES": "2:3"})]) == [
        "worker-0",
        "worker-1",
        "worker-2",
    ]
    assert named_tasks([job_with_env({"PET_NNODES": "2:x"})]) == []


def test_a_header_sets_min_workers_and_the_command_line_wins(cli: Any, tmp_path: Path) -> None:
    text = HEADER.format("pytorch") + "#     min-workers: 1\n" + JOB.format(env="TORCH_ENV")
    write(tmp_path / "t.yaml", text.replace("<<extra>>", "x"))
    docs = render(cli, tmp_path, "t.yaml", "--nodes", "a,b,c").docs
    assert {env_of(d)["PET_NNODES"] for d in docs} == {"1:3"}
    docs = render(cli, tmp_path, "t.yaml", "--nodes", "a,b,c", "--min-workers", "3").docs
    assert {env_of(d)["PET_NNODES"] for d in docs} == {"3:3"}


def test_min_workers_above_the_workers_is_a_usage_error(cli: Any, tmp_path: Path) -> None:
    name = template(tmp_path, "pytorch")
    result = cli(name, "--nodes", "a,b", "--min-workers", "3", "--set", "gpus=1", cwd=tmp_path)
    assert_one_line_error(
        result, 2, "^simpletfjob: error: --min-workers 3 is more than the run's 2 workers"
    )
    result = cli(name, "--nodes", "a,b", "--min-workers", "0", "--set", "gpus=1", cwd=tmp_path)
    assert_one_line_error(result, 2, contains=["--min-workers must be at least 1, not 0"])
    assert list(tmp_path.iterdir()) == [tmp_path / "t.yaml"]


@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
def test_min_workers_does_not_apply_to_tensorflow_or_jax(
    cli: Any, tmp_path: Path, framework: str
) -> None:
    if framework == "jax":
        name = template(tmp_path, "jax")
    else:
        name = "t.yaml"
        write(tmp_path / name, "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n")
    result = cli(name, "--nodes", "a,b", "--min-workers", "2", cwd=tmp_path)
    assert_one_line_error(
        result, 2, f"^simpletfjob: error: --min-workers does not apply to framework {framework}$"
    )


def test_the_pytorch_ddp_built_in_takes_min_workers(cli: Any, tmp_path: Path) -> None:
    result = cli("pytorch-ddp", "--nodes", "a,b,c", "--min-workers", "2", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    for doc in result.docs:
        env = {
            e["name"]: e.get("value")
            for c in doc["spec"]["template"]["spec"]["containers"]
            for e in c.get("env", [])
        }
        assert env["PET_NNODES"] == "2:3" and env["PET_RDZV_ID"] == "pytorch-ddp"
        assert "PET_NODE_RANK" not in env and "RANK" not in env


def test_every_job_of_a_large_elastic_run_carries_min_workers(cli: Any, tmp_path: Path) -> None:
    """A role of many workers is rendered once and filled in (manifest/skeleton.py): each Job
    still carries the run's --min-workers, which status, wait and run read back."""
    hosts = ",".join(f"h{i}" for i in range(6))
    result = cli("pytorch-ddp", "--nodes", hosts, "--min-workers", "2", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    annotations = [doc["metadata"]["annotations"] for doc in result.docs]
    assert len(annotations) == 6
    assert [a.get("simpletfjob/min-workers") for a in annotations] == ["2"] * 6
    assert [a["simpletfjob/name"] for a in annotations] == [
        f"pytorch-ddp-worker-{i}" for i in range(6)
    ]
