"""Fixtures for tests against a real control plane (and the loopback server beside it).

The control plane starts once per test session, and only when a selected test needs it.
It starts in the background as soon as the tests are collected, and those tests run last,
so its few seconds of start-up overlap the rest of the suite. It stops at the end of the
session. Without $KUBEBUILDER_ASSETS (or without the binaries in it), every test that
needs it is skipped with the reason; `.ci/run` sets the variable from
../shared/kube/unpack.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import ADMIN, Cluster, loopback_cluster
from tests.support.control_plane import ControlPlane, find_assets, start
from tests.support.runs import Apply

_NEEDS_PLANE = {"control_plane", "kube", "namespace"}


class _Starter:
    """Starts the control plane in a thread that lives until `stop`.

    The thread stays alive because the processes die with the thread that started them
    (PR_SET_PDEATHSIG belongs to the forking thread).
    """

    def __init__(self, assets: Path) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="simpletfjob-control-plane-"))
        self._assets = assets
        self._ready = threading.Event()
        self._done = threading.Event()
        self.plane: ControlPlane | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="control-plane", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.plane = start(self._assets, self.directory)
        except BaseException as e:  # handed to the test that asks for the plane
            self.error = e
        self._ready.set()
        self._done.wait()
        if self.plane is not None:
            self.plane.stop()

    def result(self) -> ControlPlane:
        self._ready.wait()
        if self.error is not None:
            raise self.error
        assert self.plane is not None
        return self.plane

    def stop(self, keep_logs: bool = False) -> None:
        self._done.set()
        self._thread.join(timeout=60)
        if not keep_logs:
            shutil.rmtree(self.directory, ignore_errors=True)


_starter = pytest.StashKey[_Starter]()


def _needs_plane(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    real = callspec is not None and callspec.params.get("cluster") == "real"
    return real or bool(_NEEDS_PLANE & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the tests that need the control plane to the end, and start it for them now."""
    needing = [item for item in items if _needs_plane(item)]
    if not needing or config.option.collectonly:
        return
    items[:] = [item for item in items if not _needs_plane(item)] + needing
    assets, _ = find_assets()
    if assets is not None:
        config.stash[_starter] = _Starter(assets)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the control plane; keep its directory (and logs) when something failed."""
    starter = session.config.stash.get(_starter, None)
    if starter is not None:
        starter.stop(keep_logs=exitstatus != 0)


@pytest.fixture(scope="session")
def control_plane(pytestconfig: pytest.Config) -> ControlPlane:
    """etcd, kube-apiserver and kube-controller-manager on loopback, for the whole session."""
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    if _starter not in pytestconfig.stash:  # asked for by a test collected some other way
        pytestconfig.stash[_starter] = _Starter(assets)
    return pytestconfig.stash[_starter].result()


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The control plane for one test: the nodes the test creates are deleted after it."""
    control_plane.delete_nodes()
    yield control_plane
    control_plane.delete_nodes()


@pytest.fixture
def namespace(kube: ControlPlane) -> str:
    """A fresh namespace on the control plane, for one test."""
    return kube.create_namespace()


@pytest.fixture(params=["loopback", "real"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The same test against the loopback server and against the real control plane."""
    if request.param == "real":
        yield request.getfixturevalue("kube")
        return
    with loopback_cluster() as loopback:
        yield loopback


@pytest.fixture
def run_in(cli: Any, cluster: Cluster, tmp_path: Path, kube_env: Path) -> Callable[..., Apply]:
    """run_in(namespace, user=ADMIN): `simpletfjob apply` (and `.delete`) of the mnist test run there."""

    def make(ns: str, user: str = ADMIN) -> Apply:
        return Apply(cli, cluster, tmp_path, ns, user)

    return make
