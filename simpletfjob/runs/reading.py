"""What a followed run keeps of each Job and pod: each is cut, as it is read, of what no
reader of a run reads.
"""

from __future__ import annotations

import functools
from typing import Any

# What of a container no reader of a run reads: what it runs and its variables' values, but
# for a Job the values of the frameworks' own variables, from which its run's tasks and
# framework are read (objects.named_tasks: a deciding Job that is gone is still named by the
# others). A pod's are all cut (the container holding a framework's variables is found by
# their names, which stay). At 1000 TensorFlow tasks, each pod's cluster spec names every
# host: 12 KB a pod.
_UNREAD = ("command", "args")
_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")


def lean_job(job: dict[str, Any]) -> None:
    """Cut in place, from a Job as it is read, what no reader of a run reads: its pod
    template's containers' command and args, and its variables' values but the frameworks'."""
    spec = job.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    if isinstance(template, dict):
        _lean(template, _placed())


def lean_pod(pod: dict[str, Any]) -> None:
    """Cut in place, from a pod as it is read, what no reader of a run reads: each container's
    command, args and env values. The objects a run is judged from are kept for as long as it
    is followed; every one of them is cut alike, so two readings of one object still compare
    equal exactly when the rest of them does."""
    _lean(pod, frozenset())


@functools.cache
def _placed() -> frozenset[str]:
    """The names of every framework's own variables (frameworks' env_names)."""
    from simpletfjob.frameworks import FRAMEWORKS, framework

    return frozenset(name for fw in FRAMEWORKS for name in framework(fw).env_names)


def _lean(pod: dict[str, Any], keep: frozenset[str]) -> None:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    for key in _CONTAINERS:
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else ():
            if not isinstance(container, dict):
                continue
            for word in _UNREAD:
                container.pop(word, None)
            env = container.get("env")
            for variable in env if isinstance(env, list) else ():
                if isinstance(variable, dict) and variable.get("name") not in keep:
                    variable.pop("value", None)
