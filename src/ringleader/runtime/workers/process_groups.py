"""A warm worker keeps every process group its job destroys, so none is torn down holding the GIL.

The hang this prevents is torch's, and it can meet any process: DDP's C++
``Reducer`` holds its process group. When the model is freed (a local of the
script's ``main()``, as ``main`` returns) after ``destroy_process_group()``
has dropped Python's references, the Reducer drops the group's last one with
the GIL held, and gloo's destructor waits, holding it, for the lock its
worker thread holds while it frees its last all-reduce. Freeing that work
releases the Python object ``backward`` left in its thread-local state (the
autograd context), which needs the GIL. Each waits for the other for ever.

A cold interpreter rarely meets it: the worker usually wins the GIL first.
A warm worker, forked from a server that had built an optimizer, lost that
race in about one run in ten (``bench/ddp_exit.py``), and a loop that frees
DDP models as they finish deadlocks within a few hundred rounds cold or warm
(``tests/data/ddp_exit/teardown_loop.py``).

``destroy_process_group`` is where Python lets go of a group, so a warm
worker's copy keeps each group it destroys until the worker ends with
``os._exit``: the Reducer's release is then never the last, and the gloo
destructor never runs. The group's ``shutdown()`` and every other effect of
the call are torch's own, unchanged.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

KEPT: list[object] = []
"""The process groups this worker's job destroyed, held until ``os._exit``, never freed."""

_MARK = "__ringleader_keeps_groups__"


def keep_destroyed_groups() -> bool:
    """Make ``torch.distributed.destroy_process_group`` keep the groups it destroys.

    Only where ``torch.distributed`` is already imported (the fork server
    preloads it): a job that never imports it has no groups. True if the
    function is now the keeping one.
    """
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is None:
        return False
    original = getattr(c10d, "destroy_process_group", None)
    if original is None or not callable(original):
        return False
    if getattr(original, _MARK, False):
        return True
    keeping = _keeping(c10d, original)
    setattr(c10d, "destroy_process_group", keeping)  # noqa: B010 - a module, typed as one
    dist = sys.modules.get("torch.distributed")
    if dist is not None and getattr(dist, "destroy_process_group", None) is original:
        setattr(dist, "destroy_process_group", keeping)  # noqa: B010
    return True


def _keeping(c10d: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def destroy_process_group(group: Any = None) -> Any:
        KEPT.extend(_let_go(c10d, group))
        return original(group)

    setattr(destroy_process_group, _MARK, True)
    return destroy_process_group


def _let_go(c10d: Any, group: Any) -> list[object]:
    """The groups ``destroy_process_group(group)`` drops: all of them for the default one."""
    world = getattr(getattr(c10d, "GroupMember", None), "WORLD", None)
    if group is not None and group is not world:
        return [group]
    try:
        return list(c10d._world.pg_map)
    except (AttributeError, TypeError):  # another torch's bookkeeping: the default at least
        return [] if world is None else [world]
