"""What a long history costs the controller: reading its jobs with 5,000 finished ones.

The controller reads the job table three times a tick (every 0.5 s, every
10 ms while a GPU changes hands). It used to read and validate every row ever
submitted; it now reads the unfinished ones (``Store.unfinished``, an index on
``state``). This fills a database with 5,000 finished and 20 queued jobs and
times both reads, 30 times each. Writes bench/results/store-history.json.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from _common import stamp
from ringleader.runtime.state.rows import State
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store

OUT = Path(__file__).parent / "results" / "store-history.json"
FINISHED, QUEUED, REPEAT = 5_000, 20, 30


def _times(read: object) -> list[float]:
    out = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        read()  # type: ignore[operator]
        out.append((time.perf_counter() - started) * 1000)
    return sorted(out)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "ringleader.db")
        spec = parse_spec({"name": "old", "command": ["true"], "epochs": 3})
        for _ in range(FINISHED):
            row = store.add(spec)
            row.state = State.SUCCEEDED
            store.save(row, "succeeded")
        for _ in range(QUEUED):
            store.add(spec)
        every = _times(store.all)
        unfinished = _times(store.unfinished)
        assert len(store.unfinished()) == QUEUED
        store.close()
    report = {
        **stamp("python bench/store_history.py"),
        "finished_jobs": FINISHED,
        "unfinished_jobs": QUEUED,
        "all_ms": {"median": round(statistics.median(every), 2), "max": round(every[-1], 2)},
        "unfinished_ms": {
            "median": round(statistics.median(unfinished), 2),
            "max": round(unfinished[-1], 2),
        },
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
