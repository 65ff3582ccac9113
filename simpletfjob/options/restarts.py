"""What `run` restarts: --restart-on and --restart-exit-codes, which a template header may set too.

runs/classify.py holds the classes these name (a program error, a disruption, a deadline)
and the decision they feed; --max-restarts, which bounds every restart, is `run`'s own.
"""

from __future__ import annotations

from collections.abc import Collection

from simpletfjob.options.table import OneOf, OptionGroup, option

RESTART_ON = ("failure", "disruption")  # --restart-on's choices; the first is the default
_SHOULD = "exit codes from 1 to 255, as 3,42 or 3-5"


def parse_exit_codes(text: str) -> frozenset[int]:
    """'3,42', '3-5', '3,40-42' (spaces allowed): the codes; '' for none. ValueError says what to give.

    An exit code a container fails with is 1 to 255 (0 is success).
    """
    if not text.strip():
        return frozenset()
    codes: set[int] = set()
    for part in text.split(","):
        low, dash, high = (side.strip() for side in part.partition("-"))
        digits = (
            low.isascii() and low.isdigit() and (not dash or (high.isascii() and high.isdigit()))
        )
        if not digits or len(low) > 3 or len(high) > 3:
            raise ValueError(f"must be {_SHOULD}, not {text!r}")
        first, last = int(low), int(high) if dash else int(low)
        if not 1 <= first <= 255 or not 1 <= last <= 255:
            raise ValueError(f"must be {_SHOULD}, not {text!r}")
        if last < first:
            raise ValueError(f"must be {_SHOULD} (a range from low to high), not {text!r}")
        codes.update(range(first, last + 1))
    return frozenset(codes)


def format_exit_codes(codes: Collection[int]) -> str:
    """The codes as --restart-exit-codes takes them, runs joined: '3,40-42'; '' for none."""
    parts: list[str] = []
    ordered = sorted(codes)
    start = 0
    for i, code in enumerate(ordered):
        if i + 1 == len(ordered) or ordered[i + 1] != code + 1:
            first = ordered[start]
            parts.append(str(first) if first == code else f"{first}-{code}")
            start = i + 1
    return ",".join(parts)


class RestartOptions(OptionGroup):
    """Which failures `run` restarts (within --max-restarts); a template header may set them."""

    section = "Run options"

    restart_on: str = option(
        "--restart-on",
        default=RESTART_ON[0],
        show_default=True,
        rule=OneOf(*RESTART_ON),
        header=True,
        help="Which failures --max-restarts restarts. failure: every failure but a deadline (a "
        "program error: exit 1-127; a disruption: a node lost or NotReady, a pod evicted, refused "
        "or deleted, a container killed by a signal, exit 128 or more, OOMKilled included); "
        "disruption: only disruptions, so that a program error ends the run at once.",
    )
    restart_exit_codes: frozenset[int] = option(
        "--restart-exit-codes",
        default=frozenset(),
        type=frozenset,
        parse=parse_exit_codes,
        format=format_exit_codes,
        metavar="CODES",
        header=True,
        help="Exit codes that count as disruptions. As 3,42 or 3-5 (a program that exits 3 to be "
        "restarted from its checkpoint).",
    )
