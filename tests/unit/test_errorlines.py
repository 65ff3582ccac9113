"""A failed task's error found in its log (runs/bundle.py), on real failures recorded from
TensorFlow, JAX and torchrun (tests/support/tracebacks/README.md says how each was made)."""

from __future__ import annotations

from pathlib import Path

from simpletfjob.runs.classify import MOST, task_error

RECORDED = Path(__file__).resolve().parent.parent / "support" / "tracebacks"


def recorded(name: str) -> list[str]:
    return (RECORDED / name).read_text().splitlines(keepends=True)


def test_tensorflow_the_last_traceback_with_its_final_line() -> None:
    error = task_error(recorded("tf_fit.log"))
    assert error[0] == "Traceback (most recent call last):"
    assert error[-1].startswith("ValueError: Arguments `target` and `output` must have the same")
    assert not any("oneDNN" in line or "step 0" in line for line in error)


def test_jax_the_final_line_and_the_note_that_carries_on_its_message() -> None:
    error = task_error(recorded("jax_shape.log"))
    assert error[0] == "Traceback (most recent call last):"
    final = error.index(
        "TypeError: dot_general requires contracting dimensions to have the same shape, "
        "got (5,) and (3,)."
    )
    assert error[final + 1 :] == [
        "--------------------",
        "For simplicity, JAX has removed its internal frames from the traceback of the "
        "following exception. Set JAX_TRACEBACK_FILTERING=off to include these.",
    ]


def test_torchrun_a_child_that_cannot_open_its_file_not_the_box_nor_the_launcher() -> None:
    error = task_error(recorded("torchrun_no_file.log"))
    assert (
        error
        == [
            "/work/wt/diagnose/.venv/bin/python3: can't open file '/nope/train.py': "
            "[Errno 2] No such file or directory"
        ]
        * 2
    )
    # what the old output showed, the last lines, is the box alone
    assert "can't open file" not in "".join(recorded("torchrun_no_file.log")[-20:])


def test_torchrun_the_root_cause_rank_s_traceback_not_the_peer_that_lost_it() -> None:
    error = task_error(recorded("torchrun_raises.log"))
    assert error == [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/tmp/rec/torch_raises.py", line 12, in <module>',
        '[rank1]:     raise ValueError(f"bad batch at step 1 on rank {rank}: expected 32 '
        'samples, got 31")',
        "[rank1]: ValueError: bad batch at step 1 on rank 1: expected 32 samples, got 31",
    ]


def test_torchrun_with_no_rank_prefix_takes_the_last_child_traceback() -> None:
    lines = [line.split(": ", 1)[1] if line.startswith("[rank") else line for line in
             recorded("torchrun_raises.log")]  # fmt: skip
    error = task_error(lines)
    assert error[-1].startswith("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo")
    assert error[0] == "Traceback (most recent call last):"


def test_the_last_of_chained_tracebacks() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "KeyError: 'lr'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "train.py", line 5, in <module>',
        "RuntimeError: no learning rate",
    ]
    assert task_error(lines) == lines[-3:]


def test_a_long_traceback_keeps_its_head_and_its_end() -> None:
    frames = [f'  File "m{i}.py", line {i}, in f{i}' for i in range(100)]
    lines = ["Traceback (most recent call last):", *frames, "RecursionError: too deep"]
    error = task_error(lines)
    assert len(error) == MOST
    assert error[:2] == ["Traceback (most recent call last):", "  ..."]
    assert error[-1] == "RecursionError: too deep"


def test_without_a_traceback_the_last_lines_that_read_as_an_error() -> None:
    lines = ["step 1", "fatal: bad object HEAD", "step 2", "ERROR: disk full", "Killed", "bye"]
    assert task_error(lines) == ["fatal: bad object HEAD", "ERROR: disk full", "Killed"]
    assert task_error(["step 1", "step 2 loss 0.3"]) == []
    assert task_error([]) == []


def test_a_log_cut_inside_a_traceback_shows_what_there_is() -> None:
    lines = ["step 1", "Traceback (most recent call last):", '  File "x.py", line 1, in <module>']
    assert task_error(lines) == lines[1:]


def test_wait_and_run_show_the_error_above_the_last_lines_unless_those_hold_it() -> None:
    """runs/failure.py's `quoted`: what `wait` and `run` print of a failed task's log."""
    from simpletfjob.runs.failure import quoted

    log = [line.encode() for line in recorded("torchrun_no_file.log")]
    lines = quoted("worker-0", "worker-0: the last 20 lines of its log (...):", log, 20)
    head = lines.index("worker-0: the last 20 lines of its log (...):")
    assert lines[:head] == [
        "worker-0: its error:",
        *["worker-0 | /work/wt/diagnose/.venv/bin/python3: can't open file '/nope/train.py': "
          "[Errno 2] No such file or directory"] * 2,
    ]  # fmt: skip
    assert lines[head + 1 :] == [f"worker-0 | {x.decode().rstrip()}" for x in log[-20:]]
    # a traceback that the last lines show whole is quoted once
    tf = [line.encode() for line in recorded("tf_fit.log")]
    assert quoted("chief-0", "head", tf, 20)[0] == "head"
    assert quoted("chief-0", "head", tf, 3)[:2] == [
        "chief-0: its error:",
        "chief-0 | Traceback (most recent call last):",
    ]
