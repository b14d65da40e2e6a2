"""A native thread asks for the GIL as the script ends, as gloo's does after a last all-reduce.

The main thread keeps the GIL (a 60 s switch interval, and the thread is
started through ``PyDLL``, which does not let go of it), so the thread can
only have it if something before finalization gives it away. It writes
``MARKER`` (argv[1]) when it runs. Run as ``script.py MARKER``.
"""

import ctypes
import sys

import torch.distributed  # noqa: F401 - a job that uses torch.distributed

marker = sys.argv[1]


@ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
def wants_the_gil(_: object) -> None:
    with open(marker, "w") as out:
        out.write("ran\n")


sys.setswitchinterval(60.0)
thread = ctypes.c_ulong()
libc = ctypes.PyDLL(None)
libc.pthread_create(ctypes.byref(thread), None, wants_the_gil, None)
