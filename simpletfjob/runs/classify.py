"""Why a run failed, as a value, and whether `run` restarts it for that: pure, no server, no clock.

A `Cause` is what `run` and `wait` end on: its kind, the tasks and node it names, its words
(`str(cause)`), what the cluster gave (exit code, reasons), and its class:

- **a program error**: an exit 1 to 127, `ContainerCannotRun` (a restart runs the same), or a
  Job failed with its pods gone: counted as the program's, so `--restart-on disruption` never
  spends a restart on a failure it cannot name;
- **a disruption**: a node lost or NotReady past `--node-grace`, a stall, a pod evicted,
  refused by its node or deleted by someone else, a signal (exit 128 and up, OOMKilled), and
  the `--restart-exit-codes`;
- **a deadline** (`DeadlineExceeded`): never restarted, as a new run would get the same time;
- **final**: a deciding Job deleted, a task claimed by several Jobs, a run being deleted.

`decide` is `run`'s choice: `--restart-on failure` restarts program errors and disruptions,
`disruption` only disruptions, within `--max-restarts`.

`task_error` finds the error in a failed task's log, which is often not in its last lines:
torchrun ends with a `ChildFailedError` box naming only the failed rank, the real traceback
being further up (its lines prefixed `[rank1]: `). So: the last traceback (with the lines that
carry on its message); for torchrun's own, the named rank's traceback before it, else the last
traceback, else error-like lines, torchrun's log lines left out; with no traceback, the last
lines that read as an error; else nothing.
"""

from __future__ import annotations

import re
from collections.abc import Collection, MutableMapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from simpletfjob.runs.state import AMBIGUOUS, DELETED, DELETING, Run, side_failures
from simpletfjob.runs.taskstate import TaskStatus
from simpletfjob.runs.watch import TIE

# The classes, and how a line names them.
PROGRAM, DISRUPTION, DEADLINE, FINAL = "program error", "disruption", "deadline", "final"
WORDS = {
    PROGRAM: "a program error",
    DISRUPTION: "a disruption",
    DEADLINE: "a deadline",
    FINAL: "no restart can mend",
}
# The kinds of cause.
TASK_FAILED = "task failed"  # a task's Job failed (state.py's Failed)
REFUSED = "refused"  # a node refused a task's pod
NODE_LOST = "node lost"  # a task's node NotReady or gone past the grace
GONE = "gone"  # a deciding task's Job gone before its end was seen
UNDECIDED = "undecided"  # several Jobs claim a task, or the run is being deleted
STALLED = "stalled"  # no new step within --stall-timeout (progress.py): a disruption

SIGNALLED = 128  # exit codes from here up: killed by a signal (128 + its number)
CANNOT_RUN = "ContainerCannotRun"
DEADLINE_EXCEEDED = "DeadlineExceeded"
# Pod reasons (status.reason of a Failed pod) that tell of what happened to the pod: a
# refusal at admission (these, or OutOf...), an eviction, a node that shut down.
REFUSALS = ("NodeAffinity", "NodePorts", "NodeName", "UnexpectedAdmissionError")
POD_DISRUPTIONS = (*REFUSALS, "Evicted", "Shutdown", "Terminated", "NodeLost", "Preempting")


@dataclass(frozen=True)
class Cause:
    """Why a run (or one task) failed: its kind, the tasks and node it names, and its class."""

    kind: str
    tasks: tuple[str, ...]
    text: str  # what `wait` and `run` print: 'worker-1 Failed: Error (exit 1)'
    klass: str
    node: str = ""  # the node it names (a refusal, a lost node)
    exit_code: int | None = None
    reason: str = ""  # the reason it was classified by (a lost node: "NotReady for more than 1m")
    alone: bool = False  # a task the training does not depend on: the run goes on without it

    def __str__(self) -> str:
        return self.text

    @property
    def task(self) -> str:
        return self.tasks[0] if self.tasks else ""

    @property
    def kind_words(self) -> str:
        """'a program error', 'a disruption', 'a deadline'."""
        return WORDS[self.klass]

    def brief(self) -> str:
        """The failure in a few words: 'worker-1 exited 1', 'worker-1 was OOMKilled (exit 137)'."""
        if self.kind != TASK_FAILED or self.exit_code is None:
            return self.text
        if self.reason == "OOMKilled":
            return f"{self.task} was OOMKilled (exit {self.exit_code})"
        if self.reason == CANNOT_RUN:
            return f"{self.task} could not run ({CANNOT_RUN}, exit {self.exit_code})"
        return f"{self.task} exited {self.exit_code}"


def exit_class(
    exit_code: int | None, reason: str, exit_codes: Collection[int] = (), deleted: bool = False
) -> str:
    """The class of a container's or pod's failure: its exit code, its reason, its pod's fate."""
    if reason == DEADLINE_EXCEEDED:
        return DEADLINE
    if deleted or reason == "OOMKilled" or reason.startswith("OutOf") or reason in POD_DISRUPTIONS:
        return DISRUPTION
    if exit_code is None:
        return PROGRAM  # nothing tells what happened: counted as the program's
    if exit_code in exit_codes:
        return DISRUPTION
    if reason == CANNOT_RUN:
        return PROGRAM
    return DISRUPTION if exit_code >= SIGNALLED else PROGRAM


def task_failure(task: TaskStatus, exit_codes: Collection[int] = (), text: str = "") -> Cause:
    """A failed task's cause, classified by its Job's reason and its last failure's parts."""
    if not text:
        text = f"{task.task} Failed" + (f": {task.reason}" if task.reason else "")
    if task.job_reason == DEADLINE_EXCEEDED:
        klass, reason = DEADLINE, DEADLINE_EXCEEDED
    else:
        deleted = task.failure_deleted
        klass = exit_class(task.exit_code, task.failure_reason, exit_codes, deleted)
        reason = task.failure_reason or task.job_reason
    return Cause(TASK_FAILED, (task.task,), text, klass, task.node, task.exit_code, reason)


def run_failure(run: Run, exit_codes: Collection[int] = ()) -> Cause:
    """The cause of a run that ended Failed, or that cannot be decided (Ambiguous, Deleting)."""
    if run.state in (AMBIGUOUS, DELETING):
        return Cause(UNDECIDED, tuple(c.task for c in run.claims), run.outcome(), FINAL)
    if run.reason == DELETED:
        return Cause(GONE, (run.decided_by,), run.outcome(), FINAL, reason=DELETED)
    task = next((t for t in run.tasks if t.task == run.decided_by), None)
    if task is None:  # (state.py names a task it has) nothing to classify by
        return Cause(TASK_FAILED, (run.decided_by,), run.outcome(), PROGRAM)
    if task.refused:  # its Job failed for a pod its node refused, seen before the refusal was
        return refused(task.task, task.node, task.failure_reason)
    return task_failure(task, exit_codes, run.outcome())


def side_failure(
    run: Run,
    exit_codes: Collection[int] = (),
    left: Collection[str] = (),
    *,
    told_by_job: MutableMapping[str, float] | None = None,
    now: float = 0.0,
) -> Cause | None:
    """The first failed task of a role the training does not depend on, as a cause of its own
    (`alone`), passing over the Job uids in `left`. With `told_by_job` (first seen, by Job uid), a
    failure only its Job tells waits up to TIE seconds of `now` for its exit, as wait's does."""
    for task in side_failures(run):
        if task.uid in left:
            continue
        if told_by_job is not None and task.reason_from_job:
            first = told_by_job.setdefault(task.uid, now)
            if now - first < TIE:
                continue
        return replace(task_failure(task, exit_codes), alone=True)
    return None


def refused(task: str, node: str, reason: str) -> Cause:
    """'worker-1 refused by node h3: OutOfnvidia.com/gpu': a disruption."""
    text = f"{task} refused by node {node}: {reason}"
    return Cause(REFUSED, (task,), text, DISRUPTION, node, reason=reason)


def node_lost(tasks: Collection[str], node: str, how: str, grace: str) -> Cause:
    """'worker-1, ps-0 on node h3: NotReady for more than 1m': a disruption."""
    why = f"{how} for more than {grace}"
    text = f"{', '.join(tasks)} on node {node}: {why}"
    return Cause(NODE_LOST, tuple(tasks), text, DISRUPTION, node, reason=why)


@dataclass(frozen=True)
class Policy:
    """What `run` may restart: --restart-on, --max-restarts and --restart-exit-codes."""

    restart_on: str = "failure"
    max_restarts: int = 0
    exit_codes: frozenset[int] = frozenset()

    def restarts(self, klass: str) -> bool:
        """Whether a failure of this class is one --restart-on restarts."""
        return klass == DISRUPTION or (klass == PROGRAM and self.restart_on == "failure")


@dataclass(frozen=True)
class Decision:
    """Restart or not; when not, why, as the words that end the verdict line."""

    restart: bool
    verdict: str = ""  # the cause and why it ends the run


def decide(cause: Cause, restarts: int, policy: Policy) -> Decision:
    """Restart (within the budget), or end the run and say why; with `--max-restarts 0`, a
    deadline or a final cause, the verdict is the cause alone, as `wait` says it."""
    if cause.klass in (DEADLINE, FINAL) or policy.max_restarts == 0:
        return Decision(False, cause.text)
    if not policy.restarts(cause.klass):
        return Decision(
            False,
            f"{cause.brief()} ({cause.kind_words}); --restart-on {policy.restart_on} "
            "restarts only disruptions",
        )
    if restarts >= policy.max_restarts:
        return Decision(
            False, f"{cause.text}; no restart left ({restarts} of {policy.max_restarts} made)"
        )
    return Decision(True)


def stall_cause(line: str, tasks: Sequence[str]) -> Cause:
    """A stall as `run` and `wait` end on it: a disruption (run restarts it), its line the text."""
    return Cause(STALLED, tuple(tasks), line, DISRUPTION)


TRACEBACK = "Traceback (most recent call last):"
CHILD_FAILED = "ChildFailedError"
RANK = re.compile(r"\[rank(\d+)\]: ?")  # torch's prefix of a child's lines
# A line of a logging library (glog, absl): torchrun's own lines, TensorFlow's C++ lines.
LOGGED = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ")
ERRORISH = re.compile(
    r"(?i)\b(error|fatal|killed|exception|panic|errno)\b|can't open file|segmentation fault"
)
ROOT_CAUSE = re.compile(r"\s*rank\s*:\s*(\d+)")  # the box's `rank      : 1 (local_rank: 1)`
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
MOST = 40  # lines of a traceback shown: its first line and the last of the rest
CARRIED = 10  # lines after a traceback's final line that may carry on its message
ERROR_LINES = 5  # lines that read as an error, at most


class Traceback(NamedTuple):
    start: int  # its `Traceback (most recent call last):` line
    end: int  # one past its last line
    final: int  # its final line (the exception), or -1 when the log ends before it
    rank: str  # the rank whose prefix its lines carry; '' for none


def _split(line: str) -> tuple[str, str]:
    """(the rank of a `[rankN]: ` prefix or '', the line without it)."""
    found = RANK.match(line)
    return (found.group(1), line[found.end() :]) if found else ("", line)


def tracebacks(lines: Sequence[str]) -> list[Traceback]:
    """Every Python traceback in the lines, in order."""
    found: list[Traceback] = []
    i = 0
    while i < len(lines):
        rank, body = _split(lines[i])
        if not body.startswith(TRACEBACK):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and _split(lines[j])[0] == rank and _split(lines[j])[1][:1] == " ":
            j += 1  # the frames: each indented
        if j == len(lines) or _split(lines[j])[0] != rank or not _split(lines[j])[1].strip():
            found.append(Traceback(i, j, -1, rank))
            i = j
            continue
        end = j + 1
        while end < len(lines) and end - j <= CARRIED:
            more_rank, more = _split(lines[end])
            if (
                more_rank != rank
                or not more.strip()
                or more.startswith((TRACEBACK, *CHAINED))
                or LOGGED.match(more)
            ):
                break
            end += 1
        found.append(Traceback(i, end, j, rank))
        i = end
    return found


def task_error(lines: Sequence[str]) -> list[str]:
    """The error in a task's log lines (see the module); [] when none reads as one."""
    lines = [line.rstrip("\r\n") for line in lines]
    found = tracebacks(lines)
    if not found:
        return _errorish(lines)
    last = found[-1]
    if last.final < 0 or CHILD_FAILED not in lines[last.final]:
        return _traceback_shown(lines[last.start : last.end])
    before = lines[: last.start]
    box = lines[last.final :]
    cause = next((i for i, line in enumerate(box) if line.startswith("Root Cause")), len(box))
    root = next((m.group(1) for line in box[cause:] if (m := ROOT_CAUSE.match(line))), None)
    children = [t for t in tracebacks(before) if t.final >= 0]
    child = next((t for t in reversed(children) if t.rank == root), None) or (
        children[-1] if children else None
    )
    if child is not None:
        return _traceback_shown(before[child.start : child.end])
    return _errorish([line for line in before if not LOGGED.match(_split(line)[1])])


def _traceback_shown(block: list[str]) -> list[str]:
    """A traceback as shown: whole, or its first line and its last MOST - 2 lines."""
    if len(block) <= MOST:
        return block
    return [block[0], "  ...", *block[-(MOST - 2) :]]


def _errorish(lines: Sequence[str]) -> list[str]:
    """The last ERROR_LINES lines that read as an error, in order."""
    found = [line for line in reversed(lines) if ERRORISH.search(line)][:ERROR_LINES]
    return found[::-1]
