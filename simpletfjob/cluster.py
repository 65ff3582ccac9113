"""Reading nodes from a live cluster through the official `kubernetes` client, as kubectl would.

Connection settings follow kubectl: `--kubeconfig FILE` and `--context NAME`;
else `$KUBECONFIG` (several files, merged: the first file to define a name or
the current context wins); else `~/.kube/config`; else, inside a pod, the
service account. Nodes are listed in pages of 500 from the raw JSON, keeping
only what a `Node` needs, so 5000 nodes cost neither model objects nor much
memory. Every wait is bounded, transient failures are retried with backoff,
and every failure becomes one `ClusterError` line naming the server and context.

This is the only module that imports `kubernetes` (and urllib3), and only
inside its functions, so an offline render never loads them.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from simpletfjob import __version__
from simpletfjob.errors import ClusterError, InputError
from simpletfjob.kubeconfig import Chosen
from simpletfjob.nodes import Node, node_from_object, without_images

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
NODES_PATH = "/api/v1/nodes"
PAGE_SIZE = 500

NO_CLUSTER = (
    "no cluster to read nodes from: there is no --kubeconfig, $KUBECONFIG or ~/.kube/config, "
    "and this is not a pod; point at a cluster with --kubeconfig FILE (or $KUBECONFIG), "
    "or give the hosts with --nodes H1,H2,... or --nodes-file FILE"
)


def _warn(message: str) -> None:
    print(f"simpletfjob: warning: {message}", file=sys.stderr)


@dataclass(frozen=True)
class ClusterSettings:
    """Where the cluster is and how long to wait for it; the defaults are the CLI's."""

    kubeconfig: str | None = None
    context: str | None = None
    selector: str | None = None  # passed to the server as labelSelector
    connect_timeout: float = 10.0  # seconds, per request
    read_timeout: float = 30.0  # seconds without a byte, per request
    deadline: float = 60.0  # seconds for the whole list, retries included
    attempts: int = 5  # per page, for 5xx, 429 and dropped connections
    backoff: float = 0.5  # first delay between attempts; doubles each time
    max_delay: float = 8.0
    page_size: int = PAGE_SIZE
    service_account_dir: str = SERVICE_ACCOUNT_DIR
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    sleep: Callable[[float], None] = time.sleep
    warn: Callable[[str], None] = _warn


@dataclass(frozen=True)
class Target:
    """The server being asked, named the way the user chose it, for every message."""

    server: str
    context: str | None  # None for the in-cluster service account
    insecure: bool = False

    def __str__(self) -> str:
        if self.context is None:
            return f"{self.server} (in-cluster service account)"
        return f"{self.server} (context {self.context!r})"


class _Expired(Exception):
    """A continue token the server no longer knows (410)."""


def read_cluster_nodes(settings: ClusterSettings) -> list[Node]:
    """Every node the cluster lists (matching the selector), sorted by name."""
    with _quiet():
        client, target = connect(settings)
        if target.insecure:
            settings.warn(
                f"{target}: insecure-skip-tls-verify is set, so the server's certificate is not checked"
            )
        try:
            nodes = list_nodes(client, target, settings)
        finally:
            client.close()
    first: dict[str, int] = {}
    for i, node in enumerate(nodes):
        seen = first.setdefault(node.name, i)
        if seen != i:
            # A node name is unique in a cluster: two tasks would share one name:port.
            raise ClusterError(
                f"{target}: the node list names {node.name!r} twice (items {seen} and {i}); "
                "a node name is unique, so the list cannot be used"
            )
    return sorted(nodes, key=lambda n: n.name)


@contextmanager
def _quiet() -> Iterator[None]:
    """No library warnings or log lines on stderr: simpletfjob says what matters in its own words."""
    with warnings.catch_warnings(), _client_logs():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        from urllib3.exceptions import InsecureRequestWarning

        warnings.simplefilter("ignore", InsecureRequestWarning)
        yield


class _KeptLog(NamedTuple):
    level: int
    message: str
    error: BaseException | None  # the exception being handled when it was logged


@contextmanager
def _client_logs() -> Iterator[list[_KeptLog]]:
    """Keep what the client logs, and print none of it.

    The kubernetes client reports some failures only through the root logger
    (`logging.error(str(e))`, then it carries on), which with no handler set up
    prints `ERROR:root:...` on stderr. A handler on the root logger takes those
    records instead, with the exception being handled, so that the caller can
    turn the one that matters into its own message.
    """
    kept: list[_KeptLog] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(_KeptLog(record.levelno, record.getMessage(), sys.exc_info()[1]))

    handler = Keep()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield kept
    finally:
        root.removeHandler(handler)


# -- configuration ------------------------------------------------------------------------


def kubeconfig_paths(settings: ClusterSettings) -> list[str] | None:
    """The kubeconfig files to merge, in order; None means the in-cluster service account.

    As kubectl decides: a file that does not exist is skipped (in $KUBECONFIG) or
    missing; anything else that is there is read, and the reading says what is
    wrong with it. So /dev/null is an empty kubeconfig, a named pipe or
    `<(...)` is read once, and a symlink loop or a file that cannot be read is
    an error that names it, never taken for a file that is not there.
    """
    environ = settings.environ
    if settings.kubeconfig is not None:
        path = os.path.expanduser(settings.kubeconfig)
        if os.path.isdir(path):
            raise InputError(f"kubeconfig {settings.kubeconfig!r} is a directory, not a file")
        if not os.path.lexists(path):
            raise InputError(f"kubeconfig {settings.kubeconfig!r} does not exist")
        return [path]
    listed = environ.get("KUBECONFIG", "")
    in_pod = bool(environ.get("KUBERNETES_SERVICE_HOST"))
    if listed:
        # As kubectl: files in $KUBECONFIG that do not exist are skipped, and with
        # $KUBECONFIG set, ~/.kube/config is not read. A directory is an error, as there.
        found = []
        for entry in listed.split(os.pathsep):
            path = os.path.expanduser(entry)
            if entry and os.path.isdir(path):
                raise InputError(
                    f"$KUBECONFIG lists {entry!r}, which is a directory, not a kubeconfig file"
                )
            if entry and _there(path):
                found.append(path)
        if found:
            return found
        if in_pod:
            return None
        raise ClusterError(
            f"no file named in $KUBECONFIG exists ({listed}); fix $KUBECONFIG, "
            "or give the hosts with --nodes H1,H2,... or --nodes-file FILE"
        )
    home = environ.get("HOME") or os.path.expanduser("~")
    default = os.path.join(home, ".kube", "config")
    if os.path.isdir(default):
        raise InputError(f"kubeconfig {default!r} is a directory, not a file")
    if _there(default):
        return [default]
    if in_pod:
        return None
    raise ClusterError(NO_CLUSTER)


def _there(path: str) -> bool:
    """Whether kubectl would read the path: anything but a name that does not exist."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except OSError:  # a loop, a refusal: reading it says what is wrong
        return True
    return True


def connect(settings: ClusterSettings) -> tuple[Any, Target]:
    """An `ApiClient` configured as kubectl would be, and the server it talks to."""
    from simpletfjob.kubeconfig import choose, read_kubeconfigs

    paths = kubeconfig_paths(settings)
    if paths is None and settings.context is not None:
        raise ClusterError(
            f"--context {settings.context!r} names a kubeconfig context, but there is no "
            "kubeconfig here ($KUBECONFIG, ~/.kube/config); give one with --kubeconfig FILE"
        )
    # The kubeconfig is read and checked before the client is imported (most of a second):
    # a malformed file or an alias bomb is refused at once.
    chosen = choose(read_kubeconfigs(paths), settings.context) if paths is not None else None

    from kubernetes.client.api_client import ApiClient
    from kubernetes.client.configuration import Configuration

    configuration = Configuration()
    if chosen is None:
        target = _load_in_cluster(configuration, settings)
    else:
        target = _load_kubeconfig(configuration, chosen)
    # simpletfjob retries by itself, within its deadline; urllib3's own retries
    # would wait longer and log each attempt on stderr.
    configuration.retries = False
    client = ApiClient(configuration)
    client.user_agent = f"simpletfjob/{__version__}"
    return client, target


def _load_kubeconfig(configuration: Any, chosen: Chosen) -> Target:
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader

    name = chosen.context.name
    # The client is given only what it needs, already checked; each entry keeps the path
    # of its file, which the client resolves relative certificate and token paths against.
    entries = {"contexts": [chosen.context], "clusters": [chosen.cluster]}
    entries["users"] = [chosen.user] if chosen.user is not None else []
    merged = {
        section: [
            ConfigNode(e.where, {"name": e.name, section[:-1]: dict(e.body)}, e.path)
            for e in listed
        ]
        for section, listed in entries.items()
    }
    shown = chosen.shown
    root = ConfigNode(shown, {**merged, "current-context": name}, chosen.context.path)
    try:
        with _client_logs() as logged:
            loader = KubeConfigLoader(config_dict=root, active_context=name, config_base_path=None)
            loader.load_and_set(configuration)
    except (ConfigException, OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        # The client's own checks; what simpletfjob checks itself is in kubeconfig.py.
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClusterError(f"kubeconfig {shown}, context {name!r}: {first}") from e
    failed = [log for log in logged if log.level >= logging.ERROR]
    if chosen.user is not None and "exec" in chosen.user.body and failed:
        # The client logs a failed credential plugin and goes on without credentials.
        command = chosen.user.body["exec"]["command"]
        raise ClusterError(
            f"kubeconfig {shown}, context {name!r}: "
            f"{_plugin_failure(command, failed[0].message, failed[0].error)}"
        )
    if not configuration.host or configuration.host == "http://localhost":
        raise ClusterError(
            f"kubeconfig {shown}, context {name!r}: the cluster has no server address"
        )
    return Target(str(configuration.host), name, insecure=not configuration.verify_ssl)


def _plugin_failure(command: str, message: str, error: BaseException | None) -> str:
    """What went wrong with an exec credential plugin, from what the client logged."""
    plugin = f"the credential plugin {command!r}"
    if isinstance(error, FileNotFoundError):
        return (
            f"{plugin} was not found; install it, or fix the user's exec command in the kubeconfig"
        )
    if isinstance(error, PermissionError):
        return f"{plugin} cannot be run: permission denied"
    if isinstance(error, OSError):
        return f"{plugin} cannot be run: {error.strerror or error}"
    exited = re.match(r"exec: process returned (-?\d+)\.?\s*(.*)", message, re.DOTALL)
    if exited:
        # Its last line that says something (gcloud ends its message with a lone ')').
        said = [line.strip() for line in exited[2].splitlines() if re.search(r"\w", line)]
        return f"{plugin} failed (exit status {exited[1]})" + (f": {said[-1]}" if said else "")
    detail = message.strip().splitlines()[0] if message.strip() else "no detail"
    return f"{plugin} gave no credential: {detail.removeprefix('exec: ')}"


def _load_in_cluster(configuration: Any, settings: ClusterSettings) -> Target:
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    directory = settings.service_account_dir
    loader = InClusterConfigLoader(
        token_filename=os.path.join(directory, "token"),
        cert_filename=os.path.join(directory, "ca.crt"),
        environ=settings.environ,
    )
    try:
        loader.load_and_set(configuration)
    except (ConfigException, OSError) as e:
        raise ClusterError(
            f"in-cluster config ({directory}): {e}; mount a service account token, "
            "or point at a cluster with --kubeconfig FILE"
        ) from e
    return Target(str(configuration.host), None)


# -- listing ------------------------------------------------------------------------------


def list_nodes(client: Any, target: Target, settings: ClusterSettings) -> list[Node]:
    """All nodes, page by page, restarting once from the beginning if a continue token expires."""
    deadline = time.monotonic() + settings.deadline
    base: list[tuple[str, str | int]] = [("limit", settings.page_size)]
    if settings.selector:
        base.append(("labelSelector", settings.selector))

    def fetch(token: str | None) -> bytes:
        query = [*base, ("continue", token)] if token else base
        return _fetch(client, target, query, settings, deadline)

    # Thousands of small dicts per page would set off the collector again and
    # again for nothing: nothing here makes reference cycles.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for restart in (False, True):
            try:
                return _read_pages(fetch, target)
            except _Expired as e:
                if restart:
                    raise ClusterError(
                        f"{target}: the node list changes faster than it can be read in pages "
                        "(the continue token expired twice, 410 Expired); try again"
                    ) from e
        raise AssertionError("unreachable")
    finally:
        if collecting:
            gc.enable()


def _read_pages(fetch: Callable[[str | None], bytes], target: Target) -> list[Node]:
    """Fetch the next page while this one is parsed: the server and the network work meanwhile."""
    nodes: list[Node] = []
    data = fetch(None)
    while True:
        peeked = _peek_continue(data)
        ahead = _Ahead(fetch, peeked) if peeked else None
        page = _parse_page(data, target)
        del data  # one page of raw JSON at a time
        nodes += _page_nodes(page, target)
        token = (page.get("metadata") or {}).get("continue") or None
        del page
        if ahead is not None and token == peeked:
            data = ahead.result()
            continue
        if ahead is not None:
            ahead.discard()
        if token is None:
            return nodes
        data = fetch(token)


# kube-apiserver writes a list's metadata before its items; the token is base64.
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([A-Za-z0-9+/=_-]+)"')


def _peek_continue(data: bytes) -> str | None:
    """The continue token, read from the page's head without parsing it; None if not there."""
    items = data.find(b'"items":')
    found = _CONTINUE.search(data, 0, items) if items > 0 else None
    return found[1].decode("ascii") if found else None


class _Ahead:
    """One page fetched in a thread; its result or its error comes back with `result`."""

    def __init__(self, fetch: Callable[[str | None], bytes], token: str) -> None:
        self._data: bytes | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fetch, token), daemon=True)
        self._thread.start()

    def _run(self, fetch: Callable[[str | None], bytes], token: str) -> None:
        try:
            self._data = fetch(token)
        except BaseException as e:  # handed to the caller, in its thread
            self._error = e

    def result(self) -> bytes:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._data is not None
        return self._data

    def discard(self) -> None:
        self._thread.join()


def _parse_page(data: bytes, target: Target) -> dict[str, Any]:
    try:
        page = json.loads(without_images(data))
    except (ValueError, RecursionError):
        try:  # not the layout without_images expects: parse all of it
            page = json.loads(data)
        except (ValueError, RecursionError) as e:  # nested too deeply for the parser, too
            raise ClusterError(f"{target}: the answer to GET {NODES_PATH} is not JSON") from e
    if not isinstance(page, dict):
        raise ClusterError(f"{target}: the answer to GET {NODES_PATH} is not a NodeList")
    return page


def _page_nodes(page: Mapping[str, Any], target: Target) -> list[Node]:
    items = page.get("items")
    metadata = page.get("metadata") or {}
    if (
        not isinstance(items, list)
        or not isinstance(metadata, Mapping)
        or not isinstance(metadata.get("continue") or "", str)
    ):
        raise ClusterError(f"{target}: the answer to GET {NODES_PATH} is not a NodeList")
    try:
        return [
            node_from_object(item, f"{target}: the node list's items[{i}]")
            for i, item in enumerate(items)
        ]
    except InputError as e:  # the same checks as for a saved NodeList, but the server's fault
        raise ClusterError(str(e)) from e


def _fetch(
    client: Any,
    target: Target,
    query: Sequence[tuple[str, str | int]],
    settings: ClusterSettings,
    deadline: float,
) -> bytes:
    """One page of raw JSON, retrying what is worth retrying; every failure is one line."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import (
        ConnectTimeoutError,
        HTTPError,
        MaxRetryError,
        NameResolutionError,
        NewConnectionError,
        ProtocolError,
        ReadTimeoutError,
        SSLError,
    )

    problem = ""
    for attempt in range(max(1, settings.attempts)):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ClusterError(
                f"{target}: no complete node list within {settings.deadline:g} s{problem}"
            )
        connect_timeout = min(settings.connect_timeout, remaining)
        read_timeout = min(settings.read_timeout, remaining)
        delay = min(settings.backoff * 2**attempt, settings.max_delay)
        try:
            request = client.param_serialize(
                method="GET",
                resource_path=NODES_PATH,
                query_params=list(query),
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            response = client.call_api(*request, _request_timeout=(connect_timeout, read_timeout))
            data = response.read()
            status = int(response.status)
        except ApiException as e:  # the REST layer reports TLS failures this way
            raise ClusterError(
                f"{target}: TLS error: {_tls_detail(str(e.reason or e))}{_TLS_HINT}"
            ) from e
        except MaxRetryError as e:  # only when a proxy or redirect is involved
            raise ClusterError(f"{target}: cannot reach the server: {_first_line(e.reason)}") from e
        except SSLError as e:
            raise ClusterError(f"{target}: TLS error: {_tls_detail(str(e))}{_TLS_HINT}") from e
        except NameResolutionError as e:
            raise ClusterError(
                f"{target}: unreachable: cannot resolve the server's host name; check the server in your kubeconfig"
            ) from e
        except NewConnectionError as e:
            raise ClusterError(
                f"{target}: unreachable: {_connect_detail(e)}; is the cluster up, and is this the right context?"
            ) from e
        except ConnectTimeoutError as e:
            raise ClusterError(
                f"{target}: unreachable: no answer from the server within {connect_timeout:g} s; "
                "is the cluster up and reachable from here?"
            ) from e
        except ReadTimeoutError as e:
            raise ClusterError(
                f"{target}: unreachable: the server took the request but sent no answer within {read_timeout:g} s"
            ) from e
        except ProtocolError as e:  # the connection was reset or closed with no answer: retry
            problem = f" (last: connection dropped: {_first_line(e)})"
            if attempt + 1 < settings.attempts:
                _pause(delay, deadline, target, settings, problem)
            continue
        except HTTPError as e:
            raise ClusterError(f"{target}: cannot reach the server: {_first_line(e)}") from e

        if status == 200:
            return data if isinstance(data, bytes) else bytes(data)
        reason, message = _status_of(data, response)
        if status == 410 and any(k == "continue" for k, _ in query):
            raise _Expired(message)
        if status == 429 or status >= 500:
            problem = f" (last: {status} {reason}: {message})"
            retry_after = _retry_after(response)
            if retry_after is not None:
                delay = retry_after
            if attempt + 1 < settings.attempts:
                _pause(delay, deadline, target, settings, problem)
            continue
        raise ClusterError(_refusal(target, status, reason, message))
    raise ClusterError(
        f"{target}: the server kept failing after {settings.attempts} attempts{problem}"
    )


_TLS_HINT = "; check certificate-authority in your kubeconfig, or that the server address is right"


def _pause(
    delay: float, deadline: float, target: Target, settings: ClusterSettings, problem: str
) -> None:
    if time.monotonic() + delay > deadline:
        raise ClusterError(
            f"{target}: no complete node list within {settings.deadline:g} s{problem}"
        )
    settings.sleep(delay)


def _retry_after(response: Any) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def _status_of(data: bytes, response: Any) -> tuple[str, str]:
    """The reason and message of a `Status` error body; the HTTP reason if it is not one."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        reason = str(body.get("reason") or response.reason or "")
        message = str(body.get("message") or "").strip()
        return reason, _first_line(message) or reason
    text = data[:200].decode("utf-8", "replace").strip()
    return str(response.reason or ""), _first_line(text) or str(response.reason or "")


def _refusal(target: Target, status: int, reason: str, message: str) -> str:
    if status == 401:
        return (
            f"{target}: the server refused your credentials (401 Unauthorized); "
            "log in again, or fix the user's token or certificate in your kubeconfig"
        )
    if status == 403:
        found = re.search(r'User "([^"]*)"', message)
        user = f"user {found[1]!r}" if found else "your user"
        return (
            f"{target}: {user} may not list nodes (403 Forbidden); it needs RBAC "
            "permission to list nodes (a ClusterRole with verb 'list' on 'nodes'), "
            "or give the hosts with --nodes or --nodes-file"
        )
    if status == 404:
        return f"{target}: GET {NODES_PATH} was not found (404); is this a Kubernetes API server?"
    return f"{target}: the server answered {status} {reason}: {message}"


def _tls_detail(text: str) -> str:
    text = " ".join(text.split())
    found = re.search(r"certificate verify failed: ([^(]*)", text)
    if found:
        return f"certificate verify failed: {found[1].strip()}"
    found = re.search(r"\[SSL: [A-Z_]+\] ([^(]*)", text)
    if found:
        return found[1].strip()
    return re.sub(r"^SSLError ", "", text)[:200]


def _connect_detail(error: Exception) -> str:
    text = str(error)
    if "refused" in text.lower():
        return "connection refused"
    found = re.search(r"\[Errno -?\d+\] ([^')]*)", text)
    return found[1].strip() if found else _first_line(text)


def _first_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else ""
