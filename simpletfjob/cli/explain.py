"""--explain: a table on stderr, one row per node, saying whether it is eligible, why not, and its
task; then what the tasks reach each other at (a node's name must resolve inside their pods)."""

from __future__ import annotations

from collections.abc import Sequence

from simpletfjob.hosts.selection import Verdict, breakdown
from simpletfjob.tasks import Task

# What the tasks' addresses are (the hosts a framework's variables name: TensorFlow's
# cluster, torchrun's master, JAX's coordinator), by --address; and whether a pod must
# resolve them (a node's name resolves inside a pod only where the cluster's DNS knows it).
ADDRESSES = {
    "name": "their nodes' names (--address name), which their pods must resolve; "
    "--address internal-ip gives them the nodes' InternalIP",
    "internal-ip": "their nodes' InternalIP (--address internal-ip)",
    "hostname": "their nodes' kubernetes.io/hostname labels (--address hostname), which their "
    "pods must resolve; --address internal-ip gives them the nodes' InternalIP",
}


def address_line(address: str, network: str) -> str:
    """'the tasks reach each other at ...': what --explain says of the tasks' addresses."""
    where = "their Services' DNS names (--network pod)" if network == "pod" else ADDRESSES[address]
    return f"the tasks reach each other at {where}"


def explain(
    verdicts: Sequence[Verdict], tasks: Sequence[Task], limited: bool = True, address: str = ""
) -> None:
    """The table on stderr, ending with the short breakdown, then `address` (address_line)
    when tasks were seated; `tasks` is empty when selection failed.

    A node that only some roles may use says which in ELIGIBLE ('only ps'), as does a reason
    that holds for some roles only. `limited`: -N limited the hosts. A GPU(FREE/ALLOC)
    column comes only when the nodes' pods were read.
    """
    given: dict[str, list[str]] = {}
    for t in tasks:
        where = f" at {t.host}" if t.host != t.node else ""
        given.setdefault(t.node, []).append(f"{t.role} {t.index}{where}")
    gpus = any(v.usage is not None for v in verdicts)
    rows = [("NODE", "ELIGIBLE", "TASK", *(("GPU(FREE/ALLOC)",) if gpus else ()), "WHY NOT")]
    for v in verdicts:
        name = v.node.name
        why = "; ".join(map(str, v.reasons))
        free = (f"{v.free_gpus if v.usage else v.node.gpus}/{v.node.gpus}",) if gpus else ()
        if not v.eligible:
            rows.append((name, "no", "-", *free, why))
            continue
        if name in given:
            rows.append((name, v.eligible_text, ", ".join(given[name]), *free, why))
        else:
            unused = ("not needed (-N)" if limited else "not needed") if tasks else ""
            rows.append((name, v.eligible_text, "-", *free, "; ".join(filter(None, (unused, why)))))
    from simpletfjob.cli.status import columns
    from simpletfjob.streams import say

    lines = [*columns(rows[0], rows[1:], gap="  "), breakdown(verdicts)]
    if tasks and address:
        lines.append(address)
    for line in "\n".join(line.rstrip() for line in lines).splitlines():
        say(line)
