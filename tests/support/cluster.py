"""What integration tests do to a cluster, the same on the real control plane and on the
loopback server: namespaces, nodes, users and their rights, and playing the kubelet.

No scheduler and no kubelet run. A test creates Node objects, binds pods to them (or pins
them with nodeName), and writes the pod status a kubelet would write through pods/status.
A pod bound to a node that is deleted stays Terminating until `force_delete` (grace 0),
as a kubelet would finish it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.support.client import ApiFailure, Client
from tests.support.kubeapi.api import KubeAPI
from tests.support.kubeapi.objects import make_node, pod_status
from tests.support.kubeapi.serving import serve, write_kubeconfig

T = TypeVar("T")

# The users every test cluster knows, with their tokens; none has any right until granted.
USERS = {"alice": "alice-token", "bob": "bob-token", "carol": "carol-token", "erin": "erin-token"}
ADMIN = "admin"
ADMIN_TOKEN = "admin-token-for-tests"

_names = itertools.count()


def wait_for(check: Callable[[], T], timeout: float = 30.0, what: str = "") -> T:
    """Poll `check` until it returns something true (a non-empty list, an object); fail after `timeout`."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or check}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


@dataclass
class Cluster:
    """An API server with an admin and the test users, and the helpers tests need."""

    url: str
    ca_file: Path | None
    tokens: dict[str, str] = field(default_factory=lambda: dict(USERS))  # user -> token
    admin_token: str = ADMIN_TOKEN
    name: str = "cluster"
    nodes_created: list[str] = field(default_factory=list)  # by create_node, for delete_nodes

    @property
    def admin(self) -> Client:
        return Client(self.url, self.admin_token, self.ca_file)

    def client(self, user: str | None = None) -> Client:
        """A client for `user` (None: anonymous, no token)."""
        token = (
            None
            if user is None
            else self.tokens.get(user, self.admin_token if user == ADMIN else None)
        )
        return Client(self.url, token, self.ca_file)

    def kubeconfig(self, path: Path, user: str = ADMIN, namespace: str = "default") -> Path:
        """A kubeconfig for `user` whose context's namespace is `namespace`."""
        token = self.admin_token if user == ADMIN else self.tokens[user]
        return write_kubeconfig(
            path, self.url, token=token, ca_file=self.ca_file, context=self.name, user=user,
            namespace=namespace,
        )  # fmt: skip

    # -- objects -----------------------------------------------------------------------------

    def create_namespace(self, name: str | None = None, prefix: str = "t") -> str:
        """A new namespace (a fresh name unless given); namespaces are never deleted, as the
        namespace controller does not run."""
        name = name or f"{prefix}-{int(time.time() * 1000) % 10**8}-{next(_names)}"
        self.admin.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        return name

    def create_node(
        self,
        name: str,
        *,
        gpus: int = 0,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        internal_ip: str | None = None,
    ) -> dict[str, Any]:
        """A Ready node, as a kubelet registers it, without the not-ready taint admission adds."""
        node = make_node(
            name, gpus=gpus, labels=labels, taints=taints, internal_ip=internal_ip, images=2
        )
        node["metadata"] = {"name": name, "labels": node["metadata"]["labels"]}
        body = {"apiVersion": "v1", "kind": "Node", **node}
        self.admin.post("/api/v1/nodes", body)
        self.nodes_created.append(name)
        created = self.admin.get(f"/api/v1/nodes/{name}")
        wanted = [
            t
            for t in created["spec"].get("taints", [])
            if t.get("key") != "node.kubernetes.io/not-ready"
        ]
        if wanted != created["spec"].get("taints", []):
            created = self.admin.merge_patch(
                f"/api/v1/nodes/{name}", {"spec": {"taints": wanted or None}}
            )
        return created  # type: ignore[no-any-return]

    def delete_nodes(self) -> None:
        """Delete the nodes `create_node` made: nodes are shared by every test of a session."""
        while self.nodes_created:
            name = self.nodes_created.pop()
            response = self.admin.request("DELETE", f"/api/v1/nodes/{name}")
            if response.code not in (200, 404):
                raise ApiFailure("DELETE", f"/api/v1/nodes/{name}", response.code, response.body)

    def job_synced(self, namespace: str, name: str, timeout: float = 60.0) -> None:
        """Wait until the Job controller has written the Job's status once (its startTime).

        On a loaded machine that first sync comes seconds after the Job (minutes at 1000
        Jobs): bench/scale.py waits for it before its clock starts. A test that writes a
        status of its own uses finish_job, which also outlasts a sync under way.
        """
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
        wait_for(
            lambda: (self.admin.get(path).get("status") or {}).get("startTime"),
            timeout,
            f"the Job controller to sync Job {name}",
        )

    def finish_job(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Write an ended status (a Complete or Failed condition) on a Job, and see it stay.

        kube-controller-manager v1.20 writes a Job's whole status over the latest object (it
        reads the Job, sets the status it computed, updates). A sync that started before the
        test's write, from an older copy of the Job, can so write over it; once the
        controller has seen the Job ended, it leaves it alone. So the status is written
        again until it has stayed for a second.
        """
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
        conditions = status["status"]["conditions"]

        def stays() -> bool:
            self.admin.merge_patch(f"{path}/status", dict(status))
            time.sleep(1.0)
            return bool((self.admin.get(path).get("status") or {}).get("conditions") == conditions)

        wait_for(stays, 60, f"the status of Job {name} to stay as written")

    def create(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        return self.admin.post(path, dict(obj))  # type: ignore[no-any-return]

    def grant(
        self,
        user: str,
        verbs: Iterable[str],
        resources: Iterable[str],
        namespace: str | None = None,
        api_group: str = "",
    ) -> None:
        """A Role and RoleBinding in `namespace`, or a ClusterRole and ClusterRoleBinding."""
        name = f"test-{user}-{next(_names)}"
        rule = {"apiGroups": [api_group], "resources": list(resources), "verbs": list(verbs)}
        base = "/apis/rbac.authorization.k8s.io/v1"
        scope = f"{base}/namespaces/{namespace}" if namespace else base
        kind = "Role" if namespace else "ClusterRole"
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "rules": [rule],
        }
        self.admin.post(f"{scope}/{kind.lower()}s", role)
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind + "Binding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
        self.admin.post(f"{scope}/{kind.lower()}bindings", binding)
        # RBAC reads its objects through an informer: wait until the grant is in force
        self._wait_allowed(user, rule["verbs"][0], rule["resources"][0], namespace, api_group)

    def _wait_allowed(
        self, user: str, verb: str, resource: str, namespace: str | None, group: str
    ) -> None:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "resourceAttributes": {
                    "verb": verb,
                    "resource": resource.split("/")[0],
                    "subresource": resource.split("/")[1] if "/" in resource else "",
                    "group": group,
                    "namespace": namespace or "",
                },
            },
        }
        wait_for(
            lambda: self.admin.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)[
                "status"
            ].get("allowed"),
            10,
            f"RBAC to let {user} {verb} {resource}",
        )

    # -- playing the kubelet -----------------------------------------------------------------

    def pods(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        query = {"labelSelector": selector} if selector else {}
        return self.admin.get(f"/api/v1/namespaces/{namespace}/pods", **query)["items"]  # type: ignore[no-any-return]

    def bind(self, namespace: str, pod: str, node: str) -> None:
        """What the scheduler does: POST pods/binding."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.admin.post(f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", binding)

    def set_pod_status(
        self, namespace: str, pod: str, phase: str = "Running", **status: Any
    ) -> dict[str, Any]:
        """What a kubelet reports (tests.support.kubeapi.pod_status), through pods/status."""
        current = self.admin.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        wanted = pod_status(current, phase, **status)
        # a merge patch merges maps: clear what the new phase does not have
        cleared = {k: None for k in current.get("status", {}) if k not in wanted}
        return self.admin.merge_patch(  # type: ignore[no-any-return]
            f"/api/v1/namespaces/{namespace}/pods/{pod}/status", {"status": {**cleared, **wanted}}
        )

    def run_pods(
        self, namespace: str, selector: str, node: str, phase: str = "Running", **status: Any
    ) -> list[str]:
        """Bind the pods that match `selector` to `node` (those not bound yet) and report them in
        `phase`, as a scheduler and a kubelet would; their names, sorted."""
        names = []
        for pod in self.pods(namespace, selector):
            name = pod["metadata"]["name"]
            if not pod["spec"].get("nodeName"):
                self.bind(namespace, name, node)
            self.set_pod_status(namespace, name, phase, **status)
            names.append(name)
        return sorted(names)

    def force_delete(self, namespace: str, pod: str) -> None:
        """What a kubelet does once the containers are gone: delete with gracePeriodSeconds 0."""
        try:
            self.admin.delete(
                f"/api/v1/namespaces/{namespace}/pods/{pod}",
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )
        except ApiFailure as e:
            if e.code != 404:
                raise


@dataclass
class LoopbackCluster(Cluster):
    """The loopback server dressed as a cluster, so that one test can run against both."""

    api: KubeAPI | None = None

    def job_synced(self, namespace: str, name: str, timeout: float = 60.0) -> None:
        """No Job controller runs here."""

    def finish_job(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """No Job controller writes over a status here."""
        self.admin.merge_patch(
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status", dict(status)
        )

    def grant(
        self,
        user: str,
        verbs: Iterable[str],
        resources: Iterable[str],
        namespace: str | None = None,
        api_group: str = "",
    ) -> None:
        assert self.api is not None
        self.api.grant(user, list(verbs), list(resources), namespace)


@contextmanager
def loopback_cluster() -> Iterator[LoopbackCluster]:
    """A loopback server (plain http) with the admin and the test users of a real one."""
    api = KubeAPI()
    api.add_admin(ADMIN_TOKEN, ADMIN)
    for user, token in USERS.items():
        api.add_user(user, token)
    with serve(api):
        yield LoopbackCluster(api.url, None, name="loopback", api=api)
