"""The REST API: submit, list, inspect, cancel, read logs; users and their tokens.

Handlers only read the store or record a request in it; the controller does
the work. Bad input gets 422 with ``{"detail": [{"field", "reason"}]}``, the
same field names the CLI prints, and never reaches the controller.

Every endpoint but ``GET /health`` needs a token (``ringleader.runtime.http.access``).
A user sees and changes only their own jobs: another user's job is answered
404, as if it did not exist. An admin sees every job.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi import Path as FastPath
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from ringleader import __version__
from ringleader.job.records import strict_json
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.http import dashboard, output, schemas
from ringleader.runtime.http.access import Admin, BrowserGuard, JobId, Me, Named, job_named
from ringleader.runtime.http.browser import Sessions
from ringleader.runtime.http.usage import UsageHistory
from ringleader.runtime.state import presentation
from ringleader.runtime.state.errors import DamagedRow, disk_full
from ringleader.runtime.state.eta import eta_s
from ringleader.runtime.state.queries import PageQuery
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.spec import JobSpec, SpecError, parse_spec
from ringleader.runtime.state.store import Store
from ringleader.runtime.state.users import User, UserError, Users
from ringleader.runtime.workers.gpus import device_types, speeds_shown

MAX_BODY = 1 << 20


def _problems(problems: list[tuple[str, str]]) -> JSONResponse:
    detail = [{"field": f, "reason": r} for f, r in problems]
    return JSONResponse(status_code=422, content={"detail": detail})


async def _json_body(request: Request) -> tuple[Any, JSONResponse | None]:
    """The request's JSON, or the 415/422 that says why there is none.

    Only ``Content-Type: application/json`` is read: a web page can send a
    ``text/plain`` POST to any local port without asking, never a JSON one.
    The body is read in chunks and dropped once over the limit, so an
    oversized request costs the server no more than the limit in memory.
    Duplicate keys and the non-JSON constants ``NaN`` and ``Infinity`` are
    refused, not resolved silently.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        detail = [
            {
                "field": "(content-type)",
                "reason": f"{kind or 'none'} given; send the body as JSON with "
                "Content-Type: application/json",
            }
        ]
        return None, JSONResponse(status_code=415, content={"detail": detail})
    too_big = _problems([("(body)", "over the 1 MiB limit for a request")])
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return None, too_big
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None, too_big
    try:
        # UTF-8 only, as RFC 8259 asks: no byte-order mark, no UTF-16 guessed from the bytes.
        text = bytes(body).decode("utf-8")
        data = strict_json(text)
        if (where := _not_unicode(data)) is not None:
            raise ValueError(f"{where} holds a lone surrogate escape (\\ud800…), not text")
        return data, None
    except (ValueError, UnicodeDecodeError) as err:
        return None, _problems([("(body)", f"not valid JSON: {err}")])
    except RecursionError:
        return None, _problems([("(body)", "not valid JSON: nested too deeply")])


def _not_unicode(value: Any, where: str = "(body)") -> str | None:
    """Where ``value`` holds a string that has no UTF-8 form, if anywhere.

    JSON's ``\\ud800`` escapes decode to lone surrogates, which no reply,
    database or terminal can carry: stored, such a job could not be shown.
    """
    if isinstance(value, str):
        return None if value.isascii() or _encodes(value) else where
    items: Iterable[tuple[str, str | None, Any]] = ()
    if isinstance(value, dict):
        items = ((f"{where}.{k}" if _encodes(k) else where, k, v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{i}]", None, v) for i, v in enumerate(value))
    for place, key, item in items:
        if key is not None and not _encodes(key):
            return str(place)
        if (bad := _not_unicode(item, place)) is not None:
            return bad
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


PAGE, MAX_PAGE = 500, 1000
"""Jobs per listing page by default, and at most (summaries are ~0.5 kB each)."""
STATES = frozenset(s.value for s in State)
Order = Literal["asc", "desc"]


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

    @app.exception_handler(RequestValidationError)
    async def bad_query(request: Request, err: Exception) -> JSONResponse:
        # FastAPI's own checks (query and path parameters) answer in the
        # project's shape too: field and reason.
        errors = err.errors() if isinstance(err, RequestValidationError) else []
        return _problems(
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

    @app.get("/health", response_model=None, responses={200: {"model": schemas.Health}})
    def health() -> dict[str, Any]:
        status: dict[str, Any] = {
            "ok": True,
            "version": __version__,
            "policy": controller.config.policy.name,
        }
        if store.damaged:
            status["damaged_jobs"] = len(store.damaged)  # which and why: GET /jobs, as an admin
        return status

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(me: Me) -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = with_request_bodies(app.openapi())
        return app.openapi_schema

    @app.get("/whoami", response_model=None, responses={200: {"model": schemas.User}})
    def whoami(me: Me) -> dict[str, Any]:
        """The user the token names, and their bounds."""
        return me.public()

    @app.get("/users", response_model=None, responses={200: {"model": list[schemas.User]}})
    def list_users(me: Admin) -> list[dict[str, Any]]:
        """Every user (admin only). Tokens are never shown again."""
        return [u.public() for u in users.all()]

    @app.post(
        "/users",
        status_code=201,
        response_model=None,
        responses={201: {"model": schemas.UserWithToken}},
    )
    async def add_user(request: Request, me: Admin) -> JSONResponse | dict[str, Any]:
        """Make a user (admin only); the reply holds their token, shown this once."""
        data, bad = await _json_body(request)
        if bad is not None:
            return bad
        fields = {"name", "admin", "uid", "quota_gpus", "priority_max"}
        if not isinstance(data, dict) or "name" not in data or set(data) - fields:
            return _problems([("(body)", f"expected an object with name and any of {fields}")])
        for key in ("uid", "quota_gpus", "priority_max"):
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                return _problems([(key, f"{str(value)[:40]!r} is not an integer")])
        if not isinstance(data.get("admin", False), bool):
            return _problems([("admin", "true or false")])
        try:
            user, token = users.add(
                data["name"],
                admin=data.get("admin", False),
                uid=data.get("uid"),
                quota_gpus=data.get("quota_gpus"),
                priority_max=data.get("priority_max"),
            )
        except UserError as err:
            return _problems([(err.field, err.reason)])
        return user.public() | {"token": token}

    @app.delete(
        "/users/{name}",
        response_model=None,
        responses={200: {"model": schemas.Removed}, 409: {"model": schemas.Message}},
    )
    def remove_user(name: Annotated[str, FastPath(max_length=100)], me: Admin) -> dict[str, Any]:
        """Remove a user and their token (admin only); their jobs stay."""
        if name == me.name:
            raise HTTPException(409, detail="an admin cannot remove themself")
        if not users.remove(name):
            raise HTTPException(404, detail=f"no user {name!r}")
        return {"removed": name}

    @app.post("/users/{name}/token", response_model=None, responses={200: {"model": schemas.Token}})
    def rotate_token(name: Annotated[str, FastPath(max_length=100)], me: Me) -> dict[str, Any]:
        """A new token for ``name`` (an admin's, or the caller's own); the old one stops."""
        if name != me.name and not me.admin:
            raise HTTPException(404, detail=f"no user {name!r}")
        token = users.new_token_for(name)
        if token is None:
            raise HTTPException(404, detail=f"no user {name!r}")
        return {"name": name, "token": token}

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {}}}},
    )
    def metrics(me: Admin) -> Response:
        """Prometheus' text format (admins only: the series name every user's jobs)."""
        return Response(controller.telemetry.text(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/cluster", response_model=None, responses={200: {"model": schemas.Cluster}})
    def cluster(me: Me) -> dict[str, Any]:
        nodes = [
            {"name": n.name, "gpus": n.gpus, "gpu_type": n.gpu_type}
            for n in controller.cluster.nodes
        ]
        gpus = controller.cluster.capacity
        return {"executor": controller.executor.name, "gpus": gpus, "nodes": nodes}

    @app.post(
        "/jobs", status_code=201, response_model=None, responses={201: {"model": schemas.Job}}
    )
    async def submit(request: Request, me: Me) -> JSONResponse | dict[str, Any]:
        """Queue a job for the caller: its ``user`` is the token's, never the spec's."""
        data, bad = await _json_body(request)
        if bad is not None:
            return bad
        if isinstance(data, dict):
            if "user" in data and data["user"] != me.name:
                return _problems(
                    [("user", f"a job is its submitter's: yours is {me.name!r}; leave user out")]
                )
            data = data | {"user": me.name}
        try:
            spec = parse_spec(data, cluster=controller.cluster)
        except SpecError as err:
            return _problems(err.problems)
        if spec.priority > me.priority_max:
            return _problems([("priority", _above(spec.priority, me))])
        if spec.workdir is not None and not _is_dir(spec.workdir):
            return _problems([("workdir", f"{spec.workdir[:200]}: no such directory here")])
        row = store.add(spec)
        controller.poke()
        return presentation.public(row)

    @app.get("/jobs", response_model=None, responses={200: {"model": list[schemas.JobSummary]}})
    def jobs(
        me: Me,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Jobs per page.")] = PAGE,
        cursor: Annotated[
            int | None,
            Query(ge=0, le=output.MAX_OFFSET, description="X-Next-Cursor of the page before."),
        ] = None,
        state: Annotated[
            str | None,
            Query(max_length=200, description="Comma-separated states, e.g. queued,running."),
        ] = None,
        user: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
        order: Annotated[Order, Query(description="Submission order or newest first.")] = "asc",
    ) -> JSONResponse:
        """Job summaries (no spec: fetch one job for it), a page at a time.

        When more jobs match, the ``X-Next-Cursor`` header holds the cursor
        for the next page. A damaged row is listed with state ``damaged`` and
        why: a job never just vanishes from listings.
        """
        states = tuple(s for s in (state or "").split(",") if s)
        if unknown := [s for s in states if s not in STATES]:
            return _problems(
                [("state", f"{unknown[0][:40]!r} is not one of {', '.join(sorted(STATES))}")]
            )
        if not me.admin:
            if user not in (None, me.name):
                return JSONResponse([])  # another user's jobs are not to be seen
            user = me.name
        query = PageQuery(limit, cursor, states, user, newest_first=order == "desc")
        rows, after = store.page(query)
        headers = {} if after is None else {"X-Next-Cursor": str(after)}
        listed = [_with_reason(presentation.summary(row), controller, row) for row in rows]
        return JSONResponse(listed, headers=headers)

    def _get(job_id: str) -> JobRow:
        row = store.get(job_id)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        return row

    @app.get("/jobs/{job_id}", response_model=None, responses=_ONE_JOB)
    def show(job_id: Named) -> dict[str, Any]:
        try:
            row = _get(job_id)
            public: dict[str, Any] = _with_reason(presentation.public(row), controller, row)
            public["type_speeds"] = speeds_shown(controller.cluster, row.type_observations)
        except DamagedRow as err:
            public = presentation.public(err)
        return public | {"events": store.events(job_id)}

    @app.delete("/jobs/{job_id}", response_model=None, responses=_CHANGED_JOB)
    def cancel(job_id: Named) -> dict[str, Any]:
        row = store.request_cancel(job_id)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        controller.poke()
        return presentation.public(row)

    @app.patch("/jobs/{job_id}", response_model=None, responses=_CHANGED_JOB)
    async def change(job_id: JobId, request: Request, me: Me) -> JSONResponse | dict[str, Any]:
        """Change what may change while a job runs: today its ``priority``.

        The body is checked before the job is looked up: a request of the wrong
        type is refused (415) whatever job it names.
        """
        data, bad = await _json_body(request)
        if bad is not None:
            return bad
        if not isinstance(data, dict) or set(data) != {"priority"}:
            return _problems([("(body)", 'expected {"priority": N}; nothing else can change')])
        priority = data["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int):
            return _problems([("priority", f"{priority!r} is not an integer")])
        if not -1000 <= priority <= 1000:
            return _problems([("priority", f"{priority} is outside -1000..1000")])
        if priority > me.priority_max:
            return _problems([("priority", _above(priority, me))])
        job_id = job_named(request, job_id, me)
        row = store.set_priority(job_id, priority)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        controller.poke()
        return presentation.public(row)

    return app


_ONE_JOB: dict[int | str, dict[str, Any]] = {
    200: {"model": schemas.JobWithEvents},
    409: {"model": schemas.Message, "description": "An id prefix that begins several jobs."},
}
_CHANGED_JOB: dict[int | str, dict[str, Any]] = {
    200: {"model": schemas.Job},
    409: {"model": schemas.Message, "description": "Several jobs, or a damaged row."},
}
REQUEST_BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("/jobs", "post"): JobSpec,
    ("/jobs/{job_id}", "patch"): schemas.PriorityChange,
    ("/users", "post"): schemas.NewUser,
}
"""Bodies the handlers parse by hand (strictly: ``_json_body``), described for OpenAPI."""


def with_request_bodies(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with each hand-parsed body's schema, its models under ``components``,
    and every refusal documented as the JSON it is."""
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for (path, method), model in REQUEST_BODIES.items():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
        ref = {"$ref": f"#/components/schemas/{model.__name__}"}
        doc["paths"][path][method]["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": ref}},
        }
    # Every operation but the health check wants a bearer token (runtime/http/access.py).
    doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    doc["security"] = [{"bearer": []}]
    doc["paths"]["/health"]["get"]["security"] = []
    # A route whose success is text (a log) still refuses in JSON, as every route does.
    for ops in doc["paths"].values():
        for op in ops.values():
            for code, response in op.get("responses", {}).items():
                content = response.get("content", {})
                if code[0] in "45" and "text/plain" in content:
                    content.setdefault("application/json", content.pop("text/plain"))
    return doc


LIVE = frozenset({"queued", "running", "suspended"})


def _with_reason(
    job: dict[str, Any], controller: Controller, row: JobRow | DamagedRow
) -> dict[str, Any]:
    """``job`` with why it waits or has its size, as of the last decision
    (``spine.reasons``): in words, as a code, and with the numbers behind them;
    and when it should end (``runtime.eta``)."""
    why = controller.reasons.get(job["id"]) if job["state"] in LIVE else None
    eta = eta_s(row) if isinstance(row, JobRow) else None
    turn = None
    if why is not None and why.turn_at is not None:
        turn = round(max(why.turn_at - time.time(), 0.0), 1)  # counted at this request
    sizing = None
    if why is not None and why.sizing is not None:
        sizing = why.sizing._asdict() | {"gain_per_gpu": why.sizing.gain_per_gpu}
    return job | {
        "gpu_types": device_types(controller.cluster, job.get("devices") or ()),
        "reason": why and why.text,
        "reason_code": why and why.code,
        "turn_in_s": turn,
        "sizing": sizing,
        "eta_s": eta,
    }


def _above(priority: int, me: User) -> str:
    return (
        f"{priority} is above {me.priority_max}, the most user {me.name!r} may set; "
        "an admin can raise it (ringleader users add --priority-max)"
    )


def _is_dir(path: str) -> bool:
    try:
        return Path(path).is_dir()
    except OSError:  # a name too long, a loop of links: not a directory we can use
        return False
