"""Connecting to a cluster as kubectl would: kubeconfig or service account, context, namespace.

The kubeconfig files are found as kubectl finds them (paths.py), read and checked
before the client sees them (kubeconfig.py), and handed to the official client
one context at a time. The namespace is resolved as kubectl resolves it:
`--namespace`, else the context's `namespace`, else in a pod `$POD_NAMESPACE` or
the service account's namespace file, else `default`.

`kubernetes` is imported inside `connect`, never at import time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from simpletfjob import _version
from simpletfjob.errors import ClusterError, InputError, UsageError
from simpletfjob.inputs import describe_value
from simpletfjob.kube.kubeconfig import Chosen
from simpletfjob.kube.paths import SERVICE_ACCOUNT_DIR, kubeconfig_paths

# A namespace name is a DNS-1123 label, as the API server requires.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class Settings:
    """Which cluster, as whom and where, and how long to wait for it; the defaults are the CLI's."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None  # --namespace; None: the context's, the pod's, or 'default'
    connect_timeout: float = 10.0  # seconds, per request
    read_timeout: float = 30.0  # seconds without a byte, per request
    deadline: float = 60.0  # seconds for one call (a whole list), retries included
    attempts: int = 5  # per request, for 5xx, 429 and dropped connections
    backoff: float = 0.5  # first delay between attempts; doubles each time
    max_delay: float = 8.0
    page_size: int = 500  # objects per page of a list
    # Requests at once, for calls that make many (kube/lists.list_each): each is a pooled
    # connection, and past a few the TLS handshakes of new ones cost more than the wait they save.
    in_flight: int = 8
    service_account_dir: str = SERVICE_ACCOUNT_DIR
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    sleep: Callable[[float], None] = time.sleep


class Target(NamedTuple):
    """The server being asked, named the way the user chose it, for every message."""

    server: str
    context: str | None  # None for the in-cluster service account
    insecure: bool = False

    def __str__(self) -> str:
        server = _redacted(self.server)  # a password written into the URL stays out of messages
        if self.context is None:
            return f"{server} (in-cluster service account)"
        return f"{server} (context {self.context!r})"

    @property
    def insecurity(self) -> str | None:
        """The warning to give when the server's certificate is not checked; None when it is."""
        if not self.insecure:
            return None
        return (
            f"{self}: insecure-skip-tls-verify is set, so the server's certificate is not checked"
        )


class Patience(Protocol):
    """What a request asks of the outage.Ride a command has put on its connection."""

    deadline: Any  # a request.Deadline, or None: as long as it takes
    returns: int  # how many times the server has come back

    @property
    def away(self) -> bool: ...

    def remaining(self) -> float: ...

    def lost(self, cause: str, began: float | None = None) -> None: ...

    def back(self) -> None: ...

    def still_away(self) -> ClusterError: ...


RIDE: ContextVar[Patience | None] = ContextVar("simpletfjob_ride", default=None)  # outage.Ride


class Connection:
    """A client configured for one cluster, the server it talks to, and the namespace to use.
    Close it (or use it in a `with`): that drops its connections and puts back the
    warning filters and log handler that keep the client's own output off stderr."""

    def __init__(
        self,
        client: Any,
        target: Target,
        namespace: Namespace,
        settings: Settings,
        stack: ExitStack,
    ) -> None:
        self.client = client
        self.target = target
        self.settings = settings
        self._namespace = namespace
        self._stack = stack
        self.answered = False  # the server has answered a request (any status) on this connection
        self.ride: Patience | None = None  # while a command rides out outages (outage.Ride)
        # Closed: a call still trying in another thread (a list whose caller was interrupted,
        # riding out an outage with no deadline) gives up at its next try.
        self.closed = False
        # Streamed answers still open (watches, followed logs): cut when the connection closes.
        self.streams: weakref.WeakSet[Any] = weakref.WeakSet()

    @property
    def namespace(self) -> str:
        """Where namespaced calls go unless they say; checked when first needed, so that a
        context's odd namespace does not stop a command that reads only nodes, as in kubectl."""
        return self._namespace.checked()

    def streaming(self, response: Any) -> None:
        """A streamed answer is open (request.py): cut it when the connection is closed."""
        self.streams.add(response)
        if self.closed:
            cut(response)

    def close(self) -> None:
        self.closed = True
        try:
            for response in list(self.streams):
                cut(response)
            self.client.close()
        finally:
            self._stack.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cut(response: Any) -> None:
    """Shut a streamed answer's socket, waking its reader (urllib3's shutdown: any transport)."""
    with contextlib.suppress(OSError, ValueError, RuntimeError, AttributeError):
        response.shutdown()
        return
    with contextlib.suppress(OSError, AttributeError):
        response.connection.sock.shutdown(socket.SHUT_RDWR)


def connect(
    settings: Settings, *, purpose: str = "connect to", alternative: str = ""
) -> Connection:
    """A `Connection` as kubectl would make it; `purpose` and `alternative` word the no-cluster error."""
    stack = ExitStack()
    stack.enter_context(_quiet())
    try:
        return _connect(settings, purpose, alternative, stack)
    except BaseException:
        stack.close()
        raise


def _connect(settings: Settings, purpose: str, alternative: str, stack: ExitStack) -> Connection:
    from simpletfjob.kube.kubeconfig import choose, read_kubeconfigs

    paths = kubeconfig_paths(
        settings.kubeconfig, settings.environ, purpose=purpose, alternative=alternative
    )
    if paths is None and settings.context is not None:
        raise ClusterError(
            f"--context {settings.context!r} names a kubeconfig context, but there is no "
            "kubeconfig here ($KUBECONFIG, ~/.kube/config); give one with --kubeconfig FILE"
        )
    # Checked before the client is imported: a malformed file or alias bomb is refused at once.
    chosen = choose(read_kubeconfigs(paths), settings.context) if paths is not None else None
    namespace = resolve_namespace(settings, chosen)

    from kubernetes.client.api_client import ApiClient
    from kubernetes.client.configuration import Configuration

    configuration = Configuration()
    if chosen is None:
        target = _load_in_cluster(configuration, settings)
    else:
        target = _load_kubeconfig(configuration, chosen)
    _proxy_read_once(configuration)
    # simpletfjob retries by itself, within its deadline; urllib3's own retries
    # would wait longer and log each attempt on stderr.
    configuration.retries = False
    # One pooled connection for each request in flight: past the pool's size (5 per CPU by
    # default), urllib3 opens a connection, TLS and all, for each request and drops it after.
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize, settings.in_flight
    )
    try:
        client = ApiClient(configuration)  # builds the pool manager, with the proxy if any
    except (ImportError, ValueError) as e:
        raise ClusterError(_proxy_problem(target, configuration.proxy, chosen, e)) from e
    client.user_agent = f"simpletfjob/{_version.__version__}"
    conn = Connection(client, target, namespace, settings, stack)
    conn.ride = RIDE.get()  # opened in outage.riding_out (the plan's, in `run`): ride along
    return conn


def _proxy_problem(target: Target, proxy: str, chosen: Chosen | None, error: Exception) -> str:
    """Why the client cannot use the proxy: a SOCKS proxy without PySocks, or no URL at all."""
    written = chosen is not None and chosen.cluster.body.get("proxy-url") == proxy
    source = (
        f"{chosen.cluster.where}.cluster.proxy-url"
        if written and chosen is not None
        else "the proxy from $HTTPS_PROXY or $HTTP_PROXY"
    )
    if isinstance(error, ImportError):
        return (
            f"{target}: {source} {_redacted(proxy)!r} is a SOCKS proxy, which needs the "
            "PySocks package installed; install it, or use an HTTP proxy"
        )
    detail = str(error).strip().splitlines()[0] if str(error).strip() else "not a URL"
    detail = detail.replace(proxy, _redacted(proxy))
    return f"{target}: {source} {_redacted(proxy)!r} is not a valid proxy URL: {detail}"


def _redacted(url: str) -> str:
    """The URL with any password in it replaced, as kubectl shows one (Go's URL.Redacted)."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@:]*):[^/@]*@", r"\1:xxxxx@", url)


class Namespace(NamedTuple):
    """The namespace kubectl would use, as written, and where it was written (for messages)."""

    name: object  # a string, unless a kubeconfig holds something else
    source: str  # '--namespace', 'FILE: contexts[0] ('ml').context.namespace', ...

    def checked(self) -> str:
        """The name, once it is known to be one; a one-line error naming its source if not."""
        name = self.name
        if isinstance(name, str) and len(name) <= 63 and _NAMESPACE.fullmatch(name):
            return name
        error = UsageError if self.source == "--namespace" else InputError
        if not isinstance(name, str):
            raise error(f"{self.source} must be a string, not {describe_value(name)}")
        raise error(
            f"{self.source}: {name!r} is not a namespace name (lower-case letters, digits and "
            "'-', at most 63, starting and ending with a letter or digit)"
        )


def resolve_namespace(settings: Settings, chosen: Chosen | None) -> Namespace:
    """--namespace, else the context's, else (in a pod) $POD_NAMESPACE or the service account's, else 'default'."""
    if settings.namespace:
        return Namespace(settings.namespace, "--namespace")
    if chosen is not None:
        if chosen.namespace not in (None, ""):
            return Namespace(chosen.namespace, f"{chosen.context.where}.context.namespace")
        return Namespace("default", "the default namespace")
    # In a pod, as client-go's in-cluster config: the downward API's variable, then the file.
    from_env = settings.environ.get("POD_NAMESPACE")
    if from_env:
        return Namespace(from_env, "$POD_NAMESPACE")
    path = os.path.join(settings.service_account_dir, "namespace")
    try:
        with open(path, encoding="utf-8") as f:
            written = f.read().strip()
    except (OSError, UnicodeDecodeError):
        written = ""  # as client-go: no readable file means 'default'
    if written:
        return Namespace(written, path)
    return Namespace("default", "the default namespace")


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
    """Keep what the client logs, and print none of it: it reports some failures only through
    the root logger (`ERROR:root:...` on stderr); the caller turns the one that matters into
    its own message."""
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


def _proxy_read_once(configuration: Any) -> None:
    """Keep the proxy the environment gave when the connection was made: the client's token
    hook sets the host before every request, and each time the client reads the whole
    environment for a proxy that its pool manager, made once, never uses."""
    if hasattr(configuration, "_proxy_from_env"):
        configuration._proxy_from_env = False


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
        provider = chosen.user.body.get("auth-provider") if chosen.user is not None else None
        if provider is not None and isinstance(e, (AttributeError, TypeError, KeyError)):
            # The client's auth-provider code fails on its own internals, not on the file.
            first = _provider_failure(str(provider.get("name")))
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


def _provider_failure(name: str) -> str:
    """An auth-provider that gave no credential; gcp and azure are gone from kubectl (1.26)."""
    plugins = {"gcp": "gke-gcloud-auth-plugin", "azure": "kubelogin"}
    said = f"the auth-provider {name!r} gave no credential"
    if name in plugins:
        return (
            f"{said}; kubectl no longer has it either: get credentials through its exec "
            f"plugin, {plugins[name]}"
        )
    return said


def _load_in_cluster(configuration: Any, settings: Settings) -> Target:
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
