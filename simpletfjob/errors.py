"""One base error for everything simpletfjob reports, and a subclass per family; only the CLI prints them.

`SimpleTFJobError` is public as `simpletfjob.Error`: its message is the one line the
CLI prints after `simpletfjob: error: `, and `exit_code` the CLI's exit status. The
families a caller of the Python API may tell apart are the classes below, each
exported from `simpletfjob` (a kube/ or runs/ error is a subclass of one of them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3  # `wait --timeout` passed before the run ended
EXIT_READER_GONE = 141  # 128 + SIGPIPE: what a shell reports of git or kubectl after `| head`


class SimpleTFJobError(Exception):
    """A problem the user can fix; its message is one line saying what and where."""

    exit_code = EXIT_ERROR


Error = SimpleTFJobError  # the public name (simpletfjob.Error)


class UsageError(SimpleTFJobError):
    """Options that contradict each other or are out of range (exit status 2, like click)."""

    exit_code = EXIT_USAGE


class InputError(SimpleTFJobError):
    """A file the user gave cannot be read or is malformed."""


class TemplateError(SimpleTFJobError):
    """The template does not compile or does not render (names file and line)."""


class RenderCheckError(SimpleTFJobError):
    """A rendered document failed a check (names the document and line)."""


class SelectionError(SimpleTFJobError):
    """The hosts cannot satisfy the requested tasks.

    `verdicts` are every node's, when known, so that --explain can show them with the error.
    """

    verdicts: Sequence[Any] | None = None
    # The resource the run is short of, and the most of it free on one node it may use
    # ('cpu', '2'), where the refusal found one (a queue's waiting line says it).
    most_free: tuple[str, str] | None = None
    # -N asked for more hosts than are eligible: (eligible hosts, tasks asked, tasks per
    # host), so that the plan can offer a layout whose tasks fit.
    fewer: tuple[int, int, int] | None = None


class ClusterError(SimpleTFJobError):
    """A request to the cluster failed or was refused (names the server and context)."""


class NoRunError(SimpleTFJobError):
    """The namespace has no Job or Service with the run's labels; `elsewhere`, the namespaces
    that have its Jobs (None: not looked for)."""

    def __init__(self, name: str, namespace: str, elsewhere: Sequence[str] | None = None) -> None:
        shown = 3  # namespaces named before "and N more"
        message = f"no run {name!r} in namespace {namespace!r}"
        if elsewhere:
            where = " and ".join(repr(ns) for ns in elsewhere[:shown])
            more = f" and {len(elsewhere) - shown} more" if len(elsewhere) > shown else ""
            flags = " or ".join(f"-n {ns}" for ns in elsewhere[:shown])
            plural = "s" if len(elsewhere) > 1 else ""
            message += f"; it is in namespace{plural} {where}{more} (use {flags})"
        super().__init__(message)
        self.name = name
        self.namespace = namespace
        self.elsewhere = elsewhere


class RunFailed(SimpleTFJobError):
    """The run ended Failed, or cannot be decided: exit 1, naming the task and its reason.

    `run` is the run as last seen (runs/state.py's Run), when the raiser had it; `cause`,
    why it failed (runs/classify.py's Cause), when the raiser knew it; `bundle`, the path of
    the bundle --diagnose-on-failure wrote.
    """

    def __init__(
        self, message: str, run: Any = None, cause: Any = None, bundle: str | None = None
    ) -> None:
        super().__init__(message)
        self.run = run
        self.cause = cause
        self.bundle = bundle


class TimedOut(SimpleTFJobError):
    """--timeout passed before the run ended (exit 3); the run is left as it is."""

    exit_code = EXIT_TIMEOUT


class OutputError(SimpleTFJobError):
    """The output cannot be written."""


class SchemaError(SimpleTFJobError):
    """--validate found a document that does not match the Kubernetes schema, or cannot run."""


def number_problem(error: BaseException) -> str | None:
    """Python's limit on the digits of a number read or written, in words that do not name Python.

    Python refuses to turn a decimal number of more than 4300 digits (its default)
    into text or back, as a guard against slow conversions; its own message tells
    a programmer to raise the limit, which a user cannot do. None for other errors.
    """
    text = str(error)
    if not isinstance(error, ValueError) or "integer string conversion" not in text:
        return None
    found = re.search(r"\((\d+) digits\)", text)
    limit = f"{int(found[1]):,}" if found else "4,300"
    has = re.search(r"value has (\d+) digits", text)
    size = f"of {int(has[1]):,} digits" if has else f"of more than {limit} digits"
    return (
        f"a number {size} is too long: a number may have at most {limit} (see Limits in the README)"
    )


class Unsettled(Protocol):
    """A write whose answer had not come when an interrupt stopped the wait (kube/inflight.py)."""

    what: str

    def settle(self, seconds: float) -> bool: ...


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived: unwind (removing a temporary file), then exit 128 + signal.

    A BaseException, as KeyboardInterrupt is, so that no `except Exception` on the
    way takes it for an error; not KeyboardInterrupt itself, which click turns into
    "Aborted!" and a blank line.
    """

    def __init__(self, exit_code: int) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code
        # What the run had done when it stopped, and how to go on, for the one line it
        # leaves ("interrupted: applied 110 of 300 objects ..."); set on the way out.
        self.detail = ""
        # What was done, without the way on ("applied 110 of 300 objects of run 'mnist' in
        # namespace ml"), for a caller that words the way on itself (`run`).
        self.progress = ""
        # The writes that were sent and not yet answered: they may still take effect.
        self.unsettled: list[Unsettled] = []


class ReaderGone(Interrupted):
    """The reader of the output went away (`| head`, a named pipe closed): no error.

    The command stops as SIGPIPE stops git and kubectl, with exit 141 and no line of its
    own; it unwinds as an interrupt does (a temporary file removed, `run` saying what it
    leaves on the cluster), since what it was writing has no one to read it.
    """

    def __init__(self, what: str = "stdout") -> None:
        super().__init__(EXIT_READER_GONE)
        self.what = what
