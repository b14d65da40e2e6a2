"""Which commands a warm start may run, and what python says where it cannot start one.

A job's ``python`` is this interpreter (``interpreter_first``); a warm start
forks the server's already-imported interpreter in its place, so it may run
only what that interpreter would run plainly: a script or ``-m module``, with
no interpreter options (``python_entry``). Where the script is not there, the
fork says what python says, not what the fork server's frames would.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path


def interpreter_first(path: str) -> str:
    """``path`` with this interpreter's directory first: ``python`` in a job's
    command means the interpreter ringleader runs in."""
    return os.pathsep.join([str(Path(sys.executable).parent), path])


SITE = Path(__file__).parent / "_site"
"""The directory of every worker's ``sitecustomize``: how a cold Python rank ends
an unchanged DDP script safely (``_site/sitecustomize.py``)."""


def python_path(given: str | None) -> str:
    """A worker's ``PYTHONPATH``: ``SITE`` first, then what the job's spec gave."""
    return os.pathsep.join([str(SITE), *([given] if given else [])])


def python_entry(command: Sequence[str], path: str) -> tuple[str, ...] | None:
    """What follows the interpreter in ``command``, if it runs this interpreter plainly.

    ``python -m mod args`` gives ``("-m", "mod", *args)``; ``python x.py args``
    gives ``("x.py", *args)``. Interpreter options (``-u``, ``-X ...``, ``-c``)
    or another program give None: those start cold.
    """
    if len(command) < 2:
        return None
    found = shutil.which(command[0], path=path)
    if found is None or not _this_interpreter(found):
        return None
    rest = tuple(command[1:])
    if rest[0] == "-m":
        return rest if len(rest) >= 2 and not rest[1].startswith("-") else None
    return None if rest[0].startswith("-") else rest


def _this_interpreter(path: str) -> bool:
    """Same binary and same directory: another virtualenv's ``python`` links to the
    same binary but sees other packages."""
    here = os.path.dirname(os.path.abspath(sys.executable))
    if os.path.dirname(os.path.abspath(path)) != here:
        return False
    try:
        return os.path.samefile(path, sys.executable)
    except OSError:
        return False


def missing_script(entry: Sequence[str]) -> str | None:
    """What python would say of a script that is not there, if it is not: the job's
    output then reads as a cold start's, with no frames of the launcher's."""
    if entry[0] == "-m" or os.path.isfile(entry[0]):
        return None
    return f"can't open file {os.path.abspath(entry[0])!r}: [Errno 2] No such file or directory"
