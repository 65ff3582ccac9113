"""runs/progress.py: a stall and a restart budget that follows progress, as pure rules (no server,
no clock), with classify.py's decision over them as `run` makes it."""

from __future__ import annotations

import time

import pytest

from simpletfjob.runs.classify import DISRUPTION, STALLED, Policy, decide, stall_cause
from simpletfjob.runs.progress import (
    HOW,
    Budget,
    best_note,
    read_note,
    restarts_words,
    resumed_line,
    stall_due,
    stall_line,
)
from simpletfjob.runs.progresslog import Report, ahead

# A local time of day, as the stall line says it.
AT_10_41_07 = time.mktime((2026, 11, 29, 10, 41, 7, 0, 0, -1))


def test_a_stall_is_due_a_timeout_after_all_ran_or_the_last_new_step_whichever_is_later() -> None:
    assert stall_due(120, None, 50.0) is None  # some task is not Running: no stall
    assert stall_due(120, 10.0, None) == 130.0  # no step yet: from when all were Running
    assert stall_due(120, 10.0, 50.0) == 170.0
    assert stall_due(120, 60.0, 50.0) == 180.0  # a task ran again after the last step


def test_the_stall_line_says_the_last_step_and_when() -> None:
    line = stall_line(120, "worker-0", Report(step=1200, total=5000), AT_10_41_07)
    assert line == "stalled: no new step for 2m (last: step 1200 at 10:41:07)"
    keras = Report(step=120, total=1000, epoch=3, epochs=10)
    assert stall_line(90, "chief-0", keras, AT_10_41_07) == (
        "stalled: no new step for 1m30s (last: epoch 3 step 120 at 10:41:07)"
    )


def test_a_program_that_never_reported_is_told_how_to_report() -> None:
    line = stall_line(300, "chief-0", None, None)
    assert line == (
        f"stalled: no progress seen in 5m: chief-0 printed no step that simpletfjob reads ({HOW})"
    )
    assert '{"step": 120, "total": 1000}' in line and "--progress-pattern" in line


@pytest.mark.parametrize("restart_on", ["failure", "disruption"])
def test_run_restarts_a_stall_as_a_disruption(restart_on: str) -> None:
    cause = stall_cause("stalled: no new step for 2m (last: step 1200 at 10:41:07)", ["worker-0"])
    assert (cause.kind, cause.klass, cause.tasks) == (STALLED, DISRUPTION, ("worker-0",))
    assert decide(cause, 0, Policy(restart_on, 1)).restart
    # wait (no restart) ends on it with the line itself.
    assert decide(cause, 0, Policy(restart_on, 0)).verdict == str(cause)


def attempt(budget: Budget, steps: list[int], limit: int) -> tuple[Budget, bool]:
    """One attempt that reports `steps`, then crashes: the budget after it, and whether `run`
    restarts it (classify.decide over the restarts in a row without progress)."""
    tracker_best: Report | None = None
    for step in steps:
        report = Report(step=step)
        budget = budget.reached(report)
        if tracker_best is None or ahead(report, tracker_best):
            tracker_best = report
    crash = stall_cause("worker-0 exited 3", ["worker-0"])  # any restartable cause
    if not decide(crash, budget.in_a_row, Policy("failure", limit)).restart:
        return budget, False
    return budget.restarted(tracker_best), True


def test_a_run_that_checkpoints_and_crashes_after_new_steps_restarts_past_its_limit() -> None:
    budget = Budget()
    for steps in ([0, 100, 200], [150, 250], [240, 300]):  # each attempt passes the best before
        budget, restarted = attempt(budget, steps, limit=1)
        assert restarted
    assert (budget.attempt, budget.restarts, budget.in_a_row) == (4, 3, 1)
    assert budget.best == Report(step=300)
    assert budget.reached(Report(step=301)).in_a_row == 0  # attempt 4 passes 300, and finishes


def test_a_run_that_crashes_at_the_same_step_fails_after_one_restart() -> None:
    budget, restarted = attempt(Budget(), [0, 100, 120], limit=1)
    assert restarted and budget.in_a_row == 1
    budget, restarted = attempt(budget, [100, 120], limit=1)  # back at 120: no further
    assert not restarted and (budget.restarts, budget.in_a_row) == (1, 1)
    assert budget.spent(1) == "1 of 1 made"


def test_a_run_that_reports_no_progress_spends_a_restart_each_time() -> None:
    budget = Budget()
    for _ in range(3):
        budget, restarted = attempt(budget, [], limit=3)
        assert restarted
    assert (budget.restarts, budget.in_a_row, budget.best) == (3, 3, None)
    assert not attempt(budget, [], limit=3)[1]


def test_an_attempt_after_one_that_reported_nothing_gives_back_at_its_first_step() -> None:
    budget = Budget().restarted(None)  # attempt 1 crashed before its first report
    assert budget.reached(Report(step=0)).in_a_row == 0


def test_progress_is_ordered_by_epoch_then_step_across_attempts() -> None:
    budget = Budget().restarted(Report(step=900, total=1000, epoch=2, epochs=10))
    assert budget.reached(Report(step=10, total=1000, epoch=2, epochs=10)).in_a_row == 1
    assert budget.reached(Report(step=1, total=1000, epoch=3, epochs=10)).in_a_row == 0
    # A further attempt that reaches less keeps the best there was.
    assert budget.restarted(Report(step=5, epoch=2)).best == budget.best


def test_the_lines_of_the_budget_are_as_the_issue_shows_them() -> None:
    budget = Budget(restarts=2, in_a_row=2, best=Report(step=1200))
    assert budget.attempt == 3
    assert resumed_line(budget, Report(step=1150)) == (
        "attempt 3 resumed at step 1150 (best before the restart: 1200)"
    )
    # Without the totals, as the issue's lines show them (the progress line has them).
    counted = Budget(restarts=2, in_a_row=2, best=Report(step=1200, total=5000))
    assert resumed_line(counted, Report(step=1150, total=5000)) == (
        "attempt 3 resumed at step 1150 (best before the restart: 1200)"
    )
    assert resumed_line(Budget(restarts=1, in_a_row=1), Report(step=0)) == (
        "attempt 2 resumed at step 0 (best before the restart: none)"
    )
    assert restarts_words(5, 1, 3) == "restarts 5 (1 in a row without progress, of 3)"
    assert restarts_words(1, 1, 3) == "restarts 1/3"  # every restart counted: as today
    assert Budget(restarts=5, in_a_row=3).spent(3) == "3 in a row without progress, of 3; 5 in all"


def test_the_best_step_before_an_attempt_reads_back_from_its_note() -> None:
    best = Report(step=120, total=1000, epoch=3, epochs=10)
    read = read_note(best_note(best, "worker-0"))
    assert read is not None and (read.task, read.epoch, read.step) == ("worker-0", 3, 120)
    assert Budget(best=read).reached(Report(step=121, epoch=3)).best == read
    assert Budget(in_a_row=1, best=read).reached(Report(step=121, epoch=3)).in_a_row == 0
