"""Kubernetes resource quantities ('8', '1k', '1Ki', '500m'), read as whole counts."""

from __future__ import annotations

import re

# A Kubernetes resource quantity: a decimal number and a binary or decimal suffix or exponent.
_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,9})?"
)
_SUFFIX = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_MOST_DEVICES = 1 << 62  # a count no node has; what any larger quantity is taken as


def parse_quantity_count(value: object) -> int | None:
    """A whole-device count from a resource quantity ('4', 4, '1k', '500m'), rounded down; None if it is none."""
    text = str(value) if type(value) is not str else value
    if len(text) <= 18 and text.isascii() and text.isdigit():  # what a cluster writes: "8"
        return int(text)
    found = _QUANTITY.fullmatch(text)
    if found is None:
        return None
    from decimal import Decimal

    number, suffix = Decimal(found[1]), found[2] or ""
    if suffix.endswith("i"):
        scale = Decimal(1024) ** ("KMGTPE".index(suffix[0]) + 1)
    else:
        exponent = _SUFFIX[suffix] if suffix in _SUFFIX else int(suffix[1:] or 0)
        if exponent > 30:  # past any count; Decimal would build the whole number
            return _MOST_DEVICES if number > 0 else 0
        scale = Decimal(10) ** max(exponent, -30)
    return max(0, min(int(number * scale), _MOST_DEVICES))
