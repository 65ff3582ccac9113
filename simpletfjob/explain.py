"""--explain: a table on stderr, one row per node, saying whether it is eligible, why not, and its task."""

from __future__ import annotations

from collections.abc import Sequence

from simpletfjob.roles import Task
from simpletfjob.selection import Verdict, breakdown


def explain_table(verdicts: Sequence[Verdict], tasks: Sequence[Task]) -> str:
    """The table, ending with the short breakdown; `tasks` is empty when selection failed."""
    given: dict[str, list[str]] = {}
    for t in tasks:
        where = f" at {t.host}" if t.host != t.node else ""
        given.setdefault(t.node, []).append(f"{t.role} {t.index}{where}")
    rows = [("NODE", "ELIGIBLE", "TASK", "WHY NOT")]
    for v in verdicts:
        name = v.node.name
        if not v.eligible:
            rows.append((name, "no", "-", "; ".join(map(str, v.reasons))))
        elif name in given:
            rows.append((name, "yes", ", ".join(given[name]), ""))
        else:
            rows.append((name, "yes", "-", "not needed (-N)" if tasks else ""))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in rows
    ]
    lines.append(breakdown(verdicts))
    return "\n".join(line.rstrip() for line in lines)
