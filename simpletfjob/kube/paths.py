"""Which kubeconfig files a run reads, found as kubectl finds them.

`--kubeconfig FILE` alone when given; else `$KUBECONFIG` (several files, merged;
those that do not exist are skipped, and ~/.kube/config is then not read); else
`~/.kube/config`; else, inside a pod, the service account. `kubeconfig_files`
lists every candidate, which is also what the output check refuses to write
over, so the two cannot disagree. This module imports only the standard library
and errors.py: every render runs that check.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from simpletfjob.errors import ClusterError, InputError

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class KubeconfigFile(NamedTuple):
    """A kubeconfig file a run may read, and how it was named."""

    what: str  # 'kubeconfig', 'kubeconfig in $KUBECONFIG' or 'default kubeconfig'
    path: str  # with '~' expanded
    given: str  # as the user wrote it, for messages


def kubeconfig_files(kubeconfig: str | None, environ: Mapping[str, str]) -> list[KubeconfigFile]:
    """Every kubeconfig file a run could read, whether or not it exists or would be read.
    `--kubeconfig`, each entry of `$KUBECONFIG`, then `~/.kube/config`, in kubectl's
    order of precedence; `kubeconfig_paths` picks from these the ones kubectl reads."""
    found: list[KubeconfigFile] = []
    if kubeconfig is not None:
        found.append(KubeconfigFile("kubeconfig", os.path.expanduser(kubeconfig), kubeconfig))
    for entry in environ.get("KUBECONFIG", "").split(os.pathsep):
        if entry:
            found.append(
                KubeconfigFile("kubeconfig in $KUBECONFIG", os.path.expanduser(entry), entry)
            )
    home = environ.get("HOME") or os.path.expanduser("~")
    default = os.path.join(home, ".kube", "config")
    found.append(KubeconfigFile("default kubeconfig", default, default))
    return found


def in_pod(environ: Mapping[str, str]) -> bool:
    """Whether this runs in a pod (the kubelet sets KUBERNETES_SERVICE_HOST)."""
    return bool(environ.get("KUBERNETES_SERVICE_HOST"))


def kubeconfig_paths(
    kubeconfig: str | None,
    environ: Mapping[str, str],
    *,
    purpose: str = "connect to",
    alternative: str = "",
) -> list[str] | None:
    """The kubeconfig files to merge, in order; None means the in-cluster service account.

    As kubectl decides: a file that does not exist is skipped (in $KUBECONFIG) or missing;
    anything else is read, and the reading says what is wrong with it (a symlink loop is an
    error, never a missing file).

    `purpose` and `alternative` complete the messages when there is no cluster at all:
    'no cluster to PURPOSE: ...; point at a cluster with --kubeconfig FILE, or ALTERNATIVE'.
    """
    files = kubeconfig_files(kubeconfig, environ)
    otherwise = f", or {alternative}" if alternative else ""
    if kubeconfig is not None:
        chosen = files[0]
        if os.path.isdir(chosen.path):
            raise InputError(f"kubeconfig {chosen.given!r} is a directory, not a file")
        if not os.path.lexists(chosen.path):
            raise InputError(f"kubeconfig {chosen.given!r} does not exist")
        return [chosen.path]
    if environ.get("KUBECONFIG"):
        listed = [f for f in files if f.what == "kubeconfig in $KUBECONFIG"]
        # As kubectl: files in $KUBECONFIG that do not exist are skipped, and with
        # $KUBECONFIG set, ~/.kube/config is not read. A directory is an error, as there.
        found = []
        for entry in listed:
            if os.path.isdir(entry.path):
                raise InputError(
                    f"$KUBECONFIG lists {entry.given!r}, which is a directory, not a kubeconfig file"
                )
            if _there(entry.path):
                found.append(entry.path)
        if found:
            return found
        if in_pod(environ):
            return None
        raise ClusterError(
            f"no file named in $KUBECONFIG exists ({environ['KUBECONFIG']}); "
            f"fix $KUBECONFIG{otherwise}"
        )
    default = files[-1].path
    if os.path.isdir(default):
        raise InputError(f"kubeconfig {default!r} is a directory, not a file")
    if _there(default):
        return [default]
    if in_pod(environ):
        return None
    raise ClusterError(
        f"no cluster to {purpose}: there is no --kubeconfig, $KUBECONFIG or ~/.kube/config, "
        f"and this is not a pod; point at a cluster with --kubeconfig FILE (or $KUBECONFIG){otherwise}"
    )


def _there(path: str) -> bool:
    """Whether kubectl would read the path: anything but a name that does not exist."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except OSError:  # a loop, a refusal: reading it says what is wrong
        return True
    return True
