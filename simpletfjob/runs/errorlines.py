"""The error in a failed task's log, found in its lines: pure, no server.

The last lines of a log are often not the error. torchrun ends with its `ChildFailedError`
box, which names only the failed rank and its exit code (unless the program uses
`@record`); the real error, the failed child's own traceback or `can't open file`, is
further up. So a task's error is, in this order:

- the last Python traceback, with its final line (and the few lines that carry on its
  message, as JAX's note on filtered frames does);
- when that traceback is torchrun's own `ChildFailedError`: in what came before it, the
  traceback of the rank that the box names as the root cause (torch prefixes a child's lines
  `[rank1]: `), else the last traceback, else the last lines that read as an error, leaving
  out torchrun's own log lines;
- with no traceback, the last lines that read as an error (`error`, `fatal`, `Killed`);
- else nothing, and the caller shows the last lines as it always has.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

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
        return _shown(lines[last.start : last.end])
    before = lines[: last.start]
    box = lines[last.final :]
    cause = next((i for i, line in enumerate(box) if line.startswith("Root Cause")), len(box))
    root = next((m.group(1) for line in box[cause:] if (m := ROOT_CAUSE.match(line))), None)
    children = [t for t in tracebacks(before) if t.final >= 0]
    child = next((t for t in reversed(children) if t.rank == root), None) or (
        children[-1] if children else None
    )
    if child is not None:
        return _shown(before[child.start : child.end])
    return _errorish([line for line in before if not LOGGED.match(_split(line)[1])])


def _shown(block: list[str]) -> list[str]:
    """A traceback as shown: whole, or its first line and its last MOST - 2 lines."""
    if len(block) <= MOST:
        return block
    return [block[0], "  ...", *block[-(MOST - 2) :]]


def _errorish(lines: Sequence[str]) -> list[str]:
    """The last ERROR_LINES lines that read as an error, in order."""
    found = [line for line in reversed(lines) if ERRORISH.search(line)][:ERROR_LINES]
    return found[::-1]
