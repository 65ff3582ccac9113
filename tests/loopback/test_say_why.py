"""Say why, and what next: a stuck task's reason and message in status, logs and wait; what
logs -p says of a pod that is gone; the status line that wait keeps on a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import threading
import time
import tty
from typing import Any

from tests.conftest import assert_one_line_error, console_script
from tests.support.cluster import wait_for
from tests.support.kubeapi import KubeAPI
from tests.support.scenes import NS, finish_job, load_run, run_pod


def stuck_run(api: KubeAPI) -> None:
    """ps-0 unschedulable, worker-0 pulling an image that is not there, worker-1 running."""
    load_run(api)
    api.set_pod_status("mnist-ps-0-x", NS, "Pending")  # no node: PodScheduled False
    run_pod(api, "mnist-worker-0", "h1", "Pending", waiting="ImagePullBackOff")
    run_pod(api, "mnist-worker-1", "h2")


def test_status_shows_a_stuck_tasks_reason_and_message_under_the_table(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    stuck_run(kubeapi)
    result = cli("status", "mnist", "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err
    rows = {line.split()[0]: line for line in result.out.splitlines()[2:]}
    assert rows["worker-0"].endswith("ImagePullBackOff")  # the column keeps the word
    image = kubeapi.get("pods", "mnist-worker-0-x", NS)["spec"]["containers"][0]["image"]
    assert result.err.splitlines() == [
        "ps-0 Pending: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        f'worker-0 Pending: ImagePullBackOff: Back-off pulling image "{image}"',
    ]
    data = json.loads(cli("status", "mnist", "-o", "json", "--kubeconfig", kubeconfig).out)
    messages = {t["task"]: t["message"] for t in data["tasks"]}
    assert messages == {
        "ps-0": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "worker-0": f'Back-off pulling image "{image}"',
        "worker-1": None,
    }


def test_wait_timeout_says_why_a_task_is_stuck_and_what_to_run_next(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    stuck_run(kubeapi)
    result = cli("wait", "mnist", "--timeout", "1s", "--kubeconfig", kubeconfig)
    assert result.code == 3
    last = result.err.splitlines()[-1]
    assert re.fullmatch(
        r"simpletfjob: error: run 'mnist' did not end within 1s \(Running\); "
        r"ps-0 Pending: Unschedulable: 0/3 nodes are available: [^;]*; "
        r"worker-0 Pending: ImagePullBackOff: Back-off pulling image \"[^\"]+\"; "
        r"it is left as it is; "
        r"see: simpletfjob status mnist -n ml; simpletfjob logs mnist ps-0 -n ml",
        last,
    ), last


def test_logs_of_a_stuck_task_say_its_reason_and_message(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    stuck_run(kubeapi)
    result = cli("logs", "mnist", "worker-0", "--kubeconfig", kubeconfig)
    assert (result.code, result.out) == (0, "")
    assert re.fullmatch(
        r"worker-0: waiting to start: ImagePullBackOff: Back-off pulling image \"[^\"]+\"\n",
        result.err,
    ), result.err
    result = cli("logs", "mnist", "ps-0", "--kubeconfig", kubeconfig)
    assert result.err == (
        "ps-0: waiting to start: Unschedulable: 0/3 nodes are available: "
        "3 Insufficient nvidia.com/gpu.\n"
    )


def test_logs_previous_of_a_task_whose_pod_is_gone_says_so_and_exits_1(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi)
    run_pod(kubeapi, "mnist-worker-1", "h2", "Failed", exit_code=2)
    finish_job(kubeapi, "mnist-worker-1", ok=False)
    kubeapi.force_delete("mnist-worker-1-x", NS)  # the Job controller, at the backoff limit
    result = cli("logs", "mnist", "worker-1", "--previous", "--kubeconfig", kubeconfig)
    assert_one_line_error(
        result, 1, r"^simpletfjob: error: worker-1: its pod is gone; its logs went with it$"
    )
    # Without --previous, or beside a task that has a pod: a note, as before, and exit 0.
    both = cli("logs", "mnist", "worker-1", "ps-0", "--previous", "--kubeconfig", kubeconfig)
    assert both.code == 0, both.err
    assert "worker-1: its pod is gone; its logs went with it\n" in both.err
    # A task whose Job has not started a pod yet is still "no pod yet".
    kubeapi.force_delete("mnist-worker-0-x", NS)
    fresh = cli("logs", "mnist", "worker-0", "--previous", "--kubeconfig", kubeconfig)
    assert (fresh.code, fresh.out, fresh.err) == (0, "", "worker-0: no pod yet\n")


# -- the status line --------------------------------------------------------------------------

ERASE = b"\r\x1b[K"
STATUS = re.compile(rb"\r\x1b\[K(run mnist: [^\r\n]*?)(?=\r\x1b\[K)")


def wait_on(kubeapi: KubeAPI, kubeconfig: str, terminal: bool) -> tuple[int, bytes]:
    """`wait mnist` as a process, stderr on a pty (raw) or a pipe; the run played to its end
    once the process watches, after 2.5 s (the status line redraws every second meanwhile)."""
    main, secondary = pty.openpty()
    tty.setraw(secondary)
    process = subprocess.Popen(
        [console_script(), "wait", "mnist", "--kubeconfig", kubeconfig],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=secondary if terminal else subprocess.PIPE,
    )
    os.close(secondary)
    received: list[bytes] = []

    def read() -> None:
        if not terminal:
            assert process.stderr is not None
            received.append(process.stderr.read())
            return
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the terminal's last writer has gone
                return
            if not data:
                return
            received.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: kubeapi.requests_for("jobs", "watch") and kubeapi.requests_for("pods", "watch"),
            60,
            "wait to watch",
        )
        run_pod(kubeapi, "mnist-worker-0", "h1")
        time.sleep(2.5)
        finish_job(kubeapi, "mnist-worker-0")
        code = process.wait(timeout=60)
        reader.join(60)
    finally:
        os.close(main)
    return code, b"".join(received)


def test_wait_on_a_terminal_keeps_one_status_line_redrawn_in_place(
    kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi)
    code, shown = wait_on(kubeapi, kubeconfig, terminal=True)
    assert code == 0, shown
    drawn = [m.decode() for m in STATUS.findall(shown)]
    assert drawn, shown
    pattern = r"run mnist: (starting|(\d+ \w+)(, \d+ \w+)*; restarts \d+); \d+s"
    assert all(re.fullmatch(pattern, text) for text in drawn), drawn
    assert any("3 Pending" in text for text in drawn), drawn
    assert any("1 Running" in text for text in drawn), drawn
    # redrawn as the seconds pass, with nothing else to say meanwhile
    assert len({text.rsplit("; ", 1)[1] for text in drawn}) >= 2, drawn
    # Without the status lines, every line is whole; the last is the verdict, on a clean line.
    plain = STATUS.sub(b"", shown).replace(ERASE, b"")
    assert b"\x1b" not in plain and b"\r" not in plain
    lines = plain.decode().splitlines()
    assert lines[-1] == "run mnist succeeded: worker-0 Succeeded"
    assert "worker-0 Running on h1" in lines
    assert shown.endswith(ERASE + b"run mnist succeeded: worker-0 Succeeded\n") or shown.endswith(
        b"\nrun mnist succeeded: worker-0 Succeeded\n"
    )


def test_wait_through_a_pipe_writes_no_status_line(kubeapi: KubeAPI, kubeconfig: str) -> None:
    load_run(kubeapi)
    code, err = wait_on(kubeapi, kubeconfig, terminal=False)
    assert code == 0, err
    assert b"\x1b" not in err and b"\r" not in err and b"run mnist:" not in err
    assert err.decode().splitlines()[-1] == "run mnist succeeded: worker-0 Succeeded"
