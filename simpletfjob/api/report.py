"""Progress lines, for the Python API: to the `simpletfjob` logger, where the CLI writes them to stderr."""

from __future__ import annotations

import logging

LOGGER = logging.getLogger("simpletfjob")
# A library's logger: without this, Python's last-resort handler would write the warnings
# to stderr of an application that configured no logging.
LOGGER.addHandler(logging.NullHandler())


def say(line: str) -> None:
    """A line the CLI would write to stderr ("worker-0 Running on n1"), as an INFO record."""
    LOGGER.info("%s", line.removeprefix("simpletfjob: "))


def warn(message: str) -> None:
    """A warning the CLI would write as `simpletfjob: warning: ...`, as a WARNING record."""
    LOGGER.warning("%s", message)
