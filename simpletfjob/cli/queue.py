"""`simpletfjob queue NAME`: the runs waiting in a queue, in order."""

from __future__ import annotations

import json
from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import QueueListOptions


@make_command("queue", QueueListOptions, short_help="List the runs waiting in a queue.")
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """List the runs waiting in queue NAME (apply --queue, run --queue), in order.

    One row an entry: its position (1 is the head, the next to be applied), the
    run and its namespace, since when it waits, what it asks for (per role: tasks
    x each task's requests), and its state: Admitting while it holds the queue's
    lock (being planned and applied), else Waiting. The queue lives in -n
    (default: the context's namespace); its entries are Leases labelled
    simpletfjob/queue=NAME. -o json prints a list of objects: position, run,
    namespace, since, asks ({role, tasks, requests}) and state.

    \b
    Example:
      simpletfjob queue team -n ml
    """
    from simpletfjob.cli.status import columns
    from simpletfjob.output import write_stdout
    from simpletfjob.runs.objects import connect_for
    from simpletfjob.runs.queue import Ask, read_queue
    from simpletfjob.streams import say

    options = QueueListOptions(**values)
    options.check()
    connection = (options.kubeconfig, options.context, options.namespace)
    with connect_for(*connection, purpose="read a queue from") as conn:
        entries = read_queue(conn, options.name)
    if options.output == "json":
        write_stdout([json.dumps(entries, indent=2) + "\n"])
    elif entries:
        rows = [
            (
                str(e["position"]), e["run"], e["namespace"], e["since"],
                "; ".join(Ask(**a).text() for a in e["asks"]) or "-", e["state"],
            )
            for e in entries
        ]  # fmt: skip
        write_stdout(columns(("POSITION", "RUN", "NAMESPACE", "SINCE", "ASKS", "STATE"), rows))
    else:
        say(f'No runs waiting in queue "{options.name}" in {conn.namespace} namespace.')
