"""Let native threads that wait for the GIL have it before the interpreter finalizes.

The abort this prevents is torch's, and it meets cold interpreters under load
(``terminate called without an active exception``, status -6): a gloo worker
thread that has just finished a job's last all-reduce frees it, and freeing it
releases a Python object, so it asks for the GIL. If the CPU is busy, that
thread may not run again before the main thread has entered
``Py_FinalizeEx``; a thread that takes the GIL then is ended with
``pthread_exit``, whose unwinding through gloo's ``noexcept`` destructor calls
``std::terminate``. Two rank exits in 17 ended so on the Slurm lab beside
three busy loops.

``drain`` runs as the last atexit handler, while the interpreter is still
whole: it sleeps (so gives the GIL away) for as long as a thread state exists
that no Python thread owns, the sign of a native thread inside or waiting for
the GIL, up to a bound.

Standard library only: cold workers load it by path (``workers._site``), in
whatever Python the job runs.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time

LIMIT_S = 1.0
"""The longest an exit waits for native threads: a library that keeps a thread
state for ever costs each exit this, never a hang."""


def foreign_states() -> int | None:
    """Thread states no Python thread owns (native threads in or waiting for the GIL);
    None where this Python does not let us count them."""
    try:
        api = ctypes.pythonapi
        api.PyInterpreterState_Get.restype = ctypes.c_void_p
        api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
        api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
        api.PyThreadState_Next.restype = ctypes.c_void_p
        api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
        states = 0
        state = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
        while state:
            states += 1
            state = api.PyThreadState_Next(state)
    except (AttributeError, OSError):
        return None
    owned = len(threading._active) + len(threading._limbo)  # type: ignore[attr-defined]
    return max(states - owned, 0)


def drain(limit_s: float = LIMIT_S) -> float:
    """Give the GIL away until no native thread wants it (at most ``limit_s``);
    the seconds waited. Only where torch.distributed was imported: nothing else
    here is known to need it."""
    if "torch.distributed" not in sys.modules:
        return 0.0
    start = time.monotonic()
    time.sleep(0.001)  # one hand-over at least, even where states cannot be counted
    while time.monotonic() - start < limit_s:
        left = foreign_states()
        if not left:
            break
        time.sleep(0.002)
    return time.monotonic() - start
