"""The queue's options: `--queue` and its kin, for apply and run (runs/queue.py)."""

from __future__ import annotations

import re
from typing import Any

from simpletfjob.options.rules import duration, namespace_name
from simpletfjob.options.table import Must, OptionGroup, option

# A DNS label: the queue's name is a label value, and part of its Leases' names.
QUEUE_NAME = Must(
    "a DNS label such as team-a (lower-case letters, digits and '-', at most 63)",
    lambda value: bool(re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value)),
)


def queue_namespace() -> Any:
    """--queue-namespace, for apply, run and status."""
    return option(
        "--queue-namespace",
        default=None,
        metavar="NS",
        rule=namespace_name,
        help="The namespace of the queue's Leases. By default the run's; runs that share "
        "nodes across namespaces give them all one.",
    )


class QueueOptions(OptionGroup):
    """Waiting in a queue before the run is applied (apply and run)."""

    section = "Run options"

    queue: str | None = option(
        "--queue",
        default=None,
        metavar="NAME",
        rule=QUEUE_NAME,
        header=True,
        help="Wait in this queue for the run's turn. First in, first out: the run is applied "
        "once it is at the head and all of its tasks fit (a Lease per waiting run; nothing to "
        "install).",
    )
    queue_namespace: str | None = queue_namespace()
    queue_lease: float = duration(
        "--queue-lease",
        default=30.0,
        show_default=True,
        rule=Must("at least 2s", lambda value: value >= 2),
        help="How long the run's entry lives unrenewed. It is renewed every third of that; an "
        "entry whose client is gone is removed that long after its last renewal.",
    )
