"""runs/progresslog.py and runs/progress.py: a run's progress read from a log as it arrives, kept
and shown (no server, no clock: times are given). Real programs' output is read from
tests/support/recorded_progress (its README says how each log was made)."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.errors import UsageError
from simpletfjob.frameworks import framework
from simpletfjob.options.progress import check_pattern
from simpletfjob.runs.progress import (
    Progress,
    Tracker,
    progress_json,
    progress_line,
    progress_note,
    read_note,
    reporting_task,
    span,
    sparkline,
)
from simpletfjob.runs.progresslog import (
    MOST_PENDING,
    LogReader,
    Report,
)

RECORDED = Path(__file__).parents[1] / "support" / "recorded_progress"


def recorded(name: str) -> str:
    """A recorded log as written, its carriage returns kept (no newline translation)."""
    with open(RECORDED / name, encoding="utf-8", newline="") as f:
        return f.read()


def read(text: str, pattern: str | None = None, chunk: int = 0) -> list[Report]:
    """Every report of `text`, fed whole or in chunks of `chunk` characters, then closed."""
    reader = LogReader(None if pattern is None else re.compile(pattern))
    size = chunk or len(text) or 1
    found = [r for i in range(0, len(text), size) for r in reader.feed(text[i : i + size])]
    return found + reader.close()


def where(reports: list[Report]) -> list[tuple[int | None, int, int | None]]:
    return [(r.epoch, r.step, r.total) for r in reports]


def tracked(reports: list[Report], every: float = 1.0) -> Tracker:
    tracker = Tracker("worker-0")
    for i, report in enumerate(reports):
        tracker.add(report, 1000.0 + i * every)
    return tracker


# Real programs' output.


def test_a_json_line_program_gives_its_steps_epochs_and_metrics_and_nothing_else() -> None:
    reports = read(recorded("json_lines.log"))
    # The string step of a log line and the float step of a checkpoint event are no progress.
    assert where(reports) == [(e, s, 40) for e in (1, 2) for s in (10, 20, 30, 40)]
    assert {r.epochs for r in reports} == {2}
    assert dict(reports[0].metrics) == {"loss": 2.053527575360657, "lr": 0.05}
    # The diverged loss (Infinity, then NaN) is a metric that is not finite: None.
    assert [dict(r.metrics)["loss"] for r in reports[-2:]] == [None, None]
    # step and total count within the epoch: epoch 1 of 2, step 20 of 40 is a quarter.
    assert reports[1].done() == 0.25
    progress = tracked(reports).progress()
    assert progress is not None
    assert (progress.epoch, progress.step, progress.percent) == (2, 40, 100.0)


def test_a_tqdm_bar_with_a_total_gives_each_update_and_its_postfix() -> None:
    reports = read(recorded("tqdm_total.log"))
    assert [r.step for r in reports[:41]] == list(range(41))
    assert {r.total for r in reports} == {40}
    assert {r.epoch for r in reports} == {None}
    assert dict(reports[7].metrics) == {"loss": 0.993, "lr": 0.1}
    assert reports[0].metrics == ()  # `0/40 [00:00<?, ?it/s]`: no rate, no postfix yet
    assert reports[0].rate is None and reports[1].rate is not None and reports[1].rate > 1
    assert tracked(reports).progress() == tracked(reports).progress()
    progress = tracked(reports).progress()
    assert progress is not None and progress.percent == 100.0 and progress.eta_seconds == 0.0


def test_a_tqdm_count_without_a_total_gives_steps_but_no_percent_or_eta() -> None:
    reports = read(recorded("tqdm_count.log"))
    assert [r.step for r in reports[:26]] == list(range(26))
    assert {r.total for r in reports} == {None}
    assert dict(reports[-1].metrics) == {"loss": 0.04}
    tracker = tracked(reports)
    progress = tracker.progress()
    assert progress is not None
    assert (progress.step, progress.percent, progress.eta_seconds) == (25, None, None)
    assert progress.steps_per_second == 1.0  # one new step a second, as fed


def test_a_tqdm_bar_per_epoch_reads_the_epoch_from_its_description() -> None:
    reports = read(recorded("tqdm_epochs.log"))
    assert {(r.epoch, r.epochs, r.total) for r in reports} == {(e, 3, 12) for e in (1, 2, 3)}
    middle = next(r for r in reports if (r.epoch, r.step) == (2, 6))
    assert middle.done() == 0.5  # epoch 2 of 3, half of it
    tracker = Tracker("worker-0")
    news = [tracker.add(r, 1000.0 + i) for i, r in enumerate(reports)]
    # Each epoch's bar starts again at 0: a step forward (a new epoch), never a step back.
    assert sum(news) == 3 * 13
    assert tracker.last is not None and (tracker.last.epoch, tracker.last.step) == (3, 12)


def test_a_keras_fit_with_verbose_1_is_read_through_colours_backspaces_and_returns() -> None:
    text = recorded("keras_verbose1.log")
    assert "\x1b[" in text and "\b" in text and "\r" in text  # as Keras 3 writes it to a file
    reports = read(text)
    fit = [r for r in reports if r.epoch is not None]
    assert {(r.epoch, r.epochs, r.total) for r in fit} == {(e, 3, 8) for e in (1, 2, 3)}
    assert where(fit)[:2] == [(1, 1, 8), (1, 3, 8)]
    last = fit[-1]
    assert (last.epoch, last.step, dict(last.metrics)) == (3, 8, {"loss": 0.598, "mae": 0.6495})
    assert last.done() == 1.0 and last.rate is not None and 0 < last.rate < 1000
    # The evaluate that follows the fit has a bar of its own, with no epoch.
    assert where(reports[len(fit) :]) == [(None, 1, 4), (None, 4, 4)]
    tracker = tracked(reports)
    assert tracker.best is not None and (tracker.best.epoch, tracker.best.step) == (3, 8)


def test_a_keras_fit_with_verbose_2_gives_a_report_per_epoch() -> None:
    reports = read(recorded("keras_verbose2.log"))
    assert where(reports) == [(1, 8, 8), (2, 8, 8), (3, 8, 8), (None, 4, 4)]
    assert [r.done() for r in reports[:3]] == [1 / 3, 2 / 3, 1.0]
    assert dict(reports[0].metrics) == {"loss": 3.5467, "mae": 1.3969}


def test_a_keras_epoch_of_unknown_length_gives_steps_without_a_total() -> None:
    reports = read(recorded("keras_unknown.log"))
    first = [r for r in reports if r.epoch == 1]
    assert {r.total for r in first[:-1]} == {None} and where(first)[-1] == (1, 8, 8)
    assert [r.step for r in first] == sorted(r.step for r in first)
    progress = tracked(first).progress()
    assert progress is not None and progress.percent == pytest.approx(100 / 3)
    assert first[0].done() is None and first[0].left() is None
    assert {r.total for r in reports if r.epoch in (2, 3)} == {8}


def test_torchrun_tee_reads_local_rank_0_only_through_its_prefix() -> None:
    reports = read(recorded("torchrun_tee.log"))
    bar = [r for r in reports if r.form == "tqdm"]
    lines = [r for r in reports if r.form == "json"]
    assert [r.step for r in bar] == [*range(21), 20]
    assert [(r.step, dict(r.metrics)["loss"]) for r in lines] == [
        (5, 0.8857), (10, 0.4996), (15, 0.2724), (20, 0.1388),
    ]  # fmt: skip
    assert all(dict(r.metrics)["rank"] == 0 for r in lines)  # rank 1's lines are not read


def test_torchrun_tee_joining_a_bar_and_the_next_prefixed_line_loses_neither() -> None:
    text = recorded("torchrun_tee_joined.log")
    assert '][default0]:{"step": 5' in text
    reports = read(text)
    assert [r.step for r in reports if r.form == "json"] == [5, 10, 15, 20]
    assert 10 in [r.step for r in reports if r.form == "tqdm"]


@given(cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=12))
def test_a_log_cut_anywhere_gives_the_same_reports(cuts: list[int]) -> None:
    text = recorded("keras_verbose1.log") + recorded("torchrun_tee_joined.log")
    reader, found, start = LogReader(), [], 0
    for cut in sorted(cuts):
        found += reader.feed(text[start:cut])
        start = max(start, cut)
    found += reader.feed(text[start:]) + reader.close()
    assert found == read(text)


# The forms, line by line.


@pytest.mark.parametrize(
    ("line", "step", "total", "metrics"),
    [
        ('{"step": 120, "total": 1000, "loss": 0.31}', 120, 1000, {"loss": 0.31}),
        ('{"step": 3, "acc": 1, "ok": true, "tag": "x", "nested": {"a": 1}}', 3, None, {"acc": 1}),
        ('{"loss": NaN, "step": 7, "total": 0}', 7, None, {"loss": None}),
        ("12%|█▏   | 120/1000 [00:10<01:15, 11.6it/s, loss=0.31]", 120, 1000, {"loss": 0.31}),
        ("train: 120it [00:10, 11.6it/s, loss=0.31, note=warm]", 120, None, {"loss": 0.31}),
        ("120/1000 ━━━━━━━━━━━━━━━━━━━━ 2s 2ms/step - loss: 0.3100", 120, 1000, {"loss": 0.31}),
        ("120/1000 [==>...........] - ETA: 2s - loss: 0.3100", 120, 1000, {"loss": 0.31}),
        ("      120/Unknown 3s 20ms/step - loss: 0.3100", 120, None, {"loss": 0.31}),
        ("[default0]:\x1b[1m120/1000\x1b[0m 2s 2ms/step - loss: 0.31", 120, 1000, {"loss": 0.31}),
        ('[default0]:{"step": 4, "note": "[gpu1]: ok"}', 4, None, {}),
    ],
)
def test_each_form_gives_its_step_total_and_metrics(
    line: str, step: int, total: int | None, metrics: dict[str, float | None]
) -> None:
    (report,) = read(line + "\n")
    assert (report.step, report.total, dict(report.metrics)) == (step, total, metrics)


def test_a_bar_gives_the_rate_it_says() -> None:
    (tqdm,) = read("50%|█████     | 5/10 [00:10<00:10, 2.00s/it]\n")
    (keras,) = read("120/1000 ━━━━━━━━━━━━━━━━━━━━ 2s 2ms/step - loss: 0.3100\n")
    assert (tqdm.rate, keras.rate) == (0.5, 500.0)


@pytest.mark.parametrize(
    "line",
    [
        '{"step": "120", "total": 1000}',
        '{"step": 120.0}',
        '{"step": true}',
        '{"step": -1}',
        '[{"step": 1}]',
        '{"step": 1',
        "Epoch 3/10",  # sets the epoch of the Keras bars that follow; no step of its own
        "3/4 of the shards loaded",
        "loaded 120/1000 files",
        "50%|█████     | 5/10",
        "x" * 5000 + '{"step": 1}',
        "[default1]:" + '{"step": 1}',
        '[default1]:50%|█████     | 5/10 [00:10<00:10, 2.00s/it][default2]:{"step": 1}',
    ],
)
def test_a_line_that_only_looks_like_progress_gives_none(line: str) -> None:
    assert read(line + "\n") == []


def test_an_unended_line_too_long_to_hold_is_dropped_and_the_next_one_read() -> None:
    reader = LogReader()
    assert reader.feed("x" * (MOST_PENDING + 1)) == []
    assert reader.feed('{"step": 1}\n{"step": 2}\n') == [Report(step=2, form="json")]


def test_an_unended_line_is_read_at_the_end_of_the_log_only() -> None:
    reader = LogReader()
    assert reader.feed('{"step": 1}\n{"step": 2}') == [Report(step=1, form="json")]
    assert reader.close() == [Report(step=2, form="json")]


def test_keras_bars_take_the_epoch_of_the_line_before_until_the_fit_ends() -> None:
    text = (
        "Epoch 2/2\n1/4 ━━━━━━━━━━━━━━━━━━━━ 0s 2ms/step - loss: 0.5\n"
        "4/4 ━━━━━━━━━━━━━━━━━━━━ 0s 2ms/step - loss: 0.4\n"
        "2/4 ━━━━━━━━━━━━━━━━━━━━ 0s 2ms/step - loss: 0.3\n"
    )
    assert where(read(text)) == [(2, 1, 4), (2, 4, 4), (None, 2, 4)]


# A template's own pattern.

PATTERN = r"it (?P<step>\d+) of (?P<total>\d+) epoch (?P<epoch>\d+)/(?P<epochs>\d+) loss=(?P<loss>\S+) acc=(?P<acc>\S+)"


def test_a_pattern_reads_its_named_groups_and_nothing_else() -> None:
    text = (
        "it 5 of 10 epoch 2/3 loss=0.25 acc=nan\n"
        '{"step": 99}\n'  # with a pattern, the other forms are not read
        "it x of 10 epoch 2/3 loss=0.2 acc=1\n"  # a step that is not a number: no report
        "it 6 of ten epoch 2/3 loss=0.2 acc=1\n"
        "it 7 of 10 epoch 2/3 loss=fast acc=0.5\n"
    )
    reports = read(text, PATTERN)
    assert where(reports) == [(2, 5, 10), (2, 7, 10)]
    assert reports[0].metrics == (("loss", 0.25), ("acc", None))
    assert reports[1].metrics == (("acc", 0.5),)  # a metric that is not a number is left out
    assert reports[0].epochs == 3 and reports[0].done() == 0.5


@pytest.mark.parametrize(
    ("pattern", "wrong"),
    [
        ("step (\\d+", "must be a regular expression, not 'step (\\\\d+': missing ), unterminated subpattern at position 5"),
        ("step (\\d+)", "must have a named group 'step', as in (?P<step>\\d+), not 'step (\\\\d+)'"),
    ],
)  # fmt: skip
def test_a_bad_pattern_is_said_in_words(pattern: str, wrong: str) -> None:
    assert check_pattern(pattern) == wrong


# The tracker: one attempt's progress.


def test_progress_never_goes_back_and_the_same_step_is_the_latest_word() -> None:
    tracker = Tracker("worker-0")
    assert tracker.add(Report(step=10, total=100), 1.0)
    assert not tracker.add(Report(step=5, total=100), 2.0)  # behind: moves nothing
    assert not tracker.add(Report(step=10, total=100, metrics=(("loss", 0.5),)), 3.0)
    assert tracker.last == Report(step=10, total=100, metrics=(("loss", 0.5),))
    assert tracker.updated == 1.0  # no new step since
    assert tracker.add(Report(step=11, total=100), 4.0) and tracker.updated == 4.0


def test_a_count_that_reached_its_total_may_be_followed_by_one_of_its_form_afresh() -> None:
    tracker = Tracker("worker-0")
    data = Report(step=500, total=500, form="tqdm")  # a data set's bar, before the training's
    assert tracker.add(data, 1.0)
    assert tracker.add(Report(step=3, total=100, form="tqdm"), 2.0)
    assert not tracker.add(Report(step=2, total=100, form="tqdm"), 3.0)  # not finished: behind
    # A finished count of another form is not followed afresh (torchrun's tee out of order).
    assert tracker.add(Report(step=100, total=100, form="json"), 4.0)
    assert not tracker.add(Report(step=50, total=100, form="tqdm"), 5.0)
    assert tracker.best == data  # the furthest, whatever came afresh after it


@given(steps=st.lists(st.integers(min_value=0, max_value=50), max_size=30))
def test_without_totals_the_step_shown_is_the_furthest_seen(steps: list[int]) -> None:
    tracker = Tracker("worker-0")
    for i, step in enumerate(steps):
        tracker.add(Report(step=step, form="json"), float(i))
    assert (tracker.last.step if tracker.last else None) == (max(steps) if steps else None)


def test_the_rate_is_measured_over_the_last_steps_and_gives_the_eta() -> None:
    tracker = Tracker("worker-0")
    tracker.add(Report(step=4, total=1000, rate=99.0), 100.0)
    progress = tracker.progress()
    assert progress is not None and progress.steps_per_second == 99.0  # one report: the bar's
    tracker.add(Report(step=120, total=1000, metrics=(("loss", 0.31),)), 110.0)
    progress = tracker.progress()
    assert progress is not None
    assert progress.steps_per_second == pytest.approx(11.6)
    assert progress.eta_seconds == pytest.approx(880 / 11.6)
    assert progress.percent == 12.0


def test_the_status_line_is_as_the_issue_shows_it() -> None:
    tracker = Tracker("worker-0")
    tracker.add(Report(step=4, total=1000), 100.0)
    tracker.add(Report(step=120, total=1000, metrics=(("loss", 0.31),)), 110.0)
    progress = tracker.progress()
    assert progress is not None
    assert progress_line(progress, 113.0) == (
        "progress  step 120/1000 (12%)  loss 0.31  11.6 steps/s  ETA 1m15s  worker-0, 3s ago"
    )


def test_the_status_line_shows_epochs_the_first_metrics_trend_and_what_is_unknown() -> None:
    tracker = Tracker("chief-0")
    for i, loss in enumerate([0.9, 0.7, None, 0.4, 0.1]):
        tracker.add(Report(step=i + 1, epoch=3, epochs=10, metrics=(("loss", loss),)), 50.0)
    progress = tracker.progress()
    assert progress is not None
    line = progress_line(progress, 170.0, tracker.trend)
    assert line == "progress  epoch 3/10 step 5  loss 0.1 █▆▃▁  chief-0, 2m ago"


def test_the_json_object_has_every_field_and_null_for_what_is_unknown() -> None:
    updated = 1795936500.0  # 2026-11-29T07:15:00Z
    progress = Progress(
        task="worker-0", step=120, total=1000, percent=12.0, updated=updated,
        metrics={"loss": 0.31, "grad": None}, steps_per_second=11.6, eta_seconds=75.86,
    )  # fmt: skip
    data = progress_json(progress)
    assert data == {
        "task": "worker-0", "step": 120, "total": 1000, "epoch": None, "epochs": None,
        "percent": 12.0, "metrics": {"loss": 0.31, "grad": None}, "stepsPerSecond": 11.6,
        "etaSeconds": 76, "updated": "2026-11-29T07:15:00Z",
    }  # fmt: skip
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN
    assert progress_json(None) is None


def test_the_note_of_a_finished_run_reads_back_as_its_progress_without_an_eta() -> None:
    progress = Progress(
        task="worker-0", step=40, total=40, epoch=2, epochs=2, percent=100.0,
        metrics={"loss": None, "lr": 0.5}, steps_per_second=2.5, eta_seconds=0, updated=1795936500.0,
    )  # fmt: skip
    note = progress_note(progress)
    assert "etaSeconds" not in note and "\n" not in note
    assert read_note(note) == Progress(**{**progress.__dict__, "eta_seconds": None})


@pytest.mark.parametrize(
    "note",
    [
        "",
        "not json",
        "[]",
        '{"task": "worker-0", "step": 1}',  # no metrics
        '{"task": "", "step": 1, "metrics": {}}',
        '{"task": "worker-0", "step": 1.5, "metrics": {}}',
        '{"task": "worker-0", "step": 1, "total": "9", "metrics": {}}',
        '{"task": "worker-0", "step": 1, "metrics": {"loss": NaN}}',
        '{"task": "worker-0", "step": 1, "metrics": {"loss": "low"}}',
        '{"task": "worker-0", "step": 1, "metrics": {}, "updated": "yesterday"}',
        '{"task": "worker-0", "step": 1, "metrics": {}, "updated": 5}',
        '{"task": "worker-0", "step": 1, "metrics": {}, "pad": "' + "x" * 5000 + '"}',
    ],
)
def test_a_note_that_cannot_be_right_is_no_progress(note: str) -> None:
    assert read_note(note) is None


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(0, "0s"), (3.9, "3s"), (59, "59s"), (60, "1m"), (75.86, "1m15s"), (120, "2m"),
     (3600, "1h"), (12000, "3h20m"), (86400 + 3 * 3600 + 5, "1d3h"), (-5, "0s")],
)  # fmt: skip
def test_a_span_is_said_in_short_words(seconds: float, words: str) -> None:
    assert span(seconds) == words


def test_a_sparkline_needs_two_finite_values() -> None:
    assert sparkline([0.5]) == sparkline([]) == ""
    assert sparkline([1.0, None, 0.0, math.nan]) == "█▁"
    assert sparkline([2.0, 2.0]) == "▄▄"


@pytest.mark.parametrize(
    ("name", "tasks", "task"),
    [
        ("tensorflow", ["ps-0", "worker-0", "worker-1", "chief-0", "evaluator-0"], "chief-0"),
        ("tensorflow", ["ps-0", "worker-1", "worker-0"], "worker-0"),
        ("pytorch", ["worker-2", "worker-0", "worker-1"], "worker-0"),
        ("jax", ["worker-0", "worker-1"], "worker-0"),
    ],
)
def test_rank_0_reports_the_chief_where_the_run_has_one_else_worker_0(
    name: str, tasks: list[str], task: str
) -> None:
    assert reporting_task(framework(name), tasks) == task


def test_times_are_kept_as_given_and_said_in_utc() -> None:
    when = time.mktime((2026, 11, 29, 10, 41, 7, 0, 0, -1))  # local time
    data = progress_json(Progress(task="w", step=1, updated=when))
    assert data is not None
    assert data["updated"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def test_the_progress_options_are_noted_on_the_deciding_job_alone() -> None:
    from simpletfjob.kube.resources import JOBS
    from simpletfjob.runs.annotations import add_limits
    from simpletfjob.runs.objects import Manifest
    from tests.support.scenes import task_job

    def wanted() -> list[Manifest]:
        jobs = [task_job("ps", 0), task_job("worker", 0), task_job("worker", 1)]
        return [Manifest(JOBS, j, f"document {i}") for i, j in enumerate(jobs, 1)]

    marks = (("simpletfjob/progress-task", "worker-1"), ("simpletfjob/stall-timeout", "120"))
    documents = wanted()
    add_limits(documents, deadline=None, cleanup_after=None, restarts=(2, 3, 1), marks=marks)
    notes = {m.name: m.body["metadata"].get("annotations", {}) for m in documents}
    assert notes["mnist-worker-0"]["simpletfjob/progress-task"] == "worker-1"
    assert notes["mnist-worker-0"]["simpletfjob/stall-timeout"] == "120"
    assert "simpletfjob/progress-task" not in notes["mnist-ps-0"]
    assert "simpletfjob/progress-task" not in notes["mnist-worker-1"]
    for one in notes.values():  # the restarts, on every Job
        assert (one["simpletfjob/restarts"], one["simpletfjob/max-restarts"]) == ("2", "3")
        assert one["simpletfjob/restarts-without-progress"] == "1"
    with pytest.raises(UsageError) as raised:
        add_limits(
            wanted(), deadline=None, cleanup_after=None, marks=((*marks[0][:1], "worker-9"),)
        )
    assert str(raised.value) == (
        "--progress-task names 'worker-9', which the run does not have; its tasks are ps-0, "
        "worker-0, worker-1"
    )


def test_off_a_terminal_the_status_line_says_the_progress_when_its_step_changed_once_a_minute(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from simpletfjob.cli.report import StatusLine
    from simpletfjob.runs.state import run_state
    from tests.support.scenes import task_job

    run = run_state("mnist", "ml", [task_job("worker", 0, active=1)], [])
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    line = StatusLine("mnist")
    line.on = False
    for step, at in ((1, 0), (2, 10), (2, 70), (2, 140), (3, 150), (4, 200)):
        clock[0] = 1000.0 + at
        line(replace(run, progress=Progress(task="worker-0", step=step, total=10)))
    said = [x for x in capsys.readouterr().err.splitlines() if x.startswith("progress")]
    # the first; a change once a minute has passed since the last said (not at 10 s nor 200 s),
    # and never the same step again (140 s)
    assert [x.split("  ")[1] for x in said] == ["step 1/10", "step 2/10", "step 3/10"]
    line.on = True  # on a terminal: on the status line
    line.run = replace(run, progress=Progress(task="worker-0", step=4, total=10, percent=40.0))
    assert "; step 4/10 (40%); " in line.text()


def test_the_reporting_setting_is_read_from_the_deciding_job() -> None:
    from simpletfjob.runs.reporting import setting_of
    from tests.support.scenes import task_job

    jobs = [task_job("ps", 0), task_job("worker", 0), task_job("worker", 1)]
    for i, one in enumerate(jobs):
        one["metadata"]["uid"] = f"uid-{i}"
    jobs[1]["metadata"]["annotations"] = {
        "simpletfjob/progress-task": "worker-1",
        "simpletfjob/progress-pattern": r"it (?P<step>\d+)",
        "simpletfjob/stall-timeout": "120",
    }
    setting = setting_of(jobs)
    assert setting is not None
    assert (setting.task, setting.uid, setting.deciding, setting.stall) == (
        "worker-1", "uid-2", "mnist-worker-0", 120.0,
    )  # fmt: skip
    assert setting.pattern is not None and setting.pattern.pattern == r"it (?P<step>\d+)"
    # Read as what they can be: a pattern without a step, a stall that is no duration: none.
    jobs[1]["metadata"]["annotations"].update(
        {"simpletfjob/progress-pattern": "(x", "simpletfjob/stall-timeout": "-1"}
    )
    setting = setting_of(jobs, chosen="worker-0")  # run's own option wins
    assert setting is not None
    assert (setting.task, setting.pattern, setting.stall) == ("worker-0", None, None)
    jobs[1]["metadata"]["annotations"]["simpletfjob/progress-task"] = "worker-9"
    assert setting_of(jobs) is None  # no such task: no progress


def test_a_kubelet_timestamp_is_split_off_a_log_line() -> None:
    from simpletfjob.kube.podlog import stamped

    when, rest = stamped(b'2026-11-29T07:15:00.500000000Z {"step": 1}')
    assert (when, rest) == (1795936500.5, b'{"step": 1}')
    assert stamped(b"no stamp") == (None, b"no stamp")
