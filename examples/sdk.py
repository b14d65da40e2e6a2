"""Submit a job from Python, wait for it, and read its log and the scheduler's metrics.

    RINGLEADER_URL=http://127.0.0.1:8765 python examples/sdk.py

The token is found as the CLI finds it (RINGLEADER_TOKEN, `ringleader login`,
or the admin token of a server you started on this machine).
"""

from __future__ import annotations

import sys

from ringleader import Client
from ringleader.client import ApiError


def main() -> int:
    with Client(timeout=30, retries=3) as rl:
        me = rl.whoami()
        print(f"{me.name} at {rl.url}; {rl.cluster().gpus} GPUs")
        try:
            job = rl.submit(
                {
                    "name": "sdk-example",
                    "command": [sys.executable, "-c", "print('hello from a ringleader job')"],
                    "gpus": 1,
                }
            )
        except ApiError as err:
            for field, reason in err.problems:
                print(f"refused: {field}: {reason}")
            return 2
        done = rl.wait(job.id, timeout=300)
        print(f"{done.id} {done.state}: {rl.logs(done.id, tail=1).strip()}")
        if me.admin:
            waits = [
                line
                for line in rl.metrics().splitlines()
                if line.startswith("ringleader_queue_wait_seconds_count")
            ]
            print("metrics:", *waits)
        return 0 if done.state == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
