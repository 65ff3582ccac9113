"""How a run's progress is read and judged: --progress-task and --progress-pattern (apply, run),
--stall-timeout (run, wait); a template header may set each of them for apply and run.

runs/progresslog.py reads the reporting task's log, runs/progress.py judges a stall, and
runs/reporting.py notes these on the run, so that `status` and `wait` read them later.
"""

from __future__ import annotations

import re
from typing import Any

from simpletfjob.options.rules import duration
from simpletfjob.options.table import Must, OptionGroup, option


def check_pattern(text: str) -> str | None:
    """Why `text` cannot be a progress pattern (a regular expression with a named group `step`;
    '' for none), as a phrase that follows the option's name, or None. --progress-pattern's rule."""
    if not text:
        return None
    try:
        pattern = re.compile(text)
    except (re.error, RecursionError, OverflowError) as e:
        return f"must be a regular expression, not {text!r}: {e}"
    if "step" not in pattern.groupindex:
        return f"must have a named group 'step', as in (?P<step>\\d+), not {text!r}"
    return None


class ProgressOptions(OptionGroup):
    """Where a run's progress is read from (apply and run); a template header may set them."""

    section = "Run options"

    progress_task: str = option(
        "--progress-task",
        default="",
        metavar="TASK",
        header=True,
        help="The task whose log tells the run's progress. The default is rank 0: the chief where "
        "the run has one, else worker 0. status, wait and run read its log.",
    )
    progress_pattern: str = option(
        "--progress-pattern",
        default="",
        metavar="RE",
        header=True,
        rule=check_pattern,
        help="A regular expression that reads progress. Its named groups: step, and total, epoch "
        "and epochs if given; every other is a metric, as in 'it (?P<step>\\d+) "
        "loss=(?P<loss>\\S+)'. Only it is read then (no JSON line, tqdm or Keras bar).",
    )


def stall_timeout(help: str, header: bool = False) -> Any:
    """--stall-timeout D, for run (and its header) and wait."""
    return duration(
        "--stall-timeout",
        default=None,
        header=header,
        rule=Must("more than 0", lambda value: value > 0),
        help=help,
    )


class StallOptions(OptionGroup):
    """run's stall check; a template header may set it."""

    section = "Run options"

    stall_timeout: float | None = stall_timeout(
        "Restart the run when it stalls this long. A stall: every task Running, and the "
        "reporting task shows no new step within this long of the moment all were Running or of "
        "its last one (a hung all-reduce); a program that never reports stalls too. run restarts "
        "the whole run, as a disruption. Noted on the run as wait's default.",
        header=True,
    )
