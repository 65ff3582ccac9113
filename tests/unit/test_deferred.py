"""The client's package loaded in part by a connection, and whole for whoever asks it more.

Each case runs in a fresh Python: what is imported is the process's state.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ml}}]
current-context: x
"""

CONNECT = """\
from simpletfjob.kube import deferred
deferred.enable()  # as the command-line tool does
from simpletfjob.kube.connection import Settings, connect
conn = connect(Settings(kubeconfig=KUBECONFIG))
print("connected", conn.namespace)
"""

# What a user's own code does with the client, after simpletfjob or before it.
USER = """\
import kubernetes
from kubernetes import watch, dynamic
import kubernetes.client
assert kubernetes.client.CoreV1Api.__name__ == "CoreV1Api"
assert callable(kubernetes.config.load_kube_config)
assert watch.Watch.__name__ == "Watch" and dynamic.DynamicClient.__name__ == "DynamicClient"
assert kubernetes.__version__ and callable(kubernetes.utils.create_from_yaml)
assert kubernetes.stream.stream is not None
print("user ok")
"""

HEAVY = """\
heavy = ("kubernetes.dynamic", "kubernetes.watch", "kubernetes.stream", "kubernetes.informer",
         "kubernetes.leaderelection", "kubernetes.utils.create_from_yaml", "jsonschema")
print("loaded", sorted(m for m in heavy if m in sys.modules))
"""


def run(tmp_path: Path, code: str) -> list[str]:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    prelude = f"import sys\nKUBECONFIG = {str(config)!r}\n"
    proc = subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_a_connection_loads_only_the_parts_of_the_client_it_uses(tmp_path: Path) -> None:
    assert run(tmp_path, CONNECT + HEAVY) == ["connected ml", "loaded []"]


def test_a_users_own_process_imports_the_client_the_usual_way(tmp_path: Path) -> None:
    """In a notebook's threads, a deferred __init__ and an import of a part could wait for each
    other's lock: only the command-line tool defers."""
    code = CONNECT.replace("deferred.enable()", "pass") + HEAVY
    out = run(tmp_path, code)
    assert out[0] == "connected ml" and "kubernetes.dynamic" in out[1]


def test_the_users_code_finds_the_whole_client_after_a_connection(tmp_path: Path) -> None:
    out = run(tmp_path, CONNECT + USER + HEAVY)
    assert out[:2] == ["connected ml", "user ok"]
    loaded = ast.literal_eval(out[2].removeprefix("loaded "))
    # jsonschema comes with the [validate] extra only: the client's own parts are what count
    assert [m for m in loaded if m.startswith("kubernetes.")][:1] == ["kubernetes.dynamic"]


def test_a_client_the_user_imported_first_is_used_as_it_is(tmp_path: Path) -> None:
    code = (
        "import kubernetes\nwhole = kubernetes\n"
        + CONNECT
        + "assert sys.modules['kubernetes'] is whole and '__getattr__' not in vars(whole)\n"
        + USER
    )
    assert run(tmp_path, code) == ["connected ml", "user ok"]


@pytest.mark.parametrize("first", ["from kubernetes import watch", "import kubernetes.watch"])
def test_a_part_asked_by_name_after_a_connection_is_there(tmp_path: Path, first: str) -> None:
    code = CONNECT + first + "\nimport kubernetes\nprint(kubernetes.watch.Watch.__name__)\n"
    assert run(tmp_path, code) == ["connected ml", "Watch"]


def test_threads_that_ask_the_client_at_once_each_find_it_whole(tmp_path: Path) -> None:
    code = (
        CONNECT
        + "import threading, kubernetes\nfound = []\n"
        + "def ask():\n    found.append(kubernetes.dynamic.DynamicClient.__name__)\n"
        + "threads = [threading.Thread(target=ask) for _ in range(8)]\n"
        + "[t.start() for t in threads]; [t.join() for t in threads]\nprint(found)\n"
    )
    assert run(tmp_path, code) == ["connected ml", str(["DynamicClient"] * 8)]
