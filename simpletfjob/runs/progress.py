"""A run's progress kept from its reporting task's reports, shown, and what it decides (pure).

The reporting task is rank 0 (the chief, else worker 0: the framework says) unless
`--progress-task` names another; progresslog.py reads its log. A `Tracker` keeps one attempt's
latest report and the time of its last new step: a report not ahead by (epoch, step) never
moves it back, unless the last had reached its total (a bar that ended may be followed by a
bar that starts afresh).

A **stall** (`--stall-timeout D`): every task Running and no new step within D of the later of
all tasks Running and the last new step; a program that never reports stalls too. `run`
restarts on it, `wait` fails.

**The budget** (`run --max-restarts N`) bounds the restarts in a row without progress: an
attempt that passes the best step reached before its restart gives the budget back
(`Budget.reached`), so a run may restart more than N times in all. Attempt N is the one whose
`<<restart>>` is N-1.
"""

from __future__ import annotations

import json
import math
import time
from calendar import timegm
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from simpletfjob.runs.annotations import DEFAULT_POLICY
from simpletfjob.runs.progresslog import (
    MOST_METRICS,
    MOST_NAME,
    Report,
    Stepped,
    ahead,
    metric,
    whole,
)

if TYPE_CHECKING:
    from simpletfjob.frameworks import Framework


SHOWN_METRICS = 3  # metrics on the status line (the JSON has them all)
SPARK = 8  # the first metric's last values the sparkline shows
WINDOW = 10  # the last new steps the rate is measured over
BARS = "▁▂▃▄▅▆▇█"
MOST_NOTE = 4096  # a longer note cannot be one that `run` or `wait` wrote


def reporting_task(fw: Framework, tasks: Collection[str]) -> str:
    """The task whose log tells the run's progress unless --progress-task names another: rank 0
    (the framework's first deciding task under the default policy)."""
    found = fw.deciding(DEFAULT_POLICY, tasks)
    return found[0] if found else ""


@dataclass(frozen=True, kw_only=True)
class Progress:
    """A run's latest progress, as `status`, `wait`, `run` and the Python API show it; a field
    that cannot be known is None, and so is a metric that is not finite."""

    task: str  # the reporting task
    step: int
    total: int | None = None
    epoch: int | None = None
    epochs: int | None = None
    percent: float | None = None  # of the whole fit, from 0 to 100
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    steps_per_second: float | None = None
    eta_seconds: float | None = None
    updated: float | None = None  # when its step was first seen (seconds since the epoch)
    trend: tuple[float | None, ...] = ()  # the first metric's last values (the sparkline's)


class Tracker:
    """One attempt's progress, from its reporting task's reports in the order they came."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.last: Report | None = None
        self.best: Report | None = None  # the furthest report (a new count started afresh is not)
        self.updated: float | None = None  # when the last new step was seen
        self.trend: deque[float | None] = deque(maxlen=SPARK)  # the first metric's last values
        self._trend_of = ""
        self._seen: deque[tuple[float, int]] = deque(maxlen=WINDOW)  # (when, position)

    def add(self, report: Report, now: float) -> bool:
        """Take a report seen at `now`; True when it is a new step: ahead of the last, or below
        a last of its form that finished its count (the next epoch's bar, the training's after
        a data set's). Else it moves nothing; the same step said again is the latest word."""
        last = self.last
        afresh = (
            last is not None
            and last.form == report.form
            and last.finished()
            and ahead(last, report)
        )
        if last is not None and not ahead(report, last) and not afresh:
            if not ahead(last, report):  # Keras's `8/8` after `8/Unknown`, a summary line
                self.last = report
            return False
        position = report.position()
        if self._seen and position <= self._seen[-1][1]:  # counted afresh: not comparable
            self._seen.clear()
        self._seen.append((now, position))
        if report.metrics:
            name, value = report.metrics[0]
            if name != self._trend_of:
                self.trend.clear()
                self._trend_of = name
            self.trend.append(value)
        if self.best is None or ahead(report, self.best):
            self.best = report
        self.last, self.updated = report, now
        return True

    def rate(self) -> float | None:
        """Steps a second over the last new steps; else as the program's bar says it."""
        if len(self._seen) > 1 and self._seen[-1][0] > self._seen[0][0]:
            (then, first), (now, last) = self._seen[0], self._seen[-1]
            return (last - first) / (now - then)
        return self.last.rate if self.last is not None else None

    def progress(self) -> Progress | None:
        """The latest progress, or None before any report."""
        last = self.last
        if last is None:
            return None
        done, rate, left = last.done(), self.rate(), last.left()
        return Progress(
            task=self.task,
            step=last.step,
            total=last.total,
            epoch=last.epoch,
            epochs=last.epochs,
            percent=None if done is None else 100 * done,
            metrics=dict(last.metrics),
            steps_per_second=rate,
            eta_seconds=left / rate if left is not None and rate else None,
            updated=self.updated,
            trend=tuple(self.trend),
        )


def span(seconds: float) -> str:
    """A duration in short words: 45s, 1m15s, 2m, 3h20m, 2d3h."""
    s = max(int(seconds), 0)
    for size, unit, part, smaller in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "m"),
        (60, "m", 1, "s"),
    ):
        if s >= size:
            rest = s % size // part
            return f"{s // size}{unit}" + (f"{rest}{smaller}" if rest else "")
    return f"{s}s"


def clock(when: float) -> str:
    """A time of day in the local zone, as the user's clock shows it: 10:41:07."""
    return time.strftime("%H:%M:%S", time.localtime(when))


def utc(when: float) -> str:
    """A time as Kubernetes writes one: 2026-11-29T07:15:00Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def at(p: Stepped, totals: bool = True) -> str:
    """Where a report or progress stands: 'step 120/1000', 'epoch 3/10 step 120/1000'; without
    `totals`, as the stall and resumed lines say it: 'epoch 3 step 120'."""
    step = f"step {p.step}" + (f"/{p.total}" if p.total and totals else "")
    if p.epoch is None:
        return step
    return f"epoch {p.epoch}" + (f"/{p.epochs}" if p.epochs and totals else "") + f" {step}"


def sparkline(values: Sequence[float | None]) -> str:
    """The values' trend in block characters (those not finite left out); '' for fewer than 2."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if len(finite) < 2:
        return ""
    low, high = min(finite), max(finite)
    if high == low:
        return BARS[3] * len(finite)
    return "".join(BARS[int((v - low) / (high - low) * (len(BARS) - 1))] for v in finite)


def _metric(value: float | None) -> str:
    return "nan" if value is None else f"{value:.4g}"


def progress_line(p: Progress, now: float, trend: Sequence[float | None] = ()) -> str:
    """`progress  step 120/1000 (12%)  loss 0.31  11.6 steps/s  ETA 1m15s  worker-0, 3s ago`;
    with a trend, the first metric's sparkline follows its value."""
    parts = [at(p) + (f" ({int(p.percent)}%)" if p.percent is not None else "")]
    for i, (name, value) in enumerate(list(p.metrics.items())[:SHOWN_METRICS]):
        spark = sparkline(trend) if i == 0 else ""
        parts.append(f"{name} {_metric(value)}" + (f" {spark}" if spark else ""))
    rate = p.steps_per_second
    if rate:
        parts.append(f"{rate:.3g} steps/s" if rate < 1000 else f"{rate:.0f} steps/s")
    if p.eta_seconds is not None:
        parts.append(f"ETA {span(p.eta_seconds)}")
    parts.append(p.task + ("" if p.updated is None else f", {span(now - p.updated)} ago"))
    return "progress  " + "  ".join(parts)


def progress_json(p: Progress | None) -> dict[str, Any] | None:
    """The `progress` of `status -o json`, or None when none was seen."""
    if p is None:
        return None
    rate, eta = p.steps_per_second, p.eta_seconds
    return {
        "task": p.task,
        "step": p.step,
        "total": p.total,
        "epoch": p.epoch,
        "epochs": p.epochs,
        "percent": None if p.percent is None else round(p.percent, 2),
        "metrics": dict(p.metrics),
        "stepsPerSecond": None if rate is None else round(rate, 3),
        "etaSeconds": None if eta is None else round(eta),
        "updated": None if p.updated is None else utc(p.updated),
    }


def progress_note(p: Progress) -> str:
    """The annotation a finished run keeps its last progress in: its JSON object, no ETA."""
    data = progress_json(p)
    assert data is not None
    del data["etaSeconds"]
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def read_note(text: str) -> Progress | None:
    """A finished run's last progress from its note, or None when the note cannot be right."""
    try:
        data = json.loads(text) if len(text) <= MOST_NOTE else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(metrics := data.get("metrics"), dict):
        return None
    task, step = data.get("task"), whole(data.get("step"))
    counts = {name: data.get(name) for name in ("total", "epoch", "epochs")}
    numbers = [data.get("percent"), data.get("stepsPerSecond"), *metrics.values()]
    if (
        not isinstance(task, str)
        or not (0 < len(task) <= MOST_NAME and task.isprintable())
        or step is None
        or len(metrics) > MOST_METRICS
        or not all(isinstance(name, str) and len(name) <= MOST_NAME for name in metrics)
        or any(v is not None and whole(v) is None for v in counts.values())
        or any(v is not None and metric("number", v) != ("number", v) for v in numbers)
    ):
        return None
    try:
        updated = data.get("updated")
        when = None if updated is None else timegm(time.strptime(updated, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return None
    percent = data.get("percent")
    return Progress(
        task=task,
        step=step,
        percent=None if percent is None else min(max(percent, 0), 100),
        metrics=metrics,
        steps_per_second=data.get("stepsPerSecond"),
        updated=when,
        total=counts["total"],
        epoch=counts["epoch"],
        epochs=counts["epochs"],
    )


HOW = (
    'print JSON lines such as {"step": 120, "total": 1000}, a tqdm or Keras progress bar, '
    "or give the run a --progress-pattern"
)


def stall_due(timeout: float, running_since: float | None, stepped: float | None) -> float | None:
    """When the run is stalled unless a new step comes first (see the module); None while some
    task is not Running."""
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
    return f"stalled: no new step for {span(timeout)} (last: {at(last, totals=False)} at {clock(stepped)})"


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
    best = "none" if budget.best is None else at(budget.best, totals=False).removeprefix("step ")
    return f"attempt {budget.attempt} resumed at {at(first, totals=False)} (best before the restart: {best})"


def restarts_words(done: int, in_a_row: int, limit: int) -> str:
    """`restarts 1/3`, or, once progress has given some back, `restarts 5 (1 in a row without
    progress, of 3)`: what `status` shows."""
    if in_a_row == done:
        return f"restarts {done}/{limit}"
    return f"restarts {done} ({in_a_row} in a row without progress, of {limit})"


def best_note(best: Stepped, task: str) -> str:
    """The best step before an attempt, as an annotation (progress.py's note: read_note reads it)."""
    return progress_note(Progress(task=task, step=best.step, epoch=best.epoch))
