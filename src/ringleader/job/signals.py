"""Signals inside a training script: SIGTERM a stop at the next minibatch boundary,
SIGTSTP no stop at all once the scheduler has suspended the job.

torchrun's scale-down, Slurm's preemption and our own stop before a job's
first progress line all send SIGTERM. Taken as control.json's stop, at the
next minibatch boundary, the checkpoint written is a whole one; a script
with a handler of its own keeps it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator


class StopSignal:
    """Whether SIGTERM came, once ``take`` has made it ours."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False

    def _handler(self, _signum: int, _frame: object) -> None:
        self.seen = True

    def take(self) -> None:
        """Take SIGTERM for a stop at the next boundary, unless the script has its own handler."""
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers; SIGTERM then ends the process
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, self._handler)

    @contextlib.contextmanager
    def ends_process(self) -> Iterator[None]:
        """While the ranks meet, a SIGTERM ends this process, as it would without us.

        There is nothing to save before the first step, and torch's rendezvous
        retries its connect in C++ when a signal interrupts it, so a handler
        that waits for the next boundary would never run: a rank whose peers
        were stopped would wait there until killed after the stop's grace.
        A SIGTERM that came before (while the model was built) ends it now.
        """
        ours = signal.getsignal(signal.SIGTERM) == self._handler
        if not ours:
            yield
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if self.seen:
            os.kill(os.getpid(), signal.SIGTERM)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, self._handler)


def run_through_sigtstp() -> None:
    """From the job's first suspend on, SIGTSTP no longer stops the process.

    Slurm's suspend of a gang the library has suspended sends SIGTSTP, waits
    two seconds, then SIGSTOP, and holds back a resume asked meanwhile.
    Stopped at the SIGTSTP, a rank whose turn came back within that second
    waited it out; running, it reads the resume from control.json
    at once, and is stopped only from the SIGSTOP to the held-back SIGCONT,
    which follows it. A rank has no terminal for SIGTSTP to stop it from;
    a script's own handler is kept.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set handlers
    if signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL:
        signal.signal(signal.SIGTSTP, signal.SIG_IGN)
