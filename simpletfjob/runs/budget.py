"""What a run's progress decides: a stall, and a restart budget that follows progress; pure, no clock.

**A stall** (`--stall-timeout D`): every task is Running, and the reporting task has shown no
new step within D of the moment all tasks were Running, or of its last new step, whichever is
later (`stall_due`). A program that never reports is stalled after D too, since the user asked
for the check: its line says that no progress was seen, and how to report it (`stall_line`).
`run` takes a stall as a disruption (`stall_cause`: it restarts the run), `wait` as a failure.

**The budget** (`run --max-restarts N`): N bounds the restarts in a row that made no progress.
Each attempt's furthest step is kept as the best before the next (`Budget.restarted`); an
attempt whose step passes the best reached before its restart gives back the budget that the
restarts in a row before it spent (`Budget.reached`), so a run may restart more than N times
in all. A run that reports no progress passes no best step: every restart counts, as it always
has. Attempts count from 1: attempt N is the one whose `<<restart>>` is N-1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from simpletfjob.runs.classify import DISRUPTION, STALLED, Cause
from simpletfjob.runs.progress import Progress, clock, progress_note, span
from simpletfjob.runs.progresslog import ahead

if TYPE_CHECKING:
    from simpletfjob.runs.progresslog import Stepped

HOW = (
    'print JSON lines such as {"step": 120, "total": 1000}, a tqdm or Keras progress bar, '
    "or give the run a --progress-pattern"
)


def stall_due(timeout: float, running_since: float | None, stepped: float | None) -> float | None:
    """When the run is stalled unless a new step comes first: `timeout` after every task was
    Running (`running_since`) or after the last new step (`stepped`), whichever is later; None
    while some task is not Running."""
    if running_since is None:
        return None
    return max(running_since, stepped or running_since) + timeout


def stall_line(timeout: float, task: str, last: Stepped | None, stepped: float | None) -> str:
    """`stalled: no new step for 2m (last: step 1200 at 10:41:07)`, or, when the reporting task
    showed no step at all, that no progress was seen and how to report it."""
    if last is None or stepped is None:
        return (
            f"stalled: no progress seen in {span(timeout)}: {task} printed no step that "
            f"simpletfjob reads ({HOW})"
        )
    return f"stalled: no new step for {span(timeout)} (last: {point(last)} at {clock(stepped)})"


def stall_cause(line: str, tasks: Sequence[str]) -> Cause:
    """A stall as `run` and `wait` end on it: a disruption (run restarts it), its line the text."""
    return Cause(STALLED, tuple(tasks), line, DISRUPTION)


@dataclass(frozen=True, kw_only=True)
class Budget:
    """A run's restarts so far, those in a row without progress, and the best step before the
    attempt now running."""

    restarts: int = 0  # whole-run restarts made
    in_a_row: int = 0  # the last of them, in a row, whose attempts passed no best step
    best: Stepped | None = None  # the furthest step reached before the attempt now running

    @property
    def attempt(self) -> int:
        """The attempt now running, counted from 1."""
        return self.restarts + 1

    def reached(self, report: Stepped) -> Budget:
        """The attempt now running reached `report`: once past the best, the budget comes back."""
        return replace(self, in_a_row=0) if self.in_a_row and ahead(report, self.best) else self

    def restarted(self, furthest: Stepped | None) -> Budget:
        """The budget after the attempt now running is restarted; `furthest`, the step it reached."""
        best = furthest if furthest is not None and ahead(furthest, self.best) else self.best
        return Budget(restarts=self.restarts + 1, in_a_row=self.in_a_row + 1, best=best)

    def spent(self, limit: int) -> str:
        """What the budget has spent, as `run`'s last line says it: '2 of 3 made', or
        '3 in a row without progress, of 3; 5 in all'."""
        if self.in_a_row == self.restarts:
            return f"{self.restarts} of {limit} made"
        return f"{self.in_a_row} in a row without progress, of {limit}; {self.restarts} in all"


def resumed_line(budget: Budget, first: Stepped) -> str:
    """`attempt 3 resumed at step 1150 (best before the restart: 1200)`: a new attempt's first
    report, beside the best that the attempts before it reached."""
    best = "none" if budget.best is None else point(budget.best).removeprefix("step ")
    return f"attempt {budget.attempt} resumed at {point(first)} (best before the restart: {best})"


def point(p: Stepped) -> str:
    """Where a report stands, without its totals, as the stall and resumed lines say it (the
    progress line has them): 'step 1200', 'epoch 3 step 120'."""
    return ("" if p.epoch is None else f"epoch {p.epoch} ") + f"step {p.step}"


def restarts_words(done: int, in_a_row: int, limit: int) -> str:
    """`restarts 1/3`, or, once progress has given some back, `restarts 5 (1 in a row without
    progress, of 3)`: what `status` shows."""
    if in_a_row == done:
        return f"restarts {done}/{limit}"
    return f"restarts {done} ({in_a_row} in a row without progress, of {limit})"


def best_note(best: Stepped, task: str) -> str:
    """The best step before an attempt, as an annotation (progress.py's note: read_note reads it)."""
    return progress_note(Progress(task=task, step=best.step, epoch=best.epoch))
