"""The REST API: submit, list, inspect, cancel, read logs; users and their tokens.

Handlers only read the store or record a request in it; the controller does
the work. Bad input gets 422 with ``{"detail": [{"field", "reason"}]}``, the
same field names the CLI prints, and never reaches the controller.

Every endpoint but ``GET /health`` needs a token (``ringleader.runtime.http.access``).
A user sees and changes only their own jobs: another user's job is answered
404, as if it did not exist. An admin sees every job.

This module puts the app together; each resource's routes are in their own
module (``jobs``, ``output``, ``users``, ``status``, ``dashboard``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ringleader import __version__
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.http import dashboard, jobs, output, schemas, status
from ringleader.runtime.http import users as user_routes
from ringleader.runtime.http.access import BrowserGuard, Me
from ringleader.runtime.http.bodies import problems
from ringleader.runtime.http.browser import Sessions
from ringleader.runtime.http.openapi import with_request_bodies
from ringleader.runtime.http.usage import UsageHistory
from ringleader.runtime.state.errors import DamagedRow, disk_full
from ringleader.runtime.state.store import Store
from ringleader.runtime.state.users import Users


def create_app(
    store: Store, controller: Controller, users: Users, names: frozenset[str]
) -> FastAPI:
    """The API over ``store``, answering requests whose ``Host`` is one of ``names``."""
    app = FastAPI(
        title="ringleader",
        version=__version__,
        description="Scheduler for deep-learning training jobs on shared GPU clusters.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # served below, to callers with a token
        responses=schemas.ERRORS,
    )
    app.state.store = store  # for job_named
    app.state.users = users  # for caller
    app.state.controller = controller
    app.state.sessions = Sessions()  # dashboard sign-ins (runtime/http/browser.py)
    app.state.usage = UsageHistory()  # sampled by the server (runtime/http/usage.py)
    app.include_router(dashboard.router(app.state.sessions, app.state.usage))
    app.include_router(output.router(store, controller))
    app.add_middleware(BrowserGuard, names=names)
    _refusals(app, store)
    app.include_router(status.health_router(store, controller))

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(me: Me) -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = with_request_bodies(app.openapi())
        return app.openapi_schema

    app.include_router(user_routes.router(users))
    app.include_router(status.router(controller))
    app.include_router(jobs.router(store, controller))
    return app


def _refusals(app: FastAPI, store: Store) -> None:
    """Answer FastAPI's own checks, damaged rows and a full disk in the project's shape."""

    @app.exception_handler(RequestValidationError)
    async def bad_query(request: Request, err: Exception) -> JSONResponse:
        # FastAPI's own checks (query and path parameters) answer in the
        # project's shape too: field and reason.
        errors = err.errors() if isinstance(err, RequestValidationError) else []
        return problems(
            [(str(e["loc"][-1]) if e["loc"] else "(request)", str(e["msg"])) for e in errors]
        )

    @app.exception_handler(DamagedRow)
    async def damaged(request: Request, err: Exception) -> JSONResponse:
        # The job exists but its row cannot be read: nothing can be changed
        # until an operator mends it, which the message says how to do.
        return JSONResponse(status_code=409, content={"detail": str(err)})

    @app.exception_handler(sqlite3.OperationalError)
    @app.exception_handler(OSError)
    async def full_disk(request: Request, err: Exception) -> JSONResponse:
        # 507, saying which disk: the request was fine and can be sent again
        # once an operator has made room. Any other such error is a bug: 500.
        if not disk_full(err):
            raise err
        detail = (
            f"the disk holding the state dir {store.path.parent} is full, so nothing was "
            "stored; an operator must free space there, then send the request again"
        )
        return JSONResponse(status_code=507, content={"detail": detail})
