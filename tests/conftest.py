"""Shared helpers: run the CLI in-process as a user would, read its YAML back, judge refusals.

Tests live in five trees, by what they run against: `unit/` (functions and the command
line in-process, no server), `acceptance/` (the example directories, and the rows of
tests/error_table.py that run in-process), `loopback/` (the loopback API server),
`control_plane/` (the real control plane, and tests run on both servers; its conftest
starts the plane) and `process/` (the installed console script, or the fork server, as a
process). Hypothesis runs its `fast` profile unless HYPOTHESIS_PROFILE names
another (`thorough` tries many more examples).

The suite runs on pytest-xdist workers (`-n auto --dist loadgroup` in pyproject.toml's
addopts): `pytest_xdist_auto_num_workers` below chooses how many, the tests of a module that
share a module-scoped fixture run on one worker, and tests/support/parallel.py hands each
worker ports and node addresses of its own. The run ends with one line that counts the
skipped tests by reason, instead of a line per test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, settings

from simpletfjob.cli import main
from tests.support.cluster import LoopbackCluster, loopback_cluster
from tests.support.kubeapi import KubeAPI, serve, write_kubeconfig
from tests.support.templates import PLACED as JOB

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# Property tests set what they test; how many examples they try is the profile's choice.
settings.register_profile(
    "fast",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


# -- running on several workers (pytest-xdist) --------------------------------------------------

# Workers for a whole run, measured on 2 cores: about a third of a serial run's time is
# spent waiting (on the control plane, the kubelet stand-in, processes), so one worker
# more than the cores keeps them busy; a fourth gained nothing and loaded the machine more.
WORKERS = 3


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Without pytest-xdist (`-p no:xdist`, or not installed), take pyproject's `-n` and
    `--dist` all the same, and run every test in this process."""
    if pluginmanager.has_plugin("xdist"):
        return
    group = parser.getgroup("xdist", "distributed testing (pytest-xdist is not loaded)")
    # _addoption: "-n" is a lowercase short option, which pytest keeps for plugins that ask
    group._addoption("-n", "--numprocesses", dest="numprocesses", default=None,
                     help="ignored: pytest-xdist is not loaded, every test runs in this process")  # fmt: skip
    group.addoption("--dist", dest="dist", default="no", help="ignored: pytest-xdist is not loaded")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: WORKERS for a run of directories or several files; none (every test in
    this process, which starts faster) for the tests of one file.
    PYTEST_XDIST_AUTO_NUM_WORKERS still says how many, as pytest-xdist has it."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").isdigit():
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    paths = {Path(str(arg).split("::")[0]) for arg in config.args}
    if len(paths) == 1 and all(path.is_file() for path in paths):
        return 0
    return WORKERS


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`, with a group for each module that shares a module-scoped fixture
    (tests/support/scheduling.py says why pytest-xdist's own cannot make them)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.support.scheduling import ModuleGroupScheduling

    return ModuleGroupScheduling(config, log)


@pytest.hookimpl(trylast=True)  # after tests/control_plane/conftest.py puts its tests last
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` first, in their order: on several workers the run then ends with
    short tests, not with one worker still busy with a long one while the others wait."""
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        items[:] = slow + [item for item in items if item.get_closest_marker("slow") is None]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One line for the skipped tests: how many, and each reason with its count, most first.

    It stands for pytest's line per skipped test (`-rs` still gives those, with where each
    test is): without $KUBEBUILDER_ASSETS every test of the control plane is skipped, and the
    reason is the same for each of them.
    """
    reasons = Counter(skip_reason(report) for report in terminalreporter.stats.get("skipped", []))
    if not reasons:
        return
    total = sum(reasons.values())
    parts = [f"{count} {reason}" for reason, count in reasons.most_common()]
    terminalreporter.write_line(f"{total} skipped: " + "; ".join(parts))


def skip_reason(report: Any) -> str:
    """Why a test was skipped, as pytest -rs prints it, without the 'Skipped: ' prefix."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


# The optional extras of pyproject.toml and the modules each brings, for `needs_extra`.
EXTRAS = {"validate": ("kubernetes_validate", "jsonschema", "referencing")}


def missing_extra(name: str) -> str | None:
    """Why a test that needs the optional extra NAME cannot run here, naming it; None: it can."""
    import importlib.util

    missing = [module for module in EXTRAS[name] if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return f"needs the [{name}] extra (pip install -e '.[{name}]'; {', '.join(missing)} missing)"


def needs_extra(name: str) -> pytest.MarkDecorator:
    """Skip a test that needs the optional extra NAME where it is not installed, saying which.

    The `test` extra installs them all; a venv with only the project and pytest runs the rest.
    """
    reason = missing_extra(name)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


# PyYAML's safe loader on libyaml's parser where PyYAML has it: the documents
# yaml.safe_load_all reads, many times faster for the tests that read whole runs back.
YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_all(text: str | bytes) -> list[Any]:
    """Every document of a YAML stream, as yaml.safe_load_all reads them."""
    return list(yaml.load_all(text, Loader=YAML_LOADER))


def bundle_files(path: Path) -> dict[str, str]:
    """A `diagnose` bundle's files in their order, by their path in it, as text."""
    import tarfile

    with tarfile.open(path, "r:gz") as tar:
        return {
            m.name: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
            for m in tar.getmembers()
        }


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def docs(self) -> list[Any]:
        return load_all(self.out)


def tf_config_of(doc: dict[str, Any]) -> dict[str, Any]:
    """The TF_CONFIG env value of a Job document, read back with json.loads."""
    for container in doc["spec"]["template"]["spec"]["containers"]:
        for env in container.get("env", []):
            if env["name"] == "TF_CONFIG":
                assert isinstance(env["value"], str)
                return json.loads(env["value"])  # type: ignore[no-any-return]
    raise AssertionError("no TF_CONFIG env in document")


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """cli(*args, cwd=None) -> Result; runs simpletfjob's main() exactly as the console script does."""

    def run(*args: str, cwd: Path | None = None) -> Result:
        old = os.getcwd()
        if cwd is not None:
            os.chdir(cwd)
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        finally:
            os.chdir(old)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def assert_one_line_error(
    result: Any, code: int = 1, pattern: str = "", *, contains: Sequence[str] = ()
) -> str:
    """The one standard for a refusal; returns the error line.

    `result` is a run in-process (`cli`) or a process (`code`, `out` as str or bytes,
    `err`): the exit code, nothing on stdout, exactly one line on stderr that starts
    `simpletfjob: error:`, no traceback and no internal error; the line matches the
    regex `pattern` and holds each of `contains`.
    """
    assert result.code == code, (result.code, result.err)
    assert not result.out, result.out
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    line = str(lines[0])
    assert line.startswith("simpletfjob: error: "), line
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err
    assert re.search(pattern, line), line
    for fragment in contains:
        assert fragment in line, line
    return line


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` (its bytes) and every symlink (its target), by relative path."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = "-> " + os.readlink(path)
        elif path.is_file():
            found[name] = path.read_bytes()
    return found


def console_script() -> str:
    """The installed `simpletfjob` script beside this Python (a venv), else on PATH."""
    beside = Path(sys.executable).parent / "simpletfjob"
    found = str(beside) if beside.exists() else shutil.which("simpletfjob")
    if not found:
        pytest.fail("the simpletfjob console script is not installed; run pip install '.[test]'")
    return found


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


PLACEMENTS: dict[str, str] = {
    "folded-column-0": "              value: >\n<<TF_CONFIG>>",
    "literal-indented": "              value: |\n                <<TF_CONFIG>>",
    "inline-single-quoted": "              value: '<<TF_CONFIG>>'",
    "inline-unquoted": "              value: <<TF_CONFIG>>",
    "inline-double-quoted": '              value: "<<TF_CONFIG>>"',
    "next-line-plain": "              value:\n<<TF_CONFIG>>",
    "folded-strip-comment": "              value: >-  # the cluster\n<<TF_CONFIG>>",
}


def job_template(placement: str) -> str:
    return JOB.format(placement=placement)


def expected_config(role: str, index: int, cluster: dict[str, list[str]]) -> dict[str, Any]:
    return {"cluster": cluster, "task": {"type": role, "index": index}}


def hosts_arg(names: Sequence[str]) -> str:
    return ",".join(names)


# -- a loopback Kubernetes API server (tests/support/kubeapi) -------------------------------------


@pytest.fixture
def kube_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No kubeconfig or in-cluster settings from the developer's machine; returns the fake HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    return home


def open_cluster() -> KubeAPI:
    """The loopback API server where a kubeconfig without credentials may do anything.

    Such a request is the anonymous user, whom a real server refuses unless RBAC grants
    it: this grants it everything. Tests of credentials and RBAC add users, set
    `anonymous_auth = False` (a request without a token is then 401) and grant rights.
    """
    api = KubeAPI()
    api.grant("system:anonymous", "*", "*")
    return api


@pytest.fixture
def kubeapi(kube_env: Path) -> Iterator[KubeAPI]:
    """A plain-http API server on 127.0.0.1 (see open_cluster); set nodes, users, faults."""
    with serve(open_cluster()) as api:
        yield api


@pytest.fixture
def loopback() -> Iterator[LoopbackCluster]:
    """The loopback server with the admin and test users of the control plane, strict as it
    (tests/support/cluster.py); the `cluster` fixture of tests/control_plane is it and the real one."""
    with loopback_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def cluster_ca() -> Any:
    import trustme

    return trustme.CA()


@pytest.fixture
def kubeapi_tls(kube_env: Path, cluster_ca: Any, tmp_path: Path) -> Iterator[KubeAPI]:
    """The same server over https, with a certificate from a trustme CA written to api.ca_file."""
    with serve(open_cluster(), tls=cluster_ca) as api:
        api.ca_file = tmp_path / "ca.crt"
        cluster_ca.cert_pem.write_to_path(str(api.ca_file))
        yield api


@pytest.fixture
def kubeconfig(kubeapi: KubeAPI, tmp_path: Path) -> str:
    """A kubeconfig for the loopback server (`kubeapi`), in the namespace of scenes.load_run's runs."""
    from tests.support.scenes import NS

    return str(write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url, namespace=NS))
