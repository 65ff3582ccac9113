"""What `apply --replace` checks before it deletes anything: that it can finish.

Deleting the old run and then failing to apply the new one leaves nothing running.
So, before the first delete, the server judges both halves, and nothing changes
unless every check passes:

- each delete, as a server dry run (`dryRun=All`) with the listed object's uid as a
  precondition: RBAC (a user who may delete Jobs but not Services), admission, and
  an object that took a listed name since;
- each new object, as a server dry run of the very request apply will make (a
  server-side apply, field manager simpletfjob), under a temporary name.

Why a temporary name: a dry run under the object's own name is judged against the
old object, which is still there (an immutable pod template would be refused, and a
create would not be checked at all). Kubernetes 1.20 offers `generateName` only to a
create (POST), which RBAC checks as `create` alone, while an apply that creates
needs `patch` and `create`; a PATCH takes no generateName. So the name is made up
here as the server's own generator makes one: the object's name with its last five
characters replaced by random ones from the generator's alphabet (a name of five or
fewer gets five more). The length stays the same, so the server's checks of the name
(a DNS label of at most 63 characters) judge it as they will judge the real one, and
one name in 14 million is no other object's. The check cannot collide with the old
objects: a temporary name is never one of theirs, nor one of the render's.

Two things a dry run cannot judge before the old run is gone are left to the real
apply, which reports half-way failures as any apply does: a quota that the old run's
objects fill until they are deleted ("exceeded quota", skipped here), and a Service's
fixed cluster IP or node port, which the old Service holds (the check leaves them to
the server to choose).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError
from simpletfjob.kube.objects import apply, delete
from simpletfjob.kube.request import ApiError
from simpletfjob.runs.manifests import Manifest
from simpletfjob.runs.objects import RunObjects, object_name

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


# kube-apiserver's name generator: lowercase consonants and digits, no vowels.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX = 5
NOTHING_DONE = "--replace deleted nothing, and nothing of this render was applied"


def temporary_name(name: str, taken: set[str]) -> str:
    """A name of the same length (five more if it has five or fewer), in no use in `taken`."""
    while True:
        suffix = "".join(random.choices(_ALPHABET, k=_SUFFIX))
        made = name[:-_SUFFIX] + suffix if len(name) > _SUFFIX else name + suffix
        if made not in taken:
            taken.add(made)
            return made


def check_replace(
    conn: Connection, old: RunObjects, wanted: Sequence[Manifest], *, force: bool
) -> dict[tuple[str, str], dict[str, Any]]:
    """Raise, in one line, the first thing that would stop --replace half-way; else each new
    object as the server's dry run made it (by its manifest's key), for the real apply."""
    for resource, obj in old.objects():
        name = object_name(obj)
        uid = str((obj.get("metadata") or {}).get("uid") or "") or None
        try:
            gone = delete(conn, resource, name, propagation="Foreground", dry_run=True, uid=uid)
        except ClusterError as e:
            raise ClusterError(f"{e} (server dry run); {NOTHING_DONE}") from e
        if gone.replaced:
            raise ClusterError(
                f"{resource.ref(name)} was replaced since it was listed, so the run changed "
                f"while --replace looked at it; {NOTHING_DONE}: apply again"
            )
    taken = {object_name(obj) for _, obj in old.objects()} | {m.name for m in wanted}
    made: dict[tuple[str, str], dict[str, Any]] = {}
    for m in wanted:
        name = temporary_name(m.name, taken)
        probe = _probe(m.body, name)
        try:
            applied = apply(
                conn, m.resource, probe, namespace=conn.namespace, force=force, dry_run=True,
                live=None,
            )  # fmt: skip
        except ApiError as e:
            if e.status == 403 and "exceeded quota" in str(e):
                continue  # the old run's objects count until they are gone
            said = str(e).replace(name, m.name)
            raise ClusterError(f"{said} (server dry run); {NOTHING_DONE}") from e
        made[m.key] = applied.object
    return made


def _probe(body: dict[str, Any], name: str) -> dict[str, Any]:
    """The manifest under another name, without what only the old object may hold now."""
    probe = copy.deepcopy(body)
    probe["metadata"]["name"] = name
    spec = probe.get("spec")
    if probe.get("kind") == "Service" and isinstance(spec, dict):
        if spec.get("clusterIP") not in (None, "None"):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        for port in spec.get("ports") or ():
            if isinstance(port, dict):
                port.pop("nodePort", None)
    return probe
