"""Who is asking and what they may do: bearer tokens, anonymous users, and RBAC rules.

As kube-apiserver with `--token-auth-file` and `--authorization-mode=RBAC`:

- A request without a token is `system:anonymous` (group `system:unauthenticated`)
  unless anonymous authentication is off, when it is 401. A token that is not known is
  401 either way.
- Every authenticated user is in `system:authenticated`, which the default
  ClusterRoles let read discovery (/api, /apis); anyone may read /version, /healthz,
  /livez and /readyz. `system:masters` may do anything.
- Everything else needs a rule: (subject, verbs, resources, namespace or the whole
  cluster). Refusals carry the real server's wording.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ANONYMOUS = "system:anonymous"
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
DISCOVERY_PREFIXES = ("/api", "/apis", "/openapi")


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do, as the authorizer sees it."""

    verb: str
    resource: str = ""  # empty for a non-resource path
    subresource: str = ""
    group: str = ""
    namespace: str | None = None
    name: str | None = None
    path: str = ""

    @property
    def target(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(frozen=True)
class Rule:
    """A RoleBinding (namespace given) or ClusterRoleBinding (namespace None) of one rule."""

    subject: str  # a user or a group
    verbs: frozenset[str]
    resources: frozenset[str]  # "pods", "pods/status", "jobs", or "*"
    namespace: str | None = None

    def allows(self, subjects: Iterable[str], attributes: Attributes) -> bool:
        if self.subject not in subjects or not attributes.resource:
            return False
        if "*" not in self.verbs and attributes.verb not in self.verbs:
            return False
        if "*" not in self.resources and attributes.target not in self.resources:
            return False
        return self.namespace is None or self.namespace == attributes.namespace


def groups_of(user: str, extra: Iterable[str] = ()) -> set[str]:
    base = {"system:unauthenticated"} if user == ANONYMOUS else {"system:authenticated"}
    return base | set(extra)


def default_allows(groups: set[str], attributes: Attributes) -> bool:
    """The default ClusterRoles: public info for all, discovery for the authenticated."""
    if "system:masters" in groups:
        return True
    if attributes.resource or attributes.verb != "get":
        return False
    path = attributes.path.rstrip("/") or "/"
    if path in PUBLIC_PATHS or any(path.startswith(p + "/") for p in PUBLIC_PATHS):
        return True
    discovery = any(path == p or path.startswith(p + "/") for p in DISCOVERY_PREFIXES)
    return discovery and "system:authenticated" in groups


def forbidden_message(user: str, attributes: Attributes) -> str:
    """`pods "p" is forbidden: User "x" cannot get resource "pods" in API group "" in the namespace "ml"`."""
    if not attributes.resource:
        return f'forbidden: User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    qualified = (
        f"{attributes.resource}.{attributes.group}" if attributes.group else attributes.resource
    )
    subject = f'{qualified} "{attributes.name}"' if attributes.name else qualified
    scope = (
        f'in the namespace "{attributes.namespace}"'
        if attributes.namespace
        else "at the cluster scope"
    )
    return (
        f'{subject} is forbidden: User "{user}" cannot {attributes.verb} resource '
        f'"{attributes.target}" in API group "{attributes.group}" {scope}'
    )


def forbidden_details(attributes: Attributes) -> dict[str, str]:
    details: dict[str, str] = {}
    if attributes.name:
        details["name"] = attributes.name
    if attributes.group:
        details["group"] = attributes.group
    if attributes.resource:
        details["kind"] = attributes.resource
    return details
