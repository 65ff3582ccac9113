"""A Lease (coordination.k8s.io/v1) as client-go's leader election uses one: its body, its
renewal, its holder, and its expiry judged by the time this client has seen it unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any


def lease_body(
    name: str,
    holder: str,
    seconds: int,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """A Lease held by `holder` from now, for `seconds` unrenewed."""
    now = micro_time()
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "labels": dict(labels),
            "annotations": dict(annotations),
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": seconds,
            "acquireTime": now,
            "renewTime": now,
        },
    }


def renewed(lease: Mapping[str, Any], acquired: bool = False) -> dict[str, Any]:
    """The Lease renewed now (and acquired now, when `acquired`)."""
    now = micro_time()
    spec = {**lease["spec"], "renewTime": now, **({"acquireTime": now} if acquired else {})}
    return {**lease, "spec": spec}


def micro_time() -> str:
    """Now, as a Lease's MicroTime: `2024-05-01T12:00:00.000000Z`."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def holder_of(lease: Mapping[str, Any] | None) -> str:
    """Who holds a Lease ('' when no one does)."""
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


class Seen:
    """When this client first saw each Lease as it is now: client-go's observedTime.

    A Lease seen with another resourceVersion than before was renewed (or changed), and its
    time starts again; one not renewed for its lease duration, by this client's own clock,
    has expired. A client that has just come has seen nothing for long, so it judges no
    Lease expired before a whole lease duration has passed for it.
    """

    def __init__(self) -> None:
        self.since: dict[str, tuple[str, float]] = {}

    def saw(self, name: str, version: str, now: float) -> None:
        if self.since.get(name, ("", 0.0))[0] != version:
            self.since[name] = (version, now)

    def forget(self, name: str) -> None:
        self.since.pop(name, None)

    def expired(self, name: str, version: str, lease: float, now: float) -> bool:
        """Whether the Lease, seen now at `version`, has gone unchanged for `lease` seconds."""
        self.saw(name, version, now)
        return now - self.since[name][1] >= lease
