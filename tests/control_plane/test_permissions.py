"""What `run` and `wait` need, known before they start: a user given exactly docs/rbac.md's
Role and ClusterRole runs a run through the loss of a node, and with any one of their
grants taken away is refused in one line before anything is applied, or warned in one line
of what the command will not do.

Each user is a service account of the test's own namespace (its token from the TokenRequest
API): a ClusterRole's grants hold in every namespace for the rest of the session, so no two
tests share a user.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, write
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.kubeapi import write_kubeconfig
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import node_address
from tests.support.runs import docs_rbac
from tests.support.templates import RUN as TEMPLATE
from tests.support.templates import RUN_SCRIPT as SCRIPT

_names = itertools.count()
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def refused(line: str, command: str = "run") -> list[str]:
    """What a refusal names, sorted: 'list jobs, watch jobs (to follow the run), delete jobs
    (for --cleanup running) in namespace ns, which run needs' -> ['delete jobs', 'list jobs', ...]."""
    what = line.split(" cannot ", 1)[1].split(f", which {command} needs", 1)[0]
    what = re.sub(r" \([^)]*\)| in namespace \S+", "", what)
    return sorted(re.split(r", | and ", what))


def service_account(kube: ControlPlane, ns: str, name: str = "runner") -> tuple[str, str]:
    """A service account in `ns` and a token for it: (its user name, the token)."""
    kube.create(
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    answer = kube.admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", request)
    return f"system:serviceaccount:{ns}:{name}", str(answer["status"]["token"])


def bind(kube: ControlPlane, user: str, ns: str, role: dict[str, Any]) -> None:
    """Role (in `ns`) or ClusterRole `role`, under a name of its own, bound to `user`."""
    kind = role["kind"]
    body = copy.deepcopy(role)
    body["metadata"] = {"name": f"perm-{ns}-{next(_names)}"}
    scope = f"{RBAC}/namespaces/{ns}" if kind == "Role" else RBAC
    kube.admin.post(f"{scope}/{kind.lower()}s", body)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": f"{kind}Binding",
        "metadata": {"name": body["metadata"]["name"]},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": body["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": user.split(":")[3], "namespace": ns}],
    }  # fmt: skip
    kube.admin.post(f"{scope}/{kind.lower()}bindings", binding)


def allowed(kube: ControlPlane, user: str, verb: str, resource: str, ns: str, group: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}"],
            "resourceAttributes": {
                "verb": verb, "resource": resource, "group": group, "namespace": ns,
            },
        },
    }  # fmt: skip
    answer = kube.admin.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


def without(role: dict[str, Any], group: str, resource: str, verb: str) -> dict[str, Any]:
    """The role with one verb taken from the rule that grants it."""
    changed = copy.deepcopy(role)
    for rule in changed["rules"]:
        if rule["apiGroups"] == [group] and rule["resources"] == [resource]:
            rule["verbs"].remove(verb)
    changed["rules"] = [rule for rule in changed["rules"] if rule["verbs"]]
    return changed


def grant_docs(
    kube: ControlPlane, ns: str, tmp: Path, taken: tuple[str, str, str, str] | None = None
) -> tuple[str, str]:
    """A service account given docs/rbac.md's Role and ClusterRole, but `taken` (kind, group,
    resource, verb); its user name and a kubeconfig for it."""
    user, token = service_account(kube, ns)
    for kind in ("Role", "ClusterRole"):
        role = docs_rbac(kind)
        if taken is not None and taken[0] == kind:
            role = without(role, *taken[1:])
        bind(kube, user, ns, role)
        # RBAC reads its objects through an informer: wait until the binding is in force.
        rule = role["rules"][0]
        ask = (
            rule["verbs"][0],
            rule["resources"][0],
            ns if kind == "Role" else "",
            rule["apiGroups"][0],
        )
        wait_for(lambda ask=ask: allowed(kube, user, *ask), 10, f"the {kind} in force")
    kubeconfig = write_kubeconfig(
        tmp / f"kc-{ns}", kube.url, token=token, ca_file=kube.ca_file, user="runner",
        namespace=ns, context="test",
    )  # fmt: skip
    return user, str(kubeconfig)


class Cluster:
    """The test's nodes (labelled perm=N), its template and script, and `run` as a user types it."""

    def __init__(self, cli: Any, kube: ControlPlane, tmp: Path, label: str) -> None:
        self.cli, self.kube, self.tmp, self.label = cli, kube, tmp, label
        self.template = write(tmp / "rt.yaml", TEMPLATE)
        self.script = write(tmp / "task.py", SCRIPT)
        self.markers = tmp / "markers"
        self.markers.mkdir(exist_ok=True)

    def run(self, kubeconfig: str, *args: str, seconds: float = 3) -> Any:
        return self.cli(
            "run", str(self.template), "-l", f"perm={self.label}", "--address", "internal-ip",
            "--kubeconfig", kubeconfig, "--set", f"script={self.script}",
            "--set", f"markers={self.markers}", "--set", "mode=ok", "--set", f"seconds={seconds}",
            *args,
        )  # fmt: skip

    def jobs(self, ns: str) -> dict[str, dict[str, Any]]:
        answer = self.kube.admin.get(
            f"/apis/batch/v1/namespaces/{ns}/jobs", labelSelector="simpletfjob/job=rt"
        )
        return {job["metadata"]["name"]: job for job in answer["items"]}


@pytest.fixture
def nodes(cli: Any, kube: ControlPlane, tmp_path: Path) -> Iterator[Cluster]:
    """Three Ready nodes of this test's own, with no kubelet: the pods stay Pending."""
    label = f"{os.getpid()}-{next(_names)}"
    for i in range(3):
        kube.create_node(f"perm-{label}-{i}", labels={"perm": label}, internal_ip=f"127.0.1.{i}")
    yield Cluster(cli, kube, tmp_path, label)


# -- the docs' grants, and nothing more ----------------------------------------------------------


def run_losing_worker_1(
    cli: Any, kube: ControlPlane, ns: str, tmp: Path, kubeconfig: str
) -> tuple[Any, str]:
    """`run` on three nodes of a kubelet stand-in, whose node of worker-1 is lost once it runs:
    the run's result, and the lost node."""
    label = f"{os.getpid()}-{next(_names)}"
    node_list = [
        Node(f"perm-{label}-{i}", node_address(i), labels={"perm": label}) for i in range(3)
    ]
    lost: list[str] = []
    with Kubelet(kube, node_list, tmp / "kubelet") as kubelet:

        def lose_worker_1() -> None:
            def running() -> Any:
                pods = kube.pods(ns, "job-name=rt-worker-1")
                return [p for p in pods if p.get("status", {}).get("phase") == "Running"]

            pod = wait_for(running, timeout=60, what="worker-1 running")[0]
            lost.append(pod["spec"]["nodeName"])
            kubelet.lose(lost[0])

        thread = threading.Thread(target=lose_worker_1, daemon=True)
        thread.start()
        result = Cluster(cli, kube, tmp, label).run(
            kubeconfig, "-N", "2", "--psn", "0", "--max-restarts", "1", "--node-grace", "2s",
            "--timeout", "3m", seconds=10,
        )  # fmt: skip
        thread.join()
    return result, lost[0]


def test_the_docs_grants_let_run_restart_a_run_whose_node_is_lost(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """With the docs' Role and ClusterRole, and nothing else: the lost node is noticed, the run is
    deleted (the lost node's pods at once) and applied again on the other nodes, and it succeeds."""
    _, kubeconfig = grant_docs(kube, namespace, tmp_path)
    result, lost = run_losing_worker_1(cli, kube, namespace, tmp_path, kubeconfig)
    assert result.code == 0, result.err
    assert "warning" not in result.err, result.err
    restart = [line for line in result.err.splitlines() if line.startswith("restarting")]
    assert len(restart) == 1, result.err
    assert restart[0].startswith(
        f"restarting run rt (1/1) after a disruption: worker-1 on node {lost}: NotReady for more than 2s; "
    ), restart[0]
    assert result.err.splitlines()[-1] == "run rt succeeded: worker-0 Succeeded"


def test_without_deleting_pods_a_lost_node_fails_the_run_saying_why_it_is_not_restarted(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    taken = ("Role", "", "pods", "delete")
    _, kubeconfig = grant_docs(kube, namespace, tmp_path, taken)
    result, lost = run_losing_worker_1(cli, kube, namespace, tmp_path, kubeconfig)
    assert result.code == 1, result.err
    lines = result.err.splitlines()
    assert [line for line in lines if "warning" in line] == [
        "simpletfjob: warning: a run whose node is lost is not restarted: cannot delete pods in "
        f"namespace {namespace}, and its pods on that node must be deleted first (a Role with "
        "verb 'delete' on 'pods' allows it)"
    ]
    assert "restarting" not in result.err
    assert lines[-1] == (
        f"simpletfjob: error: run 'rt' failed: worker-1 on node {lost}: NotReady for more than "
        f"2s; not restarted: its pods on that node cannot be deleted (cannot delete pods in "
        f"namespace {namespace})"
    )


# -- one grant taken away at a time --------------------------------------------------------------

# What `run --max-restarts 1 --network pod` (the default cleanup, worker-0's logs) does without
# each grant of the docs' Role and ClusterRole: ('refused', 'VERB RESOURCE') before anything is
# applied; ('warned', words) and the run goes on; ('plan', words): refused by the plan, as it
# has always been; ('nothing', '') for what run does not use, or what the other role
# grants too (the ClusterRole's `list` on jobs and pods holds in every namespace).
OUTCOMES = {
    ("Role", "batch", "jobs"): {
        **{v: ("refused", f"{v} jobs") for v in ("get", "watch", "create", "patch", "delete")},
        "list": ("nothing", ""),
    },
    ("Role", "", "services"): {v: ("refused", f"{v} services") for v in ("get", "list", "watch", "create", "patch", "delete")},
    ("Role", "", "pods"): {
        "list": ("nothing", ""),
        "watch": ("refused", "watch pods"),
        "delete": ("warned", "a run whose node is lost is not restarted: cannot delete pods"),
    },
    ("Role", "", "pods/log"): {"get": ("warned", "logs not streamed: cannot get pods/log")},
    ("Role", "", "events"): {"list": ("nothing", "")},
    ("ClusterRole", "", "nodes"): {
        "get": ("warned", "node loss not watched: cannot get nodes"),
        "list": ("plan", "cannot list nodes (403 Forbidden)"),
    },
    # Usage is read for the fit (what each node has free): without it the fit is judged by
    # allocatable, and the plan says so (see test_refusals.py for a plan that needs it).
    ("ClusterRole", "", "pods"): {
        "list": ("warned", "cannot list pods: free resources (the fit is judged by allocatable) not checked"),
    },
    ("ClusterRole", "batch", "jobs"): {
        "list": ("warned", "cannot list jobs: the pods that Jobs have yet to make are not counted"),
    },
}  # fmt: skip


def _grants() -> list[tuple[str, str, str, str]]:
    found = []
    for kind in ("Role", "ClusterRole"):
        for rule in docs_rbac(kind)["rules"]:
            ((group,), (resource,)) = rule["apiGroups"], rule["resources"]
            found += [(kind, group, resource, verb) for verb in rule["verbs"]]
    return found


def test_the_table_covers_every_grant_of_the_docs() -> None:
    listed = {(k, g, r, v) for (k, g, r), verbs in OUTCOMES.items() for v in verbs}
    assert listed == set(_grants())


@pytest.mark.parametrize("taken", _grants(), ids=lambda t: f"{t[0]}-{t[3]}-{t[2]}")
def test_run_without_one_grant_is_refused_or_warned_before_it_applies(
    nodes: Cluster, kube: ControlPlane, tmp_path: Path, taken: tuple[str, str, str, str]
) -> None:
    ns = kube.create_namespace()
    user, kubeconfig = grant_docs(kube, ns, tmp_path, taken)
    outcome, words = OUTCOMES[taken[:3]][taken[3]]
    result = nodes.run(
        kubeconfig, "-N", "2", "--psn", "0", "--network", "pod", "--max-restarts", "1",
        "--timeout", "2s",
    )  # fmt: skip
    if outcome == "refused":
        line = assert_one_line_error(result, 1)
        assert f"user '{user}' cannot " in line, line
        assert refused(line) == [words], line
        assert ", which run needs, so nothing was applied; it needs a Role with verb" in line
        assert nodes.jobs(ns) == {}
        return
    if outcome == "plan":
        assert_one_line_error(result, 1, contains=[words])
        return
    # The run goes on: no kubelet runs its pods, and --timeout ends it (exit 3).
    assert result.code == 3, result.err
    warnings = [line for line in result.err.splitlines() if "warning" in line]
    if outcome == "nothing":
        assert warnings == [], result.err
    else:
        assert len(warnings) == 1 and words in warnings[0], result.err
    assert set(nodes.jobs(ns)) == {"rt-worker-0", "rt-worker-1"}


# -- wait ---------------------------------------------------------------------------------------


def test_wait_whose_cleanup_would_be_refused_is_refused_before_it_follows(
    nodes: Cluster, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    admin = str(kube.kubeconfig(tmp_path / "admin", namespace=namespace))
    applied = nodes.cli(
        "apply", str(nodes.template), "-l", f"perm={nodes.label}", "--address", "internal-ip",
        "-N", "2", "--psn", "0", "--kubeconfig", admin, "--set", "script=x", "--set", "markers=x",
        "--set", "mode=ok", "--set", "seconds=1",
    )  # fmt: skip
    assert applied.code == 0, applied.err
    user, kubeconfig = grant_docs(kube, namespace, tmp_path, ("Role", "batch", "jobs", "delete"))
    # The run's pods stay Pending (no kubelet): without the check, wait would follow it for
    # the whole --timeout and only then be refused its cleanup.
    waited = nodes.cli("wait", "rt", "--kubeconfig", kubeconfig, "--timeout", "1m")
    line = assert_one_line_error(waited, 1)
    assert line.endswith(
        f"user '{user}' cannot delete jobs (for --cleanup running) in namespace {namespace}, "
        "which wait needs, so the run was not followed; it needs a Role with verb 'delete' on "
        "'jobs' in API group 'batch'"
    ), line
    followed = nodes.cli(
        "wait", "rt", "--kubeconfig", kubeconfig, "--timeout", "1s", "--cleanup", "none"
    )
    assert followed.code == 3, followed.err
    assert "did not end within 1s" in followed.err.splitlines()[-1], followed.err
