"""What the commands that plan a run say about it on stderr: warnings, --explain's table, the summary line.

render and apply share these: a run's warnings wait until it has been written (or
applied), so that a failure is its one line alone; --explain's table comes with
either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from simpletfjob.streams import say

if TYPE_CHECKING:
    from simpletfjob.hosts.selection import Verdict
    from simpletfjob.options.render import Options
    from simpletfjob.plan import Plan
    from simpletfjob.tasks import Task


def plan_explained(options: Options) -> Plan:
    """The plan; when it fails for want of hosts, --explain's table comes before the error."""
    from simpletfjob.errors import SelectionError
    from simpletfjob.plan import plan

    try:
        return plan(options)
    except SelectionError as e:
        if options.explain and e.verdicts is not None:
            explain(e.verdicts, [], limited=options.num != -1)
        raise


def tell(planned: Plan, options: Options) -> None:
    """Once the run has succeeded: its warnings, with --explain's table where it belongs."""
    from simpletfjob.streams import warn

    early = planned.warned_before_selection
    for message in planned.warnings[:early]:
        warn(message)
    if options.explain:
        explain(planned.verdicts, planned.tasks, limited=options.num != -1)
    for message in planned.warnings[early:]:
        warn(message)
    for note in planned.notes:
        say(f"simpletfjob: {note}")


def explain(verdicts: Sequence[Verdict], tasks: Sequence[Task], limited: bool) -> None:
    """--explain: the verdicts table, on stderr; `limited`: -N limited the hosts."""
    from simpletfjob.cli.explain import explain_table

    for line in explain_table(verdicts, tasks, limited=limited).splitlines():
        say(line)


def summary(tasks: Sequence[Task], destination: str, verb: str = "wrote") -> str:
    """'wrote 3 tasks to out.yaml: 1 ps (h10), 2 worker (h100, h14)'."""
    groups: dict[str, list[str]] = {}
    shared_hosts = len({t.host for t in tasks}) < len(tasks)
    for t in tasks:
        groups.setdefault(t.role, []).append(t.endpoint if shared_hosts else t.host)
    parts = []
    for role, hosts in groups.items():
        shown = ", ".join(hosts[:4]) + (f", ... {len(hosts) - 4} more" if len(hosts) > 4 else "")
        parts.append(f"{len(hosts)} {role} ({shown})")
    noun = "task" if len(tasks) == 1 else "tasks"
    return f"simpletfjob: {verb} {len(tasks)} {noun} to {destination}: " + ", ".join(parts)
