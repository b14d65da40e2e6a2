"""What a cold Python worker does before the job's script, so an unchanged DDP script ends.

Every worker's ``PYTHONPATH`` starts with this directory (``worker_env``), so
any Python a rank starts, however deep under ``sh -c`` or ``torchrun``, runs
this first, as its ``sitecustomize``. It does for a cold interpreter what the
fork server does for a warm one:

* ``destroy_process_group`` keeps the groups it destroys
  (``workers.process_groups``), set when torch.distributed is imported;
* the last atexit handler gives the GIL to native threads still waiting for
  it (``workers.gil_waiters``).

Then it leaves ``sys.path`` and runs the ``sitecustomize`` it shadows, if any.
Standard library only, and the two modules are loaded by path: the job's
Python need not have ringleader installed.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_C10D = "torch.distributed.distributed_c10d"


def _load(name: str) -> ModuleType | None:
    path = os.path.join(os.path.dirname(_HERE), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_ringleader_{name}", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (OSError, SyntaxError, ImportError):  # another ringleader's tree, or none
        return None
    sys.modules[spec.name] = module
    return module


class _KeepGroups(importlib.abc.MetaPathFinder):
    """Wraps the loader of torch's c10d module so that, once loaded, its
    ``destroy_process_group`` keeps the groups it destroys."""

    def __init__(self, keep: Any) -> None:
        self.keep = keep

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _C10D:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module
        keep = self.keep

        def exec_module(module: ModuleType) -> None:
            run(module)
            keep()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _install() -> None:
    waiters = _load("gil_waiters")
    if waiters is not None:
        atexit.register(waiters.drain)  # the first registered runs last
    groups = _load("process_groups")
    if groups is not None:
        sys.meta_path.insert(0, _KeepGroups(groups.keep_destroyed_groups))


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows, as ``site`` would have."""
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    this = sys.modules.pop("sitecustomize")
    try:
        import sitecustomize  # type: ignore[import-not-found]  # noqa: F401 - the next one, if any
    except ImportError as error:
        sys.modules["sitecustomize"] = this  # what ``site`` takes back from the import
        if error.name != "sitecustomize":
            raise


_install()
_chain()
