"""streams.say, streams.shown and the logs' Printer: what reaches a terminal, a pipe or a file.

On a terminal, control characters (tabs aside) are shown as `cat -v` shows them, in task
output and in server text alike; through a pipe or into a file, log lines are the task's
bytes, and stderr lines keep Python's escapes. Every line on stderr is written whole, from
any thread. The same on a real pty, end to end: tests/control_plane/test_terminal.py.
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import simpletfjob
from simpletfjob.runs.logs import Printer
from simpletfjob.runs.logsources import Source
from simpletfjob.streams import cat_v, say, shown, visible_lines

SOURCE = Path(simpletfjob.__file__).parent


@pytest.mark.parametrize(
    ("text", "terminal", "expected"),
    [
        ("plain text, é and ✓", True, "plain text, é and ✓"),
        ("a\tb", True, "a\tb"),
        ("a\tb", False, "a\tb"),
        ("\r\x1b[2K\x1b[1Gworker-0 Succeeded", True, "^M^[[2K^[[1Gworker-0 Succeeded"),
        ("\r\x1b[2K\x1b[1Gworker-0 Succeeded", False, "\\r\\x1b[2K\\x1b[1Gworker-0 Succeeded"),
        ("two\nlines\x7f", True, "two^Jlines^?"),
        ("two\nlines\x7f", False, "two\\nlines\\x7f"),
        ("csi \x9b2J, rtl \u202eabc", True, "csi M-BM-^[2J, rtl M-bM-^@M-.abc"),
        ("csi \x9b2J, rtl \u202eabc", False, "csi \\x9b2J, rtl \\u202eabc"),
        ("byte \udcff", True, "byte M-^?"),
        ("byte \udcff", False, "byte \\udcff"),
    ],
)
def test_shown_is_cat_v_on_a_terminal_and_python_escapes_elsewhere(
    text: str, terminal: bool, expected: str
) -> None:
    assert shown(text, terminal) == expected


def test_each_byte_is_shown_as_cat_v_shows_it() -> None:
    every = bytes(b for b in range(256) if b != 0x0A)
    by_cat = subprocess.run(["cat", "-v"], input=every, capture_output=True, check=True).stdout
    assert "".join(cat_v(b) for b in every).encode() == by_cat
    # a byte alone on its line: an undecodable one is a byte, as cat -v shows it
    lines = b"".join(bytes([b]) + b"\n" for b in every)
    by_cat = subprocess.run(["cat", "-v"], input=lines, capture_output=True, check=True).stdout
    assert visible_lines(lines) == by_cat


@given(st.binary(max_size=200))
def test_visible_lines_leave_nothing_that_acts_on_a_terminal(data: bytes) -> None:
    lines = data.replace(b"\n", b"") + b"\n"
    out = visible_lines(lines)
    assert out.endswith(b"\n") and out.count(b"\n") == 1
    text = out.decode()  # what is left is UTF-8 text
    assert not [c for c in text if c not in "\t\n" and shown(c, True) != c]


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp"))))
def test_printable_text_and_tabs_pass_unchanged(text: str) -> None:
    line = (text + "\tend\n").encode()
    assert visible_lines(line) == line


def source(label: str) -> Source:
    return Source(label, f"pod-{label}", "tf", label, 0)


def test_a_printer_for_a_pipe_writes_the_tasks_bytes_and_one_prefix_a_line() -> None:
    written: list[bytes] = []
    printer = Printer(written.append, prefix=True, color=False)
    printer.know(["worker-0", "worker-1"])
    # bytes.splitlines, as the streams are split, also cuts at a lone carriage return
    lines = b"a\r\x1b[2K\x1b[1Gworker-0 | SPOOFED\n\x1b[Aup\n".splitlines(keepends=True)
    assert len(lines) == 3
    printer.write(printer.render(source("worker-1"), lines))
    assert written == [b"worker-1 | a\r\x1b[2K\x1b[1Gworker-0 | SPOOFED\nworker-1 | \x1b[Aup\n"]


def test_a_printer_for_a_terminal_shows_control_characters_and_colours_only_its_prefix() -> None:
    printer = Printer(lambda _: None, prefix=True, color=True, visible=True)
    lines = b"a\r\x1b[2K\x1b[1Gworker-0 | SPOOFED\n\x1b[31mred\x1b[0m\ttab\n"
    out = printer.render(source("worker-1"), lines.splitlines(keepends=True))
    assert out == (
        b"\x1b[36mworker-1 |\x1b[0m a^M^[[2K^[[1Gworker-0 | SPOOFED\n"
        b"\x1b[36mworker-1 |\x1b[0m ^[[31mred^[[0m\ttab\n"
    )
    unprefixed = Printer(lambda _: None, prefix=False, color=False, visible=True)
    assert unprefixed.render(source("worker-1"), [b"\x1b[A\n"]) == b"^[[A\n"


class Slow(io.StringIO):
    """A stream that takes its text a character at a time, letting other threads run meanwhile."""

    def __init__(self, terminal: bool = False) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal

    def write(self, text: str) -> int:
        for char in text:
            super().write(char)
            time.sleep(0)
        return len(text)


def test_say_writes_each_line_whole_whatever_the_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = Slow()
    monkeypatch.setattr(sys, "stderr", stream)

    def report(n: int) -> None:
        for i in range(40):
            say(f"thread {n} line {i} " + "x" * 50)

    threads = [threading.Thread(target=report, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 240
    assert all(line.startswith("thread ") and line.endswith(" " + "x" * 50) for line in lines)


def test_say_shows_control_characters_as_cat_v_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for terminal, expected in ((True, "ps-0: ^[[2J\tok^M\n"), (False, "ps-0: \\x1b[2J\tok\\r\n")):
        stream = Slow(terminal)
        monkeypatch.setattr(sys, "stderr", stream)
        say("ps-0: \x1b[2J\tok\r")
        assert stream.getvalue() == expected
    monkeypatch.setattr(sys, "stderr", None)
    say("dropped")  # a stderr closed at start, in-process: nothing to write to


def test_the_commands_write_to_stderr_only_through_say() -> None:
    """No print(..., file=sys.stderr) and no sys.stderr.write outside streams.py: one writer."""
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path.name == "streams.py" and path.parent == SOURCE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            text = ast.unparse(node)
            to_stderr = any(
                k.arg == "file" and ast.unparse(k.value) == "sys.stderr" for k in node.keywords
            )
            if to_stderr or text.startswith("sys.stderr.write("):
                found.append(f"{path.relative_to(SOURCE)}:{node.lineno}: {text}")
    assert found == []


def test_say_escapes_as_each_stream_is_a_terminal_or_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = Slow(terminal=True)
    monkeypatch.setattr(sys, "stderr", stream)
    for i in range(50):
        say(f"job.batch/w-{i} created \x1b")
    assert stream.getvalue().splitlines()[0] == "job.batch/w-0 created ^["
    other = Slow(terminal=False)
    monkeypatch.setattr(sys, "stderr", other)
    say("x \x1b")
    assert other.getvalue() == "x \\x1b\n"
