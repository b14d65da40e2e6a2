"""The database file watched under a running server, and what to say when it goes.

SQLite goes on writing to the file it opened after the path stops naming it;
a server that noticed stops rather than schedule from a file nobody can see,
and says in one line what the operator does next.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import uvicorn

from ringleader.runtime.control.controller import Controller
from ringleader.runtime.state.store import Store

DB_CHECK_S = 1.0
"""How often a running server checks that its database file is still the one it opened."""


def lost_database(path: Path, what: str, rescued: Path | None) -> str:
    """One line: what happened to the database and what the operator does next."""
    if rescued is not None:
        fix = f"its last state is saved in {rescued}: move that to {path} (or restore a backup)"
    else:
        fix = f"restore {path} from a backup"
    if what != "deleted":
        fix = f"move the new file aside, then {fix}"
    return (
        f"{path} was {what} while the server ran, so it stopped rather than schedule from a "
        f"file nobody can see; running jobs carry on. To go on: {fix}, then start the server "
        "again (it adopts the running jobs)"
    )


async def watch_database(store: Store, server: uvicorn.Server, controller: Controller) -> None:
    """Stop the server soon after its database file is deleted or replaced.

    SQLite would go on writing to the file it opened, which nobody else can
    see any more: jobs submitted meanwhile would be lost, and the next server
    would start on another file and forget every job. Stopping leaves the
    workers running (they have their own sessions) for the next server.
    """
    while (what := await asyncio.to_thread(store.lost)) is None:
        await asyncio.sleep(DB_CHECK_S)
    logging.getLogger("ringleader").error(
        "%s was %s while the server ran: stopping; running jobs carry on", store.path, what
    )
    controller.stop()
    server.should_exit = True
