"""The limits of a run that the cluster's own controllers carry out: --deadline, --cleanup-after."""

from __future__ import annotations

from simpletfjob.options.rules import duration
from simpletfjob.options.table import OptionGroup


class LimitOptions(OptionGroup):
    """Limits the cluster's own controllers carry out with no client running (apply and run).

    A template header may set them; a render leaves them out (they are carried out when
    the run is applied: the owner's uid exists only then).
    """

    section = "Run options"

    deadline: float | None = duration(
        "--deadline",
        default=None,
        header=True,
        help="A wall-clock limit for the run. It is activeDeadlineSeconds on every Job, so the "
        "parameter servers stop too; status and wait then say DeadlineExceeded.",
    )
    cleanup_after: float | None = duration(
        "--cleanup-after",
        default=None,
        header=True,
        help="Have the cluster delete the run after this. Once the task that decides success (the "
        "chief, or worker 0) has finished and this long has passed, the cluster deletes the run: "
        "that task's Job owns the run's other Jobs and Services, and has ttlSecondsAfterFinished. "
        "Not under --success-policy all-workers.",
    )
