"""A script that saves its state on SIGTERM, the way Slurm and torchrun scripts do.

It writes ``term<RANK>`` when the signal arrives and ``saved<RANK>`` a second
later, just before it exits: a test reads both to see the handler ran whole,
before any SIGKILL. ``--deaf`` ignores SIGTERM instead.
"""

import os
import signal
import sys
import time

rank = os.environ.get("RANK", "0")


def on_term(signum: int, _frame: object) -> None:
    with open(f"term{rank}", "w") as f:
        f.write(f"{time.time()}\n")
    time.sleep(1.0)  # saving state takes a while
    with open(f"saved{rank}", "w") as f:
        f.write(f"{time.time()}\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, signal.SIG_IGN if "--deaf" in sys.argv else on_term)
with open(f"up{rank}", "w") as f:
    f.write(f"{os.getpid()}\n")
while True:
    time.sleep(0.1)
