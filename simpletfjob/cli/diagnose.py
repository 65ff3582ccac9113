"""`simpletfjob diagnose RUN`: one .tar.gz with what a bug report about the run needs."""

from __future__ import annotations

from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import DiagnoseOptions


@make_command(
    "diagnose",
    DiagnoseOptions,
    short_help="Write one bundle with what a bug report about a run needs.",
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Write one .tar.gz with what a bug report about RUN needs, and print its path.

    Inside, a folder named after the run: summary.txt (the run, its state and verdict,
    the first task that failed with its exit code, reason, class and error, each task's
    node and state, the versions, and what could not be read and why), status.json (as
    status -o json prints it), tasks/TASK.log (each task's current container, its last
    10,000 lines) and tasks/TASK.previous.log (the container before, where the kubelet
    keeps one), events.txt (the events of the run's Jobs and pods, oldest first),
    nodes/NODE.json (each node the run's pods are on: conditions, allocatable, what its
    pods request) and manifests.yaml (the run's Jobs and Services as the cluster has
    them).

    Secret objects are never read; a literal env value whose name holds TOKEN,
    PASSWORD, SECRET or KEY is <redacted> in the manifests and wherever the bundle holds
    it. The bundle is cut at 100 MB before compression. It needs the rights status and
    logs need; a part that another right guards (events, nodes) is left out when
    refused, and summary.txt says so. A run that does not exist writes no file (exit 1).

    \b
    Example:
      simpletfjob diagnose mnist -n ml
      simpletfjob diagnose mnist -n ml -o /tmp/mnist.tar.gz
    """
    from datetime import datetime, timezone

    from simpletfjob.output import write_stdout
    from simpletfjob.runs.diagnose import bundle_path, diagnose
    from simpletfjob.runs.objects import check_run_name, connect_for, pointing_elsewhere

    options = DiagnoseOptions(**values)
    check_run_name(options.run)
    now = datetime.now(timezone.utc)
    path = bundle_path(options.run, options.output, now)
    connection = (options.kubeconfig, options.context, options.namespace)
    with connect_for(*connection, purpose="diagnose a run on") as conn, pointing_elsewhere(conn):
        diagnose(conn, options.run, path, now)
    write_stdout([path + "\n"])
