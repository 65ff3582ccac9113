"""The kubelet stand-in (tests/support/kubelet.py) on the real control plane: it is only worth
building on if pods really run, report as a kubelet reports, and serve logs through pods/log."""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import node_address

_names = itertools.count()


@pytest.fixture
def kubelet(kube: ControlPlane, tmp_path: Path) -> Iterator[Kubelet]:
    """Two nodes on this worker's first two node addresses, one GPU each."""
    n = next(_names)
    nodes = [Node(f"kl-{n}-a", node_address(0), gpus=1), Node(f"kl-{n}-b", node_address(1), gpus=1)]
    with Kubelet(kube, nodes, tmp_path / "kubelet") as running:
        yield running


def make_pod(
    kube: ControlPlane,
    namespace: str,
    node: str,
    script: str,
    *,
    name: str = "p",
    restart: str = "Never",
    env: dict[str, str] | None = None,
    gpus: int = 0,
    grace: int | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "python",
        "command": ["python", "-c", script],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()]
        + [{"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec: dict[str, Any] = {"nodeName": node, "restartPolicy": restart, "containers": [container]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    return kube.create(f"/api/v1/namespaces/{namespace}/pods", body)


def pod(kube: ControlPlane, namespace: str, name: str = "p") -> dict[str, Any]:
    return kube.admin.get(f"/api/v1/namespaces/{namespace}/pods/{name}")  # type: ignore[no-any-return]


def phase_is(
    kube: ControlPlane, namespace: str, phase: str, name: str = "p"
) -> dict[str, Any] | None:
    current = pod(kube, namespace, name)
    return current if current.get("status", {}).get("phase") == phase else None


def logs(kube: ControlPlane, namespace: str, name: str = "p", **query: Any) -> str:
    """pods/log through the real API server, which asks the node's kubelet API."""
    response = kube.admin.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods/{name}/log", query=query
    )
    assert response.code == 200, (response.code, response.body)
    return response.body if isinstance(response.body, str) else json.dumps(response.body)


def events(kube: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    return kube.admin.get(f"/api/v1/namespaces/{namespace}/events")["items"]  # type: ignore[no-any-return]


def test_nodes_register_ready_with_their_address_and_kubelet_port(
    kube: ControlPlane, kubelet: Kubelet
) -> None:
    for node in kubelet.nodes.values():
        got = kube.admin.get(f"/api/v1/nodes/{node.name}")
        assert got["status"]["addresses"] == [{"type": "InternalIP", "address": node.address}]
        assert got["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == node.port > 0
        ready = [c for c in got["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"
        assert got["status"]["allocatable"]["nvidia.com/gpu"] == "1"
        assert not any(
            t["key"] == "node.kubernetes.io/not-ready" for t in got["spec"].get("taints") or []
        )


def test_a_pod_runs_with_its_env_reports_its_end_and_its_logs_come_through_the_api_server(
    kube: ControlPlane, namespace: str, kubelet: Kubelet
) -> None:
    node = next(iter(kubelet.nodes))
    script = "import os\nfor i in range(3): print('line', i, os.environ['GREETING'], os.environ['MY_POD'])"
    make_pod(kube, namespace, node, script, env={"GREETING": "hello"})
    done = wait_for(lambda: phase_is(kube, namespace, "Succeeded"), 30, "the pod to succeed")
    state = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (0, "Completed")
    assert logs(kube, namespace) == "line 0 hello p\nline 1 hello p\nline 2 hello p\n"
    assert logs(kube, namespace, tailLines=1) == "line 2 hello p\n"
    stamped = logs(kube, namespace, timestamps="true").splitlines()
    assert [line.split(" ", 1)[1] for line in stamped] == [
        "line 0 hello p",
        "line 1 hello p",
        "line 2 hello p",
    ]
    assert all(line.split(" ", 1)[0].endswith("Z") for line in stamped)
    assert "Started" in {e["reason"] for e in events(kube, namespace)}


def test_a_failing_container_is_failed_with_its_exit_code(
    kube: ControlPlane, namespace: str, kubelet: Kubelet
) -> None:
    make_pod(kube, namespace, next(iter(kubelet.nodes)), "import sys; print('bad'); sys.exit(3)")
    failed = wait_for(lambda: phase_is(kube, namespace, "Failed"), 30, "the pod to fail")
    state = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (3, "Error")


def test_on_failure_restarts_in_place_and_previous_shows_the_crashed_run(
    kube: ControlPlane, namespace: str, kubelet: Kubelet, tmp_path: Path
) -> None:
    marker = tmp_path / "crashed-once"
    script = (
        "import os, sys, pathlib\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n    m.write_text('x'); print('crashing'); sys.exit(7)\n"
        "print('second try')\n"
    )
    make_pod(kube, namespace, next(iter(kubelet.nodes)), script, restart="OnFailure")
    done = wait_for(lambda: phase_is(kube, namespace, "Succeeded"), 30, "the pod to succeed")
    status = done["status"]["containerStatuses"][0]
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"]["exitCode"] == 7
    assert logs(kube, namespace) == "second try\n"
    assert logs(kube, namespace, previous="true") == "crashing\n"
    assert "BackOff" in {e["reason"] for e in events(kube, namespace)}


def test_a_pod_that_does_not_fit_is_refused_as_the_kubelet_refuses_it(
    kube: ControlPlane, namespace: str, kubelet: Kubelet
) -> None:
    make_pod(kube, namespace, next(iter(kubelet.nodes)), "print('never')", gpus=2)
    failed = wait_for(lambda: phase_is(kube, namespace, "Failed"), 30, "the pod to be refused")
    assert failed["status"]["reason"] == "OutOfnvidia.com/gpu"
    assert "requested: 2" in failed["status"]["message"]
    warning = [e for e in events(kube, namespace) if e["reason"] == "OutOfnvidia.com/gpu"]
    assert warning and warning[0]["type"] == "Warning"


def test_follow_streams_lines_as_they_are_written(
    kube: ControlPlane, namespace: str, kubelet: Kubelet
) -> None:
    script = "import time\nfor i in range(5):\n    print('tick', i, flush=True); time.sleep(0.3)"
    make_pod(kube, namespace, next(iter(kubelet.nodes)), script)
    wait_for(lambda: phase_is(kube, namespace, "Running"), 30, "the pod to run")
    assert logs(kube, namespace, follow="true") == "".join(f"tick {i}\n" for i in range(5))


def test_a_deleted_pod_gets_sigterm_then_is_removed(
    kube: ControlPlane, namespace: str, kubelet: Kubelet
) -> None:
    script = (
        "import signal, sys, time\n"
        "def bye(*_): print('got TERM', flush=True); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\nprint('up', flush=True)\ntime.sleep(60)\n"
    )
    make_pod(kube, namespace, next(iter(kubelet.nodes)), script, grace=5)
    wait_for(lambda: phase_is(kube, namespace, "Running"), 30, "the pod to run")
    wait_for(lambda: "up" in logs(kube, namespace), 30, "the pod to print")
    run = kubelet.find(namespace, "p")
    assert run is not None and run.current is not None
    kube.admin.delete(f"/api/v1/namespaces/{namespace}/pods/p")
    wait_for(
        lambda: kube.admin.request("GET", f"/api/v1/namespaces/{namespace}/pods/p").code == 404,
        30,
        "the pod to be removed",
    )
    assert run.current.process.wait(5) == 0
    assert "got TERM" in run.current.log.read_text()
    assert "Killing" in {e["reason"] for e in events(kube, namespace)}


def test_a_lost_node_goes_not_ready_and_its_processes_die(
    kube: ControlPlane, namespace: str, kubelet: Kubelet
) -> None:
    node = next(iter(kubelet.nodes))
    make_pod(kube, namespace, node, "import time; print('up', flush=True); time.sleep(60)")
    wait_for(lambda: phase_is(kube, namespace, "Running"), 30, "the pod to run")
    run = kubelet.find(namespace, "p")
    assert run is not None and run.current is not None
    kubelet.lose(node)
    got = kube.admin.get(f"/api/v1/nodes/{node}")
    ready = next(c for c in got["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    assert run.current.process.wait(5) == -signal.SIGKILL


# A container whose process starts a child in a session of its own (as torchrun starts its
# workers), and a grandchild under that child: each writes its pid, then sleeps.
TREE = """\
import os, subprocess, sys, time
if len(sys.argv) == 1:
    subprocess.Popen([sys.executable, "-c", os.environ["TREE"], "child"], start_new_session=True)
elif sys.argv[1] == "child":
    subprocess.Popen([sys.executable, "-c", os.environ["TREE"], "grandchild"])
with open(os.environ["PIDS"], "a") as out:
    out.write(f"{os.getpid()}\\n")
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """The process is there and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["kill", "lose"])
def test_a_killed_pod_or_lost_node_ends_every_process_of_the_container(
    kube: ControlPlane, namespace: str, kubelet: Kubelet, tmp_path: Path, how: str
) -> None:
    """As a container's cgroup holds all its processes, whatever session they started: a
    pod's SIGKILL (Kubelet.kill) or its node's loss takes torchrun's workers too."""
    node = next(iter(kubelet.nodes))
    pids = tmp_path / "pids"
    env = {"PIDS": str(pids), "TREE": TREE}
    make_pod(kube, namespace, node, "import os; exec(os.environ['TREE'])", env=env)

    def three() -> list[int] | None:
        found = [int(p) for p in pids.read_text().split()] if pids.exists() else []
        return found if len(found) == 3 else None

    found = wait_for(three, 60, "the container's three processes")
    assert all(_alive(pid) for pid in found)
    if how == "kill":
        kubelet.kill(namespace, "p")
    else:
        kubelet.lose(node)
    wait_for(lambda: not any(_alive(pid) for pid in found), 30, "every process to die")


def test_a_job_runs_to_complete_through_the_job_controller(
    kube: ControlPlane, namespace: str, kubelet: Kubelet
) -> None:
    node = next(iter(kubelet.nodes))
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "command": ["python", "-c", "print('answer', 6 * 7)"],
                        }
                    ],
                }
            },
        },
    }
    kube.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

    def complete() -> bool:
        got = kube.admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/j")
        return any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in got.get("status", {}).get("conditions") or []
        )

    wait_for(complete, 30, "the Job to complete")
    (name,) = [p["metadata"]["name"] for p in kube.pods(namespace, "job-name=j")]
    assert logs(kube, namespace, name) == "answer 42\n"
