"""The limits of a run that the cluster's own controllers carry out: --deadline, --cleanup-after."""

from __future__ import annotations

from simpletfjob.options.rules import format_duration, parse_duration
from simpletfjob.options.table import OptionGroup, option


class LimitOptions(OptionGroup):
    """Limits the cluster's own controllers carry out with no client running (apply and run).

    A template header may set them; a render leaves them out (they are carried out when
    the run is applied: the owner's uid exists only then).
    """

    section = "Run options"

    deadline: float | None = option(
        "--deadline",
        default=None,
        type=float,
        parse=parse_duration,
        format=format_duration,
        metavar="DURATION",
        header=True,
        help="A wall-clock limit for the run. It is activeDeadlineSeconds on every Job, so the "
        "parameter servers stop too; status and wait then say DeadlineExceeded.",
    )
    cleanup_after: float | None = option(
        "--cleanup-after",
        default=None,
        type=float,
        parse=parse_duration,
        format=format_duration,
        metavar="DURATION",
        header=True,
        help="Have the cluster delete the run after this. Once the task that decides success (the "
        "chief, or worker 0) has finished and this long has passed, the cluster deletes the run: "
        "that task's Job owns the run's other Jobs and Services, and has ttlSecondsAfterFinished. "
        "Not under --success-policy all-workers.",
    )
