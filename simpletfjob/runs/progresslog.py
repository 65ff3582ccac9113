"""Progress read from a task's log as it arrives: each line's `Report`; pure, no cluster, no clock.

A `LogReader` is fed the log in chunks as they come, cut anywhere; a line ends at a newline or
a carriage return (a bar's updates), colour codes and backspaces are read through, and so is
torchrun's `[default0]:` prefix (`--tee`): only local rank 0's lines are read (a prefix may
also follow an unended bar on its line, as torchrun tees stderr beside stdout). A line is
progress in one of these forms:

- a JSON object with a whole-number "step": "total", "epoch" and "epochs" as whole numbers too,
  every other top-level number a metric (`{"step": 120, "total": 1000, "loss": 0.31}`);
- a tqdm bar (`train: 12%|█▏ | 120/1000 [00:10<01:15, 11.6it/s, loss=0.31]`, or `120it [...]`
  without a total), its metrics from the postfix; a description that names the epoch
  (`Epoch 3/10`) gives it;
- Keras's: an `Epoch 3/10` line, then its bar (`120/1000 ━━━━ 2s 2ms/step - loss: 0.3100`,
  `120/Unknown ...`) or its line per epoch (`8/8 - 1s - 71ms/step - loss: 0.31`);
- with a pattern of the template's own (`--progress-pattern`), only what it matches: named
  groups step (required), total, epoch, epochs, every other a metric.

When a report gives the number of epochs (Keras's and an epoch-naming bar's always count so),
its step and total count within the epoch, and its part done runs over the whole fit; epochs
count from 1, as Keras's do. A line that looks like progress but is not is no report. A step
written with a unit's prefix (tqdm's `unit_scale`: `1.2k`) is not read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

RESERVED = ("step", "total", "epoch", "epochs")  # a report's own fields: never metrics
MOST_METRICS = 16  # metrics kept of one report (a hostile log aside, a program has a few)
MOST_NAME = 64  # a metric's name, in characters
MOST_LINE = 4096  # a longer line is no progress line (and is not searched by a pattern)
MOST_PENDING = 65536  # an unended line held longer than this is dropped, and its rest ignored

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_BREAK = re.compile(r"[\r\n]")
# torchrun --tee's `[default0]:`, where a line starts or right after a bar's `]` (its unended line)
_RANK = re.compile(r"(?:^|(?<=\]))\[[A-Za-z_-]*(\d{1,6})\]:")
_EPOCH = re.compile(r"Epoch (\d{1,9})/(\d{1,9})")
_KERAS = re.compile(r"(\d{1,15})/(\d{1,15}|Unknown) (?:━+ |\[[=>.]*\] |- |\d+(?:\.\d+)?m?s )(.*)")
_KERAS_METRIC = re.compile(r"(?:^| - )([A-Za-z_][\w./-]*): (\S+)")
_KERAS_RATE = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s)/step")
_TQDM = re.compile(
    r"(?:(?P<desc>.*): *)?(?:\d{1,3}%\|[^|]*\| (?P<n>\d{1,15})/(?P<total>\d{1,15}) "
    r"|(?P<count>\d{1,15})[A-Za-z]* (?=\[[\d:]+, ))\[(?P<inside>[^\]]*)\]"
)
_TQDM_EPOCH = re.compile(r"(?i)\bepoch\s*(\d{1,9})(?:\s*/\s*(\d{1,9}))?")
_TQDM_RATE = re.compile(r"(\d+(?:\.\d+)?)(?:[A-Za-z]*/s|s/([A-Za-z]*))")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}

Metrics = tuple[tuple[str, float | None], ...]


class Stepped(Protocol):
    """Where progress stands: a `Report`, or progress.py's `Progress`."""

    @property
    def step(self) -> int: ...
    @property
    def total(self) -> int | None: ...
    @property
    def epoch(self) -> int | None: ...
    @property
    def epochs(self) -> int | None: ...


def ahead(one: Stepped, other: Stepped | None) -> bool:
    """Whether `one` is ahead of `other` (of none, always): by epoch where both give one, else
    by step."""
    if other is None:
        return True
    if one.epoch is not None and other.epoch is not None and one.epoch != other.epoch:
        return one.epoch > other.epoch
    return one.step > other.step


@dataclass(frozen=True, kw_only=True)
class Report:
    """One line's progress, as the program said it; a metric that is not finite is None."""

    step: int
    total: int | None = None
    epoch: int | None = None
    epochs: int | None = None
    metrics: Metrics = ()
    rate: float | None = None  # steps a second, as the program's own bar says it
    within: bool = False  # the step and total count within the epoch (see the module)
    form: str = ""  # which form it was read in: 'json', 'tqdm', 'keras' or 'pattern'

    def finished(self) -> bool:
        """Whether its count has reached its total: a bar that has ended (an epoch's, a data
        set's); the next report may start afresh below it (progress.py)."""
        return self.total is not None and self.step >= self.total

    def done(self) -> float | None:
        """The part of the whole fit done, from 0 to 1, when it can be known."""
        if not self.total:
            return None
        if not self.within:
            part = self.step / self.total
        elif self.epoch and self.epochs:
            part = (self.epoch - 1 + min(self.step / self.total, 1.0)) / self.epochs
        else:
            return None
        return min(max(part, 0.0), 1.0)

    def left(self) -> int | None:
        """The steps left in the whole fit, when they can be known."""
        if not self.total or self.done() is None:
            return None
        later = (self.epochs or 0) - (self.epoch or 0) if self.within else 0
        return max(self.total - self.step, 0) + max(later, 0) * self.total

    def position(self) -> int:
        """The step counted over the fit where the epochs allow it: what the rate is measured on."""
        if self.within and self.epoch and self.total:
            return (self.epoch - 1) * self.total + self.step
        return self.step


class LogReader:
    """Reports from one task's log, fed in chunks as they come (see the module)."""

    def __init__(self, pattern: re.Pattern[str] | None = None) -> None:
        self.pattern = pattern
        self._pending = ""
        self._rank = 0  # the local rank whose line this is (torchrun's prefix); 0 when none
        self._cut = False  # the text held grew too long and was dropped: the rest of it is ignored
        self._epoch: tuple[int, int] | None = None  # Keras's last `Epoch 3/10`
        self._ended: int | None = None  # the step of the fit's last bar, once its last epoch ends

    def feed(self, text: str) -> list[Report]:
        """The reports of every line that `text` ends (a line's end may come in a later chunk)."""
        pending, start, found = self._pending + text, 0, []
        for end in _BREAK.finditer(pending):
            found += self._line(pending[start : end.start()])
            if end.group() == "\n":
                self._rank = 0
            start = end.end()
        self._pending = pending[start:]
        if len(self._pending) > MOST_PENDING:
            self._pending, self._cut = "", True
        return found

    def close(self) -> list[Report]:
        """The reports of the last line, unended (the log's end, or a tail read whole)."""
        rest, self._pending = self._pending, ""
        return self._line(rest)

    def _line(self, text: str) -> list[Report]:
        if self._cut:
            self._cut = False
            return []
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        text = text.replace("\b", "")
        found: list[Report] = []
        start = 0
        for prefix in _RANK.finditer(text):  # a prefix may follow an unended bar on its line
            if self._rank == 0:
                found += self._read(text[start : prefix.start()])
            self._rank, start = int(prefix[1]), prefix.end()
        if self._rank == 0:
            found += self._read(text[start:])
        return found

    def _read(self, text: str) -> list[Report]:
        text = text.strip()
        if not text or len(text) > MOST_LINE:
            return []
        if self.pattern is not None:
            report = _matched(self.pattern, text)
        elif text[0] == "{":
            report = _json(text)
        elif (epoch := _EPOCH.fullmatch(text)) is not None:
            self._epoch, self._ended, report = (int(epoch[1]), int(epoch[2])), None, None
        elif (keras := _KERAS.fullmatch(text)) is not None:
            report = _keras(keras, self._epoch)
            if self._ended not in (None, report.step):  # a bar after the fit's (`evaluate`)
                self._epoch, self._ended = None, None
                report = _keras(keras, None)
            elif report.finished() and report.epoch == report.epochs:
                self._ended = report.step  # the fit's last bar (drawn again at its end)
        elif (bar := _TQDM.fullmatch(text)) is not None:
            report = _tqdm(bar)
        else:
            report = None
        return [] if report is None else [report]


def metric(name: str, value: Any) -> tuple[str, float | None] | None:
    """A metric as (name, number), None for a number that is not finite; None if it is no metric."""
    if name in RESERVED or len(name) > MOST_NAME or not name.isprintable():
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return name, number if math.isfinite(number) else None


def _metrics(pairs: Sequence[tuple[str, Any]]) -> Metrics:
    found = (metric(name, value) for name, value in pairs)
    return tuple(m for m in found if m is not None)[:MOST_METRICS]


def whole(value: Any, least: int = 0) -> int | None:
    """A JSON value as a whole number of at least `least`, else None (a float step is no step)."""
    if isinstance(value, int) and not isinstance(value, bool) and least <= value < 10**18:
        return value
    return None


def _digits(text: str, least: int = 0) -> int | None:
    text = text.strip()
    ok = text.isascii() and text.isdigit() and len(text) <= 18
    return whole(int(text), least) if ok else None


def _json(text: str) -> Report | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or (step := whole(data.get("step"))) is None:
        return None
    numbers = [
        (name, value)
        for name, value in data.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ]
    epochs = whole(data.get("epochs"), 1)
    return Report(
        step=step,
        total=whole(data.get("total"), 1),
        epoch=whole(data.get("epoch")),
        epochs=epochs,
        metrics=_metrics(numbers),
        within=epochs is not None,
        form="json",
    )


def _matched(pattern: re.Pattern[str], text: str) -> Report | None:
    match = pattern.search(text)
    if match is None:
        return None
    said = match.groupdict()
    step = _digits(said["step"] or "")
    if step is None:
        return None
    parts: dict[str, int | None] = {}
    for name, least in (("total", 1), ("epoch", 0), ("epochs", 1)):
        value = said.get(name)
        parts[name] = None if value is None else _digits(value, least)
        if value is not None and parts[name] is None:
            return None  # a total that is not a number: not a progress line after all
    named = sorted(pattern.groupindex.items(), key=lambda item: item[1])
    metrics = _metrics([(name, said[name]) for name, _ in named if said[name] is not None])
    within = parts["epochs"] is not None
    return Report(step=step, metrics=metrics, within=within, form="pattern", **parts)


def _keras(match: re.Match[str], epoch: tuple[int, int] | None) -> Report:
    speed = _KERAS_RATE.search(match[3])
    rate = 1 / (float(speed[1]) * _UNITS[speed[2]]) if speed and float(speed[1]) else None
    at, of = epoch if epoch is not None else (None, None)
    return Report(
        step=int(match[1]),
        total=None if match[2] == "Unknown" else _digits(match[2], 1),
        epoch=at,
        epochs=of,
        metrics=_metrics(_KERAS_METRIC.findall(match[3])),
        rate=rate,
        within=True,
        form="keras",
    )


def _tqdm(match: re.Match[str]) -> Report:
    inside = match["inside"].split(", ")
    speed = _TQDM_RATE.fullmatch(inside[1]) if len(inside) > 1 else None
    rate = None
    if speed is not None and float(speed[1]):
        rate = 1 / float(speed[1]) if speed[2] is not None else float(speed[1])
    metrics = _metrics([tuple(item.split("=", 1)) for item in inside[2:] if "=" in item])
    epoch = _TQDM_EPOCH.search(match["desc"] or "")
    at = int(epoch[1]) if epoch else None
    of = int(epoch[2]) if epoch and epoch[2] and int(epoch[2]) else None
    counted = match["count"] is not None
    return Report(
        step=int(match["count"] if counted else match["n"]),
        total=None if counted else _digits(match["total"], 1),
        epoch=at,
        epochs=of,
        metrics=metrics,
        rate=rate,
        within=epoch is not None,
        form="tqdm",
    )
