"""The names a run is known by on the cluster: its labels and annotations, and what a label value may be.

A render puts them on every document (manifest/labels.py); the commands that act on a
run find its objects by them (runs/), and the cluster's pods by the job label (hosts/).
"""

from __future__ import annotations

import re

from simpletfjob.errors import RenderCheckError

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "simpletfjob"  # the managed-by label's value
JOB_LABEL = "simpletfjob/job"
ROLE_LABEL = "simpletfjob/role"
INDEX_LABEL = "simpletfjob/index"
# On every document's metadata (not as a label: nothing selects by it); runs/state.py reads it.
POLICY_ANNOTATION = "simpletfjob/success-policy"
SUCCESS_POLICIES = ("worker0", "all-workers")  # its values
# Beside it on an elastic PyTorch run (--min-workers M): the run trains on while M workers remain.
MIN_WORKERS_ANNOTATION = "simpletfjob/min-workers"
# On a Job of such a run that `run` let go (its pod refused by its node, or its node lost past
# --node-grace; runs/interventions.py): why, and its parallelism is set to 0. status shows it Lost.
LOST_ANNOTATION = "simpletfjob/lost"
# The object's own name, as rendered: what `wait`'s cleanup checks before it deletes. A copy
# made under another name (`kubectl get -o json | kubectl create`) keeps the annotation, so its
# name and the annotation differ: it was not made by apply, and is never deleted as the run's.
NAME_ANNOTATION = "simpletfjob/name"
# On every Job of a run that `run` applied: its restart limit, and how many whole-run restarts
# came before this one (status shows `restarts 1/3`).
MAX_RESTARTS_ANNOTATION = "simpletfjob/max-restarts"
RESTARTS_ANNOTATION = "simpletfjob/restarts"
# Beside them, once progress is reported (runs/progress.py): the restarts in a row that made none.
RESTARTS_WITHOUT_ANNOTATION = "simpletfjob/restarts-without-progress"
# On the deciding Job (runs/reporting.py): the reporting task and the pattern (--progress-task,
# --progress-pattern), run's --stall-timeout in seconds (wait's default), the best step before
# the attempt now running, and a finished run's last progress (written by run and wait).
PROGRESS_TASK_ANNOTATION = "simpletfjob/progress-task"
PROGRESS_PATTERN_ANNOTATION = "simpletfjob/progress-pattern"
STALL_TIMEOUT_ANNOTATION = "simpletfjob/stall-timeout"
PROGRESS_BEST_ANNOTATION = "simpletfjob/progress-best"
PROGRESS_ANNOTATION = "simpletfjob/progress"
# The most --max-restarts may be: a run restarted more often than that has something wrong
# with it that restarting does not mend. Read back, a larger count cannot be right.
MOST_RESTARTS = 1000

# The template value that names a run's objects, as a helm chart's names follow the release
# name: a template that reads it and is given none gets the run's name (plan.name_run).
NAME_VALUE = "name"

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
LABEL_VALUE_RULE = (
    "at most 63 characters: letters, digits, '-', '_' and '.', "
    "starting and ending with a letter or digit"
)


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def check_label_value(value: str, what: str) -> None:
    if not is_label_value(value):
        raise RenderCheckError(
            f"{what} {value!r} is not a valid label value ({LABEL_VALUE_RULE}); use --name"
        )
