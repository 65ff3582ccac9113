"""The resources simpletfjob asks for: where the API serves each one, what messages call it, and an action on one."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import quote


class Resource(NamedTuple):
    """One kind of object the API serves, as a REST mapping knows it."""

    group: str  # '' for the core group
    version: str
    plural: str  # the path segment, and what RBAC rules name
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        """'node', 'job': the kind as messages name one object, and a list ('node list')."""
        return self.kind.lower()

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """'/api/v1/nodes', '/apis/batch/v1/namespaces/ml/jobs/mnist-ps-0'; no namespace: all of them."""
        path = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            path += f"/namespaces/{quote(namespace, safe='')}"
        path += f"/{self.plural}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
        return path

    @property
    def qualified(self) -> str:
        """'job.batch', 'service': the resource as kubectl names it in what it prints."""
        return f"{self.singular}.{self.group}" if self.group else self.singular

    def ref(self, name: str) -> str:
        """An object as kubectl prints it: 'job.batch/mnist-ps-0', 'service/mnist-worker-0'."""
        return f"{self.qualified}/{name}"


NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
SERVICES = Resource("", "v1", "services", "Service", namespaced=True)
JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)  # a queue's


# The user-facing verb -> the HTTP method, and the verb RBAC rules name.
_METHODS = {
    "list": "GET",
    "watch": "GET",
    "get": "GET",
    "apply": "PATCH",
    "patch": "PATCH",
    "delete": "DELETE",
    "create": "POST",
    "update": "PUT",
}


class Action(NamedTuple):
    """What a request is about, as its messages say it: 'list pods in namespace ml'."""

    verb: str  # list, watch, get, apply, delete, create, update or patch
    resource: Resource
    namespace: str | None = None  # None for a cluster-scoped resource; '' for all namespaces
    name: str | None = None  # None for the collection
    alternative: str = ""  # what else the user can do when refused, for the 403 message
    subresource: str = ""  # 'log' for pods/log

    @property
    def method(self) -> str:
        return _METHODS[self.verb]

    @property
    def path(self) -> str:
        path = self.resource.path(self.namespace, self.name)
        return f"{path}/{self.subresource}" if self.subresource else path

    @property
    def rbac_resource(self) -> str:
        """What RBAC rules name: 'pods', or 'pods/log' for a subresource."""
        plural = self.resource.plural
        return f"{plural}/{self.subresource}" if self.subresource else plural

    @property
    def scope(self) -> str:
        if not self.resource.namespaced or self.namespace is None:
            return ""
        return f" in namespace {self.namespace}" if self.namespace else " in all namespaces"

    @property
    def what(self) -> str:
        """'nodes', 'pods in namespace ml', "job 'mnist-ps-0' in namespace ml"."""
        if self.name is None:
            return f"{self.resource.plural}{self.scope}"
        if self.subresource:
            return f"the {self.subresource} of {self.resource.singular} {self.name!r}{self.scope}"
        return f"{self.resource.singular} {self.name!r}{self.scope}"

    @property
    def outcome(self) -> str:
        """What the call is to bring back, for 'no ... within 60 s'."""
        if self.verb == "list":
            return f"complete {self.resource.singular} list"
        return f"answer to {self}"

    def __str__(self) -> str:
        return f"{self.verb} {self.what}"
