"""Kubernetes resource quantities ('8', '500m', '1Gi', '1e3'): exact amounts, and whole counts.

Hand-written: the `kubernetes` package's parser comes only with the whole client, whose
import an offline render never pays.
"""

from __future__ import annotations

import functools
import math
import re
from typing import TYPE_CHECKING

from simpletfjob.inputs import describe_value

if TYPE_CHECKING:
    from fractions import Fraction

# Kubernetes' quantity grammar (k8s.io/apimachinery resource.Quantity): a signed decimal
# number, then a binary suffix, a decimal suffix, or an exponent. Compiled on first use.
_QUANTITY = (
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,9})?"
)
# An amount no node has, what any larger quantity is taken as: `1e999999999` would
# otherwise be built digit by digit. Kubernetes itself caps a quantity near 2**63.
MOST = 1 << 62
_DECIMAL = "kMGTPE"  # 1000**1 .. 1000**6
_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")  # 1024**1 .. 1024**6
_EXPONENT_LIMIT = 30  # 10**30 is past MOST, 10**-30 below any request


@functools.cache
def _suffixes() -> dict[str, Fraction]:
    # `fractions` (and the `decimal` it imports) is loaded only when a quantity that is
    # not a plain count is read: an offline render, which reads none, does not pay for it.
    from fractions import Fraction

    return {
        "": Fraction(1),
        "n": Fraction(1, 10**9),
        "u": Fraction(1, 10**6),
        "m": Fraction(1, 1000),
        **{s: Fraction(1000**i) for i, s in enumerate(_DECIMAL, start=1)},
        **{s: Fraction(1024**i) for i, s in enumerate(_BINARY, start=1)},
    }


def parse_quantity(value: object) -> Fraction:
    """A resource quantity (a string, or a JSON number) as an exact amount; a ValueError says what is wrong."""
    from fractions import Fraction

    if type(value) is int or type(value) is float:
        return Fraction(value)
    if type(value) is not str:
        raise ValueError(f"a quantity must be a string such as '4', not {describe_value(value)}")
    match = re.fullmatch(_QUANTITY, value)
    if match is None:
        raise ValueError(f"{value!r} is not a quantity (such as 4, 500m or 1Gi)")
    number, suffix = Fraction(match[1]), match[2] or ""
    if suffix in _suffixes():  # "E" and "Ei" are exa and exbi; an exponent has digits
        return number * _suffixes()[suffix]
    exponent = int(suffix[1:])
    if exponent > _EXPONENT_LIMIT:
        return Fraction(MOST if number > 0 else -MOST if number < 0 else 0)
    return number * Fraction(10) ** max(exponent, -_EXPONENT_LIMIT)


def parse_quantity_count(value: object) -> int | None:
    """A whole-device count from a quantity ('4', 4, '1k', '500m'), rounded down; None if it is none."""
    if type(value) is str and len(value) <= 18 and value.isascii() and value.isdigit():
        return int(value)  # what a cluster writes: "8"
    if type(value) is not str and type(value) is not int:
        return None
    try:
        amount = parse_quantity(value)
    except ValueError:
        return None
    return max(0, min(amount.numerator // amount.denominator, MOST))  # a part of a device is none


# The scheduler's units: cpu in thousandths of a core (MilliValue), every other resource in
# whole units (Value: bytes of memory, devices), rounded up, as `kubectl describe node` sums them.
MILLI_RESOURCES = frozenset({"cpu"})


def scheduler_units(value: object, resource: str) -> int:
    """A quantity in the scheduler's units for the resource: '500m' cpu is 500, '1Ki' memory 1024.
    The amounts a cluster writes repeat by the thousand ("100m", "128Mi"), so each is parsed once.
    """
    if type(value) is str or type(value) is int:
        return _units(value, resource in MILLI_RESOURCES)
    return _exact_units(value, resource in MILLI_RESOURCES)


@functools.lru_cache(maxsize=4096)
def _units(value: str | int, milli: bool) -> int:
    return _exact_units(value, milli)


def _exact_units(value: object, milli: bool) -> int:
    amount = parse_quantity(value)
    return math.ceil(amount * 1000 if milli else amount)


def units_text(units: int, resource: str) -> str:
    """An amount in the scheduler's units as a quantity a manifest would write: 1500 cpu is
    '1500m', 2000 is '2'; 2147483648 memory is '2Gi'; a device count is itself."""
    if resource in MILLI_RESOURCES:
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    if units <= 0 or "/" in resource:  # a vendor's devices are counted, not sized
        return str(units)
    for suffixes, base in ((_BINARY, 1024), (_DECIMAL, 1000)):
        for i in range(len(suffixes), 0, -1):
            if units >= base**i and units % base**i == 0:
                return f"{units // base**i}{suffixes[i - 1]}"
    return str(units)
