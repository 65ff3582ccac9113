"""A large output to a slow reader arrives whole: every byte, whatever signals come meanwhile.

The console script keeps a quarter-second tick (SIGALRM). A write to a pipe that waits for
its reader is cut short by it, and Python's buffered writer (3.11) then dropped the rest of
what it had been given: a render piped into a slow `kubectl apply` lost documents.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.conftest import EXAMPLES, console_script


def test_a_render_piped_to_a_slow_reader_arrives_whole(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"node-{i:04d}\n" for i in range(400)))
    args = [console_script(), str(EXAMPLES / "mnist.yaml"), "--nodes-file", str(hosts), "-N", "-1"]
    whole = tmp_path / "whole.yaml"
    subprocess.run([*args, "-o", str(whole)], check=True, capture_output=True)
    expected = whole.read_bytes()
    assert len(expected) > 2 << 20  # far more than a pipe holds
    for _ in range(3):
        with subprocess.Popen(
            [*args, "-o", "-"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        ) as proc:
            assert proc.stdout is not None
            got = []
            for _ in range(8):  # a reader that stops for a while, again and again
                time.sleep(0.3)
                got.append(proc.stdout.read1(256 << 10))
            got.append(proc.stdout.read())
        assert proc.returncode == 0
        assert b"".join(got) == expected
