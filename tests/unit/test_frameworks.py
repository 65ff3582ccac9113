"""PyTorch and JAX runs: --framework, their variables and env entries, their options and defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simpletfjob.runs.logsources import framework_container
from simpletfjob.runs.objects import named_tasks
from tests.conftest import assert_one_line_error, needs_extra, write
from tests.support.templates import FRAMEWORK_ENV as JOB

HEADER = "# simpletfjob:\n#   options:\n#     framework: {}\n"


def template(tmp_path: Path, framework: str, *, extra: str = "x", header: bool = True) -> str:
    env = {"pytorch": "TORCH_ENV", "jax": "JAX_ENV"}[framework]
    body = JOB.format(env=env).replace("<<extra>>", extra)
    text = (HEADER.format(framework) if header else "") + body
    write(tmp_path / "t.yaml", text)
    return "t.yaml"


def env_of(doc: dict[str, Any]) -> dict[str, str]:
    container = doc["spec"]["template"]["spec"]["containers"][1]
    return {e["name"]: e["value"] for e in container["env"]}


def render(cli: Any, tmp_path: Path, *args: str) -> Any:
    result = cli(*args, "-o", "-", "--set", "gpus=2", cwd=tmp_path)
    assert result.code == 0, result.err
    return result


# ---- PyTorch ---------------------------------------------------------------------------------


def test_pytorch_tasks_are_workers_with_torchruns_variables(cli: Any, tmp_path: Path) -> None:
    result = render(cli, tmp_path, template(tmp_path, "pytorch"), "--nodes", "a,b,c")
    docs = result.docs
    assert [d["metadata"]["name"] for d in docs] == ["t-worker-0", "t-worker-1", "t-worker-2"]
    for rank, doc in enumerate(docs):
        names = [e["name"] for e in doc["spec"]["template"]["spec"]["containers"][1]["env"]]
        assert names[0] == "FIRST" and names[-1] == "LAST"  # in place, among the others
        assert env_of(doc) == {
            "FIRST": "one",
            "PET_NNODES": "3",
            "PET_NPROC_PER_NODE": "1",
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": "a",
            "PET_MASTER_PORT": "29500",
            "MASTER_ADDR": "a",
            "MASTER_PORT": "29500",
            "WORLD_SIZE": "3",
            "RANK": str(rank),
            "LAST": "two",
        }
        labels = doc["metadata"]["labels"]
        assert (labels["simpletfjob/role"], labels["simpletfjob/index"]) == ("worker", str(rank))
        assert doc["metadata"]["annotations"] == {
            "simpletfjob/success-policy": "all-workers",
            "simpletfjob/name": doc["metadata"]["name"],
        }
    assert "3 worker (a, b, c)" in result.err


def test_pytorch_nproc_per_node_sets_the_world_size_and_each_nodes_first_rank(
    cli: Any, tmp_path: Path
) -> None:
    name = template(tmp_path, "pytorch")
    docs = render(cli, tmp_path, name, "--nodes", "a,b", "--nproc-per-node", "4").docs
    assert [(env_of(d)["RANK"], env_of(d)["WORLD_SIZE"]) for d in docs] == [("0", "8"), ("4", "8")]
    assert {env_of(d)["PET_NPROC_PER_NODE"] for d in docs} == {"4"}
    # gpu: as many as the container asks for (its limit), as Kubeflow's trainer counts
    docs = render(cli, tmp_path, name, "--nodes", "a,b", "--nproc-per-node", "gpu").docs
    assert [(env_of(d)["RANK"], env_of(d)["WORLD_SIZE"]) for d in docs] == [("0", "4"), ("2", "4")]
    assert {env_of(d)["PET_NPROC_PER_NODE"] for d in docs} == {"2"}


def test_pytorch_nproc_gpu_without_a_gpu_request_is_refused(cli: Any, tmp_path: Path) -> None:
    name = template(tmp_path, "pytorch")
    result = cli(name, "--nodes", "a", "--nproc-per-node", "gpu", "--set", "gpus=0", cwd=tmp_path)
    assert_one_line_error(result, 1, contains=["--nproc-per-node gpu", "nvidia.com/gpu"])
    result = cli(name, "--nodes", "a", "--nproc-per-node", "two", cwd=tmp_path)
    assert_one_line_error(result, 2, contains=["'two' is not a number of processes"])


@pytest.mark.parametrize("gpus", ["2.5", "0", "500m", "two", "-1", "25e-1"])
def test_pytorch_nproc_gpu_names_a_value_that_cannot_be_a_gpu_count(
    cli: Any, tmp_path: Path, gpus: str
) -> None:
    name = template(tmp_path, "pytorch")
    result = cli(
        name, "--nodes", "a", "--nproc-per-node", "gpu", "--set", f"gpus={gpus}", cwd=tmp_path
    )
    assert_one_line_error(
        result,
        1,
        contains=[
            f"--nproc-per-node gpu: the task's container asks for nvidia.com/gpu '{gpus}' "
            "(in resources.limits), which is not a number of GPUs (a whole number, at least 1)"
        ],
    )


@pytest.mark.parametrize(("gpus", "nproc"), [("3", "3"), ("2000m", "2"), ("1e1", "10")])
def test_pytorch_nproc_gpu_takes_any_quantity_that_is_a_whole_count(
    cli: Any, tmp_path: Path, gpus: str, nproc: str
) -> None:
    name = template(tmp_path, "pytorch")
    result = cli(
        name,
        "--nodes",
        "a",
        "--nproc-per-node",
        "gpu",
        "--set",
        f"gpus={gpus}",
        "-o",
        "-",
        cwd=tmp_path,
    )
    assert result.code == 0, result.err
    assert env_of(result.docs[0])["PET_NPROC_PER_NODE"] == nproc


def test_the_variables_stand_alone_too_and_port_sets_the_master_port(
    cli: Any, tmp_path: Path
) -> None:
    extra = (
        "<<node_rank>>/<<nnodes>>/<<nproc_per_node>>/<<world_size>>/<<master_addr>>:<<master_port>>"
    )
    name = template(tmp_path, "pytorch", extra=extra)
    docs = render(cli, tmp_path, name, "--nodes", "a,b", "--port", "7000").docs
    commands = [d["spec"]["template"]["spec"]["containers"][1]["command"][2] for d in docs]
    assert commands == ["0/2/1/2/a:7000", "1/2/1/2/a:7000"]
    assert env_of(docs[1])["PET_MASTER_PORT"] == "7000"


def test_tasks_on_one_host_have_their_own_ports_and_meet_at_worker_0s(
    cli: Any, tmp_path: Path
) -> None:
    extra = "<<port>>"
    name = template(tmp_path, "pytorch", extra=extra)
    docs = render(cli, tmp_path, name, "--nodes", "h", "--tasks-per-host", "3").docs
    commands = [d["spec"]["template"]["spec"]["containers"][1]["command"][2] for d in docs]
    assert commands == ["29500", "29501", "29502"]
    assert {env_of(d)["PET_MASTER_PORT"] for d in docs} == {"29500"}
    assert [env_of(d)["PET_NODE_RANK"] for d in docs] == ["0", "1", "2"]


def test_pod_networking_names_worker_0s_service(cli: Any, tmp_path: Path) -> None:
    name = template(tmp_path, "pytorch")
    docs = render(cli, tmp_path, name, "--nodes", "a,b", "--network", "pod", "-n", "ml").docs
    jobs = [d for d in docs if d["kind"] == "Job"]
    services = [d for d in docs if d["kind"] == "Service"]
    assert {env_of(d)["MASTER_ADDR"] for d in jobs} == {"t-worker-0.ml.svc"}
    assert [s["spec"]["ports"][0]["name"] for s in services] == ["pytorchjob-port"] * 2
    assert services[0]["spec"]["ports"][0]["port"] == 29500


# ---- JAX -------------------------------------------------------------------------------------


def test_jax_tasks_get_the_coordinator_and_their_process_id(cli: Any, tmp_path: Path) -> None:
    extra = "<<coordinator_address>> <<num_processes>> <<process_id>>"
    name = template(tmp_path, "jax", extra=extra)
    docs = render(cli, tmp_path, name, "--nodes", "a,b,c").docs
    for i, doc in enumerate(docs):
        assert env_of(doc) == {
            "FIRST": "one",
            "JAX_COORDINATOR_ADDRESS": "a:1234",
            "JAX_NUM_PROCESSES": "3",
            "JAX_PROCESS_ID": str(i),
            "LAST": "two",
        }
        command = doc["spec"]["template"]["spec"]["containers"][1]["command"]
        assert command[2] == f"a:1234 3 {i}"
        assert doc["metadata"]["annotations"] == {
            "simpletfjob/success-policy": "all-workers",
            "simpletfjob/name": doc["metadata"]["name"],
        }
    docs = render(cli, tmp_path, name, "--nodes", "a,b", "--port", "5555").docs
    assert env_of(docs[1])["JAX_COORDINATOR_ADDRESS"] == "a:5555"


# ---- choosing a framework ---------------------------------------------------------------------


def test_the_command_line_chooses_the_framework_over_the_header(cli: Any, tmp_path: Path) -> None:
    name = template(tmp_path, "pytorch", header=False)
    result = cli(name, "--nodes", "a", "-o", "-", "--set", "gpus=1", cwd=tmp_path)
    assert_one_line_error(
        result,
        1,
        contains=["'TORCH_ENV' is undefined for framework tensorflow", "give --framework pytorch"],
    )
    docs = render(cli, tmp_path, name, "--nodes", "a", "--framework", "pytorch").docs
    assert env_of(docs[0])["PET_NNODES"] == "1"
    # A header's framework, and the success policy the command line gives instead.
    name = template(tmp_path, "jax")
    docs = render(cli, tmp_path, name, "--nodes", "a", "--success-policy", "worker0").docs
    assert docs[0]["metadata"]["annotations"] == {
        "simpletfjob/success-policy": "worker0",
        "simpletfjob/name": docs[0]["metadata"]["name"],
    }


@pytest.mark.parametrize(
    ("framework", "args", "flag"),
    [
        ("pytorch", ["--psn", "0"], "--psn"),
        ("pytorch", ["--chief"], "--chief"),
        ("jax", ["--evaluator"], "--evaluator"),
        ("jax", ["--no-chief"], "--chief"),
        ("jax", ["--psf", "ps"], "--psf"),
        ("jax", ["--nproc-per-node", "2"], "--nproc-per-node"),
    ],
)
def test_an_option_of_another_framework_is_a_usage_error_naming_it(
    cli: Any, tmp_path: Path, framework: str, args: list[str], flag: str
) -> None:
    name = template(tmp_path, framework)
    result = cli(name, "--nodes", "a,b", *args, cwd=tmp_path)
    assert_one_line_error(
        result, 2, f"^simpletfjob: error: {flag} does not apply to framework {framework}$"
    )
    assert list(tmp_path.iterdir()) == [tmp_path / "t.yaml"]


def test_nproc_per_node_does_not_apply_to_tensorflow(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n")
    result = cli("t.yaml", "--nodes", "a,b", "--nproc-per-node", "2", cwd=tmp_path)
    assert_one_line_error(
        result, 2, contains=["--nproc-per-node does not apply to framework tensorflow"]
    )
    result = cli("t.yaml", "--nodes", "a,b", "--framework", "torch", cwd=tmp_path)
    assert_one_line_error(result, 2, contains=["--framework must be tensorflow, pytorch or jax"])


def test_a_header_option_of_another_framework_is_refused(cli: Any, tmp_path: Path) -> None:
    text = HEADER.format("pytorch") + "#     psn: 0\n" + JOB.format(env="TORCH_ENV")
    write(tmp_path / "t.yaml", text)
    result = cli("t.yaml", "--nodes", "a,b", "--set", "gpus=1", "--set", "extra=x", cwd=tmp_path)
    assert_one_line_error(
        result,
        2,
        contains=["option 'psn' in the template header does not apply to framework pytorch"],
    )


def test_the_env_placeholder_must_stand_alone_on_its_line(cli: Any, tmp_path: Path) -> None:
    text = HEADER.format("pytorch") + JOB.format(env="TORCH_ENV").replace(
        "            <<TORCH_ENV>>", "            - <<TORCH_ENV>>"
    )
    write(tmp_path / "t.yaml", text)
    result = cli("t.yaml", "--nodes", "a", "--set", "gpus=1", "--set", "extra=x", cwd=tmp_path)
    assert_one_line_error(result, 1, r"t\.yaml:22: <<TORCH_ENV>> must stand alone on its line")


@needs_extra("validate")
def test_the_env_entries_take_the_placeholders_indentation(cli: Any, tmp_path: Path) -> None:
    body = (
        "kind: Job\napiVersion: batch/v1\nmetadata:\n  name: t-<<index>>\nspec:\n  template:\n"
        "    spec:\n      containers:\n      - name: c\n        image: i\n        env:\n"
        "        <<JAX_ENV>>\n"
    )
    write(tmp_path / "t.yaml", HEADER.format("jax") + body)
    result = cli("t.yaml", "--nodes", "a,b", "-o", "-", "--validate", cwd=tmp_path)
    assert result.code == 0, result.err
    env = result.docs[1]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "a:1234"},
        {"name": "JAX_NUM_PROCESSES", "value": "2"},
        {"name": "JAX_PROCESS_ID", "value": "1"},
    ]


def test_a_built_ins_default_output_names_its_framework(cli: Any, tmp_path: Path) -> None:
    for name, output in (
        ("pytorch-ddp", "pytorch-ddp_pytorchjob.yaml"),
        ("jax-multiprocess", "jax-multiprocess_jaxjob.yaml"),
    ):
        result = cli(name, "--nodes", "a,b", cwd=tmp_path)
        assert result.code == 0, result.err
        assert (tmp_path / output).is_file()


# ---- reading a run back: status, wait and logs -------------------------------------------------


def job_with_env(env: dict[str, str]) -> dict[str, Any]:
    containers = [
        {"name": "sidecar", "image": "busybox"},
        {"name": "main", "env": [{"name": k, "value": v} for k, v in env.items()]},
    ]
    return {"spec": {"template": {"spec": {"containers": containers}}}}


def test_a_runs_tasks_are_read_from_its_jobs_env_whatever_its_framework(
    cli: Any, tmp_path: Path
) -> None:
    for framework in ("pytorch", "jax"):
        docs = render(cli, tmp_path, template(tmp_path, framework), "--nodes", "a,b,c").docs
        assert named_tasks(docs[1:]) == ["worker-0", "worker-1", "worker-2"]
        # logs reads the container that carries the framework's variables, not the first
        assert framework_container(docs[0]["spec"]["template"]) == "main"
    assert named_tasks([job_with_env({"PET_NNODES": "2"})]) == ["worker-0", "worker-1"]
    assert named_tasks([job_with_env({"JAX_NUM_PROCESSES": "1"})]) == ["worker-0"]
    assert named_tasks([job_with_env({"PET_NNODES": "two"}), {}]) == []


@needs_extra("validate")
@pytest.mark.parametrize(
    ("name", "variable", "port"),
    [("pytorch-ddp", "PET_MASTER_PORT", "29500"), ("jax-multiprocess", "JAX_NUM_PROCESSES", "4")],
)
def test_each_framework_built_in_renders_from_a_host_list_alone_and_validates(
    cli: Any, tmp_path: Path, name: str, variable: str, port: str
) -> None:
    result = cli(name, "--nodes", "a,b,c,d", "-o", "-", "--validate", cwd=tmp_path)
    assert result.code == 0, result.err
    assert "valid for Kubernetes" in result.err
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs] == ["a", "b", "c", "d"]
    gpus = cli(name, "--nodes", "a", "-o", "-", "--set", "gpus=1", cwd=tmp_path)
    limits = gpus.docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 1  # GPUs come back with one --set
    for doc in result.docs:
        container = doc["spec"]["template"]["spec"]["containers"][0]
        assert {"name": variable, "value": port} in container["env"]
        assert "nvidia.com/gpu" not in container["resources"]["limits"]  # runs anywhere
        assert doc["metadata"]["annotations"] == {
            "simpletfjob/success-policy": "all-workers",
            "simpletfjob/name": doc["metadata"]["name"],
        }


# -- the rules runs/ and plan/ ask of a framework ----------------------------------------------


def test_each_framework_says_which_task_decides_a_run_and_in_what_order_its_roles_come() -> None:
    from simpletfjob.frameworks import framework

    tf, torch, jax = framework("tensorflow"), framework("pytorch"), framework("jax")
    assert tf.role_order == ("chief", "ps", "worker", "evaluator")
    assert torch.role_order == jax.role_order == ("worker",)
    assert tf.deciding("all-workers", ["chief-0", "ps-0", "worker-0", "worker-1"]) == ["chief-0"]
    assert tf.deciding("worker0", ["ps-0", "worker-0", "worker-1"]) == ["worker-0"]
    # Workers are numbered without a gap: one missing below the last decides too.
    assert torch.deciding("all-workers", ["worker-2", "worker-0"]) == [
        "worker-0", "worker-1", "worker-2",
    ]  # fmt: skip
    assert jax.deciding("worker0", ["worker-1", "worker-0"]) == ["worker-0"]
    assert (tf.lead, torch.lead, jax.lead) == ("chief-0", "", "")


def test_only_pytorch_settles_nproc_per_node_from_the_gpus_a_task_asks() -> None:
    from simpletfjob.frameworks import framework
    from simpletfjob.frameworks.pytorch import GPU_COUNT

    class Options:
        def __init__(self, nproc_per_node: int) -> None:
            self.nproc_per_node = nproc_per_node

        def replace(self, **changes: int) -> Options:
            return Options(**changes)

    asked: list[str] = []

    def gpus() -> int:
        asked.append("gpus")
        return 4

    torch = framework("pytorch")
    assert torch.settle(Options(GPU_COUNT), gpus).nproc_per_node == 4  # type: ignore[arg-type]
    assert torch.settle(Options(2), gpus).nproc_per_node == 2  # type: ignore[arg-type]
    assert asked == ["gpus"]  # counted only when asked for
    given = Options(GPU_COUNT)
    assert framework("tensorflow").settle(given, gpus) is given  # type: ignore[arg-type]
    assert framework("jax").settle(given, gpus) is given  # type: ignore[arg-type]
    assert asked == ["gpus"]


def test_a_run_is_read_as_the_framework_its_jobs_carry() -> None:
    from simpletfjob.runs.objects import run_framework
    from simpletfjob.runs.state import run_state
    from tests.support.kubeapi import make_job

    def worker(index: int, env: list[dict[str, str]]) -> dict[str, Any]:
        labels = {"simpletfjob/job": "mnist", "simpletfjob/role": "worker"}
        container = {"name": "train", "image": "train", "env": env}
        return make_job(
            f"mnist-worker-{index}",
            labels={**labels, "simpletfjob/index": str(index)},
            template={"spec": {"restartPolicy": "Never", "containers": [container]}},
        )

    torch = [worker(i, [{"name": "PET_NNODES", "value": "2"}]) for i in range(2)]
    assert run_framework(torch).name == "pytorch"
    assert run_state("mnist", "default", torch, ()).framework == "pytorch"
    tf_config = '{"cluster": {"worker": ["h1:2222"]}, "task": {"type": "worker", "index": 0}}'
    assert run_framework([worker(0, [{"name": "TF_CONFIG", "value": tf_config}])]).name == (
        "tensorflow"
    )
    # Nothing to read: the default, whose rules keep to the workers' when there is no chief.
    assert run_framework([worker(0, [])]).name == "tensorflow"


def test_each_framework_says_which_tasks_end_by_themselves_once_the_run_has_succeeded() -> None:
    """wait's cleanup gives them --cleanup-grace to end: the workers of a collective (TensorFlow's
    MultiWorkerMirroredStrategy, torchrun, JAX) end with the one that decided; a ps never
    ends, nor do the workers of a ParameterServerStrategy, which a ps tells."""
    from simpletfjob.frameworks import framework

    tf, torch, jax = framework("tensorflow"), framework("pytorch"), framework("jax")
    assert tf.ends_by_itself(("worker",)) == frozenset({"worker"})
    assert tf.ends_by_itself(("chief", "worker", "evaluator")) == frozenset({"chief", "worker"})
    assert tf.ends_by_itself(("ps", "worker")) == frozenset()
    assert tf.ends_by_itself(("chief", "ps", "worker", "evaluator")) == frozenset()
    assert torch.ends_by_itself(("worker",)) == jax.ends_by_itself(("worker",)) == {"worker"}


def test_each_framework_reads_from_a_job_the_hosts_its_tasks_reach_each_other_at() -> None:
    """What a Job's env names as the tasks' meeting points: TensorFlow's cluster, torchrun's
    master (or an elastic run's rendezvous), JAX's coordinator; a pod must resolve a name."""
    import json

    from simpletfjob.frameworks import framework

    tf, torch, jax = framework("tensorflow"), framework("pytorch"), framework("jax")
    cluster = {"ps": ["h1:2222"], "worker": ["h2:2222", "h3:2223", "[fd00::1]:2222"]}
    config = json.dumps({"cluster": cluster, "task": {"type": "ps", "index": 0}})
    assert tf.peer_hosts(job_with_env({"TF_CONFIG": config})) == ["h1", "h2", "h3", "fd00::1"]
    assert tf.peer_hosts(job_with_env({"TF_CONFIG": "{not json"})) == []
    assert torch.peer_hosts(job_with_env({"MASTER_ADDR": "h1", "PET_NNODES": "2"})) == ["h1"]
    elastic = job_with_env({"PET_RDZV_ENDPOINT": "10.0.0.1:29400", "PET_NNODES": "1:2"})
    assert torch.peer_hosts(elastic) == ["10.0.0.1"]
    assert jax.peer_hosts(job_with_env({"JAX_COORDINATOR_ADDRESS": "h1:1234"})) == ["h1"]
    assert jax.peer_hosts(job_with_env({})) == torch.peer_hosts(job_with_env({})) == []
