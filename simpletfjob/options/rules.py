"""Rules of single option values that are not ranges: DNS names, label values, selectors, ports, durations.

render.py and runs.py declare the options with them; table.py says what a rule is.
"""

from __future__ import annotations

import re
from typing import Any

from simpletfjob.hosts.nodes import is_node_name
from simpletfjob.hosts.selection import parse_selector
from simpletfjob.identity import LABEL_VALUE_RULE, is_label_value
from simpletfjob.options.table import Must, ascii_int, option


def dns_name(value: Any) -> str | None:
    """A DNS name as Kubernetes names nodes (RFC 1123 subdomain)."""
    return None if is_node_name(value) else f"{value!r} is not a valid DNS name"


def namespace_name(value: Any) -> str | None:
    """A namespace: a DNS name that is one label."""
    found = dns_name(value)
    if found is None and (len(value) > 63 or "." in value):
        return f"{value!r} is not a valid namespace (a DNS label)"
    return found


def label_value(value: Any) -> str | None:
    """A Kubernetes label value (--name becomes the simpletfjob/job label)."""
    if value == "":
        return "must not be empty"
    if not is_label_value(value):
        return f"{value!r} is not a valid label value ({LABEL_VALUE_RULE})"
    return None


def selector(value: Any) -> str | None:
    """A label selector in kubectl's syntax; its parser names --selector and the place it stops."""
    parse_selector(value)  # raises the usage error itself
    return None


HOST_COUNT = Must("a positive number of hosts or -1 for all", lambda n: n == -1 or n > 0)


class _AutoPort(int):
    """`--port auto`: an int, as the field is, told apart by identity (`port is AUTO_PORT`)."""

    def __repr__(self) -> str:
        return "'auto'"

    __str__ = __repr__


# The plan replaces it with the port it chooses, once the nodes are chosen (see README, Placement).
AUTO_PORT: int = _AutoPort(0)
DEFAULT_PORT = 2222


def parse_port(text: str) -> int:
    """--port's text: a port number, or `auto`."""
    if text == "auto":
        return AUTO_PORT
    try:
        return ascii_int(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a port; write a number from 1 to 65535, or auto"
        ) from None


PORT = Must("between 1 and 65535", lambda n: n is AUTO_PORT or 1 <= n <= 65535)


_DURATION_PART = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)"  # ASCII digits
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A duration as kubectl's --timeout takes it (Go's syntax): `30s`, `5m`, `1h`, `1h30m`, `500ms`.

    Returns seconds. A number needs its unit, except 0; a duration is never negative.
    """
    if text == "0":
        return 0.0
    if not re.fullmatch(f"(?:{_DURATION_PART})+", text):
        raise ValueError(
            f"{text!r} is not a duration; write a number and a unit, such as 30s, 5m or 1h"
        )
    seconds = sum(
        float(number) * _UNIT_SECONDS[unit] for number, unit in re.findall(_DURATION_PART, text)
    )
    if seconds > _LONGEST_DURATION:
        raise ValueError(f"{text!r} is longer than the longest duration, 2562047h (as in kubectl)")
    return seconds


_LONGEST_DURATION = (2**63 - 1) / 1e9  # Go's: an int64 of nanoseconds, about 292 years


def format_duration(seconds: float) -> str:
    """The shortest of `1h`, `5m`, `30s` that says `seconds` exactly, else seconds with a unit."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.9f}".rstrip("0") + "s"  # no exponent: Go's syntax has none


def duration(*flags: str, default: float | None, help: str, **more: Any) -> Any:
    """An option that takes a duration as kubectl writes one (30s, 5m, 1h); its value is in seconds."""
    return option(
        *flags,
        default=default,
        type=float,
        parse=parse_duration,
        format=format_duration,
        metavar="DURATION",
        help=help,
        **more,
    )
