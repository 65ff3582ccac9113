"""simpletfjob: render one Kubernetes Job template into the Jobs of a distributed TensorFlow run.

The packages, in the order a render flows through them (each package's own docstring
lists its modules; tests/unit/test_layout.py holds which may import which):

    cli/         the commands: parse, call the layer below, print (the only users of click)
    options/     every option of every command, declared once
    plan/        `plan(options) -> Plan`: nodes judged, tasks seated, documents rendered
    hosts/       nodes, what their pods take, and which of them a role may have
    frameworks/  what a training framework adds: roles, seating, values, options
    template/    finding, reading and rendering a template's text
    manifest/    the rendered documents: checked, labelled, Services added
    runs/        a run on the cluster: found, applied, followed, deleted
    kube/        the Kubernetes API, as kubectl reaches it (the only user of kubernetes)

and, below them all, modules that import nothing heavy: errors.py, identity.py (a run's
label and annotation names), streams.py, inputs.py (reading input files), yamlload.py,
quantity.py, output.py (writing the documents) and tasks.py (a run's tasks and their seats).

The public Python API (docs/python.md) is this package's names: `render`, `Client` and
what it returns, and the errors. They are imported when first read (PEP 562), so that
`import simpletfjob` costs almost nothing and imports none of click, jinja2, yaml or
kubernetes, and the command line starts as fast as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simpletfjob._version import __version__

# Each public name, and the module it lives in.
_ERRORS = "simpletfjob.errors"
_PUBLIC = {
    "render": "simpletfjob.api.render",
    "Client": "simpletfjob.api.client",
    "Run": "simpletfjob.api.client",
    "RunStatus": "simpletfjob.api.results",
    "TaskStatus": "simpletfjob.api.results",
    "Progress": "simpletfjob.api.results",
    "Outcome": "simpletfjob.api.results",
    "LogLine": "simpletfjob.api.results",
    "State": "simpletfjob.api.results",
    "Cause": "simpletfjob.api.results",
    "CauseKind": "simpletfjob.api.results",
    "Error": _ERRORS,
    "SimpleTFJobError": _ERRORS,
    "UsageError": _ERRORS,
    "InputError": _ERRORS,
    "TemplateError": _ERRORS,
    "RenderCheckError": _ERRORS,
    "SelectionError": _ERRORS,
    "ClusterError": _ERRORS,
    "OutputError": _ERRORS,
    "SchemaError": _ERRORS,
    "NoRunError": _ERRORS,
    "RunFailed": _ERRORS,
    "TimedOut": _ERRORS,
}
__all__ = ["__version__", *_PUBLIC]

if TYPE_CHECKING:
    from simpletfjob.api.client import Client as Client
    from simpletfjob.api.client import Run as Run
    from simpletfjob.api.render import render as render
    from simpletfjob.api.results import Cause as Cause
    from simpletfjob.api.results import CauseKind as CauseKind
    from simpletfjob.api.results import LogLine as LogLine
    from simpletfjob.api.results import Outcome as Outcome
    from simpletfjob.api.results import Progress as Progress
    from simpletfjob.api.results import RunStatus as RunStatus
    from simpletfjob.api.results import State as State
    from simpletfjob.api.results import TaskStatus as TaskStatus
    from simpletfjob.errors import ClusterError as ClusterError
    from simpletfjob.errors import Error as Error
    from simpletfjob.errors import InputError as InputError
    from simpletfjob.errors import NoRunError as NoRunError
    from simpletfjob.errors import OutputError as OutputError
    from simpletfjob.errors import RenderCheckError as RenderCheckError
    from simpletfjob.errors import RunFailed as RunFailed
    from simpletfjob.errors import SchemaError as SchemaError
    from simpletfjob.errors import SelectionError as SelectionError
    from simpletfjob.errors import SimpleTFJobError as SimpleTFJobError
    from simpletfjob.errors import TemplateError as TemplateError
    from simpletfjob.errors import TimedOut as TimedOut
    from simpletfjob.errors import UsageError as UsageError


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'simpletfjob' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # read once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
