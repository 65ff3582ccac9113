"""The client's packages registered without running their `__init__`, until someone needs it.

`import kubernetes.client.api_client` runs `kubernetes/__init__.py` first, which imports
every part of the client: its dynamic client (and with it a JSON schema validator), watch,
stream, utils, leader election and informers, about 0.1 s of CPU that simpletfjob never
uses. `kubernetes.utils`'s `__init__` likewise loads its YAML creator and metrics helpers,
where the REST layer needs only its retry and keep-alive modules.

`defer()` puts each of these packages in `sys.modules` as the import system would have
made it (name, path, spec, loader), without running its `__init__`, so that the
submodules simpletfjob imports next load alone. The module's `__getattr__` runs the real
`__init__` the first time anyone asks it for a name it does not have yet (PEP 562): a
later `import kubernetes; kubernetes.watch.Watch()`, `from kubernetes import dynamic` or
`kubernetes.__version__`, by simpletfjob or by the user's own code in the same process
(the Python API in a notebook), finds the whole package, as if it had been imported the
usual way. A package that is already imported (or being imported) is left as it is.

Only the command-line tool defers (`enable()`, from its entry point): its own threads never
ask the client for more than it loaded. In a process of the user's own (the Python API in
a notebook), a thread could import `kubernetes.dynamic` while another runs the deferred
`__init__`, each then waiting for the other's lock; there the client is imported the usual
way.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType

# Parents first: a subpackage is found through its parent's path.
PACKAGES = ("kubernetes", "kubernetes.utils")
_LOCK = threading.RLock()
_ENABLED = [False]


def enable() -> None:
    """Let `defer()` defer: the command-line tool's process (see the module)."""
    _ENABLED[0] = True


def defer(packages: tuple[str, ...] = PACKAGES) -> None:
    """Register each package not imported yet, its `__init__` run on first need; nothing
    unless `enable()` was called."""
    if not _ENABLED[0]:
        return
    with _LOCK:
        for name in packages:
            if name in sys.modules:
                continue
            parent, _, child = name.rpartition(".")
            if parent and parent not in sys.modules:
                return  # (its parent could not be registered: leave the rest to the import system)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or spec.submodule_search_locations is None:
                return  # not installed, or not a package: the import will say so
            module = importlib.util.module_from_spec(spec)
            module.__getattr__ = _loader(module, spec.loader)  # type: ignore[method-assign]
            sys.modules[name] = module
            if parent:
                setattr(sys.modules[parent], child, module)


def _loader(module: ModuleType, loader: object) -> Callable[[str], object]:
    """The module's `__getattr__`: the real `__init__`, run once, then the name asked.

    While the `__init__` runs, its own `from . import part` finds no attribute and imports
    the part; any other thread waits for the `__init__` to end.
    """
    state = {"loading": False, "done": False}

    def __getattr__(name: str) -> object:
        with _LOCK:
            if state["loading"]:  # the real __init__, in this thread, asking for a part
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            if not state["done"]:
                state["loading"] = True
                try:
                    loader.exec_module(module)  # type: ignore[attr-defined]
                finally:
                    state["loading"] = False
                state["done"] = True
                if module.__dict__.get("__getattr__") is __getattr__:
                    del module.__dict__["__getattr__"]
        if name in module.__dict__:
            return module.__dict__[name]
        own = module.__dict__.get("__getattr__")  # the real __init__'s, if it has one
        if own is not None and own is not __getattr__:
            return own(name)
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    return __getattr__
