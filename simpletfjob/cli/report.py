"""What the commands say about a run on stderr: warnings, --explain's table, the summary line,
and the status line that `run` and `wait` keep on a terminal.

render and apply share these: a run's warnings wait until it has been written (or
applied), so that a failure is its one line alone; --explain's table comes with
either.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from simpletfjob.streams import say

if TYPE_CHECKING:
    from simpletfjob.options.render import Options
    from simpletfjob.plan import Plan
    from simpletfjob.runs.state import Run
    from simpletfjob.tasks import Task


def plan_explained(options: Options) -> Plan:
    """The plan; when it fails for want of hosts, --explain's table comes before the error."""
    from simpletfjob.cli.explain import explain
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
        explain_plan(planned, options)
    for message in planned.warnings[early:]:
        warn(message)
    for note in planned.notes:
        say(f"simpletfjob: {note}")


def explain_plan(planned: Plan, options: Options) -> None:
    """--explain's table of a plan: its verdicts and tasks, and the tasks' addresses."""
    from simpletfjob.cli.explain import address_line, explain

    address = address_line(options.address, options.network)
    explain(planned.verdicts, planned.tasks, limited=options.num != -1, address=address)


def tasks_line(tasks: Sequence[Task], destination: str, verb: str = "wrote") -> str:
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


class StatusLine:
    """One line at the bottom of a terminal's stderr while a run is followed, redrawn in place:
    `run mnist: 1 Pending, 2 Running; restarts 1; 1m5s`: the tasks by state, their restarts
    (and the whole run's, under --max-restarts), and the time since the command started,
    brought up to date every second.

    Nothing is drawn when stderr is not a terminal; the line is cleared before any other
    line (streams.say does it) and when the run is no longer followed.
    """

    EVERY = 1.0  # seconds between redraws of the elapsed time
    EVERY_PROGRESS = 60.0  # seconds at least between progress lines off a terminal

    def __init__(self, name: str) -> None:
        import threading
        import time

        self.name = name
        self.started = time.monotonic()
        self.run: Run | None = None
        self.stop = threading.Event()
        self.lock = threading.Lock()  # a redraw never comes after the line is cleared
        self.on = bool(sys.stderr is not None and sys.stderr.isatty())
        self.waiting = ""  # in a queue, until the run is applied (runs/queue.py)
        self.told: tuple[int, float] | None = None  # the progress line said last: step, when

    def __call__(self, run: Run) -> None:
        """The run as it is now; off a terminal, its progress as a line when its step has
        changed, at most once a minute (EVERY_PROGRESS)."""
        import time

        from simpletfjob.runs.progress import progress_line

        self.run, self.name = run, run.name
        self.draw()
        p, now = run.progress, time.monotonic()
        if self.on or p is None or (self.told and (self.told[0] == p.step or now < self.told[1] + self.EVERY_PROGRESS)):  # fmt: skip
            return
        self.told = (p.step, now)
        say(progress_line(p, time.time(), p.trend))

    def queued(self, line: str) -> None:
        """The queue's waiting line, as it changes: the status line on a terminal, else a line."""
        self.waiting = line
        if self.on:
            self.draw()
        else:
            say(line)

    def text(self) -> str:
        import time
        from collections import Counter

        from simpletfjob.kube.outage import go_duration

        elapsed = go_duration(time.monotonic() - self.started)
        run = f"run {self.name}" if self.name else "run"
        if self.run is None:
            return f"{self.waiting or run + ': starting'}; {elapsed}"
        counts = Counter(t.state for t in self.run.tasks)
        states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        restarts = f"restarts {sum(t.restarts or 0 for t in self.run.tasks)}"
        done, most = self.run.restarts
        if most:  # the whole run's, under run --max-restarts
            restarts += f", run restarts {done}/{most}"
        step = ""
        if self.run.progress is not None:  # the reporting task's (runs/reporting.py)
            from simpletfjob.runs.progress import at

            p = self.run.progress
            step = f"; {at(p)}" + (f" ({int(p.percent)}%)" if p.percent is not None else "")
        return f"{run}: {states or 'no tasks'}; {restarts}{step}; {elapsed}"

    def draw(self) -> None:
        from simpletfjob.streams import status_line

        with self.lock:
            if self.on and not self.stop.is_set():
                status_line(self.text())

    def _tick(self) -> None:
        while not self.stop.wait(self.EVERY):
            self.draw()

    def __enter__(self) -> StatusLine:
        import threading

        if self.on:
            threading.Thread(target=self._tick, daemon=True).start()
            self.draw()
        return self

    def __exit__(self, *_: object) -> None:
        from simpletfjob.streams import status_line

        with self.lock:
            self.stop.set()
            if self.on:
                status_line("")


def write_log_line(line: bytes) -> None:
    """A task's log line on stdout (`logs`, `run`), a terminal's status line off meanwhile."""
    from simpletfjob.output import write_stdout_bytes
    from simpletfjob.streams import status_cleared

    with status_cleared():
        write_stdout_bytes((line,))
