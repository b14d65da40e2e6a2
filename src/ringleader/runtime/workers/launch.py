"""``python -m ringleader.runtime.workers.launch``: the small parent of every worker.

It records its identity (pid and start time) before the worker starts and the
worker's exit status when it ends, in the job's run directory, so a controller
that was restarted meanwhile can still tell a live worker from a dead one and a
clean exit from a crash. It pins the worker to its CPU cores and forwards
SIGTERM/SIGINT. Given ``--uid``, it becomes that user before it touches the
job's directory (``ringleader.runtime.workers.identity``), then appends its output to
the rank's log.

``--warm`` alone: the fork server of warm starts (``ringleader.runtime.workers.warm``),
which imports torch first, then forks such a parent per launch line on stdin;
``--warm --bare``: one that imports nothing first, for programs it ``exec``-s.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from ringleader.runtime.workers.identity import become
from ringleader.runtime.workers.wrapper import (
    die_with_parent,
    log_to,
    publish_pid,
    record_exit,
    run_dir,
    write_atomic,
)


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given in (["--warm"], ["--warm", "--bare"]):
        from ringleader.runtime.workers.warm import serve

        # Unbuffered: a buffered reader could read ahead into launch lines that
        # a forked worker would then inherit.
        stdin = open(0, "rb", buffering=0, closefd=False)  # noqa: SIM115 - for our life
        return serve(stdin, sys.stdout.buffer, preload="--bare" not in given)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-dir", type=Path, required=True)
    parser.add_argument("--generation", type=int, required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--cpus", default="")
    parser.add_argument(
        "--die-with-parent",
        action="store_true",
        help="exit (and take the worker along) when whoever started us dies",
    )
    parser.add_argument("--workdir", help="run the command here (default: the current one)")
    parser.add_argument("--uid", type=int, help="run as this user (the wrapper too)")
    parser.add_argument("--log", type=Path, help="append stdout and stderr here")
    parser.add_argument("--banner", default="", help="a line to start this run's log with")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    if args.uid is not None:
        become(args.uid)
    if args.log is not None:
        log_to(args.log, args.banner)
    # Installed before our pid is published (the controller signals by it): a
    # SIGTERM that comes while the worker starts is held and handed on, not
    # lost with this wrapper, which would leave the stop to wait out its grace.
    pending: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            pending.append(signum)
        else:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    here = run_dir(args.job_dir, args.generation)
    here.mkdir(parents=True, exist_ok=True)
    if not publish_pid(here, args.rank):
        return 1
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    if args.workdir:
        try:
            os.chdir(args.workdir)
        except OSError as err:
            print(
                f"ringleader: workdir {args.workdir}: {err.strerror}", file=sys.stderr, flush=True
            )
            write_atomic(here / f"rank{args.rank}.exit", "127\n")
            return 127
    if args.die_with_parent:
        die_with_parent()
    try:
        child = subprocess.Popen(command, preexec_fn=die_with_parent)
    except OSError as err:
        print(f"ringleader: cannot start {command[0]!r}: {err}", file=sys.stderr, flush=True)
        write_atomic(here / f"rank{args.rank}.exit", "127\n")
        return 127
    for signum in pending:
        child.send_signal(signum)
    code = child.wait()
    record_exit(here, args.rank, code)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
