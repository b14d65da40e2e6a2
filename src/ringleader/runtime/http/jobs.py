"""``/jobs``: submit, list a page, inspect, cancel, and change a job's priority.

A user sees and changes only their own jobs: another user's job is answered
404, as if it did not exist (``access.job_named``). An admin sees every job.
Each job is shown with why it waits or has its size, as of the last decision.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from ringleader.runtime.control.controller import Controller
from ringleader.runtime.http import output, schemas
from ringleader.runtime.http.access import JobId, Me, Named, job_named
from ringleader.runtime.http.bodies import json_body, problems
from ringleader.runtime.state import presentation, wording
from ringleader.runtime.state.errors import DamagedRow
from ringleader.runtime.state.eta import eta_s
from ringleader.runtime.state.queries import PageQuery
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.spec import JobSpec, SpecError, parse_spec
from ringleader.runtime.state.store import Store
from ringleader.runtime.state.users import User
from ringleader.runtime.workers.gpus import device_types, speeds_shown

PAGE, MAX_PAGE = 500, 1000
"""Jobs per listing page by default, and at most (summaries are ~0.5 kB each)."""
STATES = frozenset(s.value for s in State)
Order = Literal["asc", "desc"]

ONE_JOB: dict[int | str, dict[str, Any]] = {
    200: {"model": schemas.JobWithEvents},
    409: {"model": schemas.Message, "description": "An id prefix that begins several jobs."},
}
CHANGED_JOB: dict[int | str, dict[str, Any]] = {
    200: {"model": schemas.Job},
    409: {"model": schemas.Message, "description": "Several jobs, or a damaged row."},
}
LIVE = frozenset({"queued", "running", "suspended"})


def _with_reason(
    job: dict[str, Any], controller: Controller, row: JobRow | DamagedRow
) -> dict[str, Any]:
    """``job`` with why it waits or has its size, as of the last decision
    (``spine.reasons``): in words, as a code, and with the numbers behind them;
    and when it should end (``state.eta``)."""
    why = controller.reasons.get(job["id"]) if job["state"] in LIVE else None
    eta = eta_s(row) if isinstance(row, JobRow) else None
    turn = None
    if why is not None and why.turn_at is not None:
        turn = round(max(why.turn_at - time.time(), 0.0), 1)  # counted at this request
    sizing = None
    if why is not None and why.sizing is not None:
        sizing = why.sizing._asdict() | {"gain_per_gpu": why.sizing.gain_per_gpu}
    failed = wording.failure_line(job.get("error")) if job["state"] == "failed" else None
    return job | {
        "gpu_types": device_types(controller.cluster, job.get("devices") or ()),
        "reason": why.text if why is not None else failed,
        "reason_code": why and why.code,
        "turn_in_s": turn,
        "sizing": sizing,
        "eta_s": eta,
    }


def _in_words(event: dict[str, Any]) -> dict[str, Any]:
    """An event with its kind and detail in words too, as ``ringleader show`` says them."""
    kind = str(event.get("kind"))
    return event | {
        "what": wording.KIND_WORDS.get(kind, kind.replace("_", " ")),
        "text": wording.event_words(event),
    }


def _above(priority: int, me: User) -> str:
    return (
        f"{priority} is above {me.priority_max}, the most user {me.name!r} may set; "
        "an admin can raise it (ringleader users add --priority-max)"
    )


def _beyond_quota(spec: JobSpec, me: User) -> tuple[str, str]:
    """The problem with a job whose smallest size is more than its owner may ever hold:
    it would be accepted and wait for ever, so it is refused as one too large for the
    cluster is."""
    field = "min_gpus" if spec.elastic or spec.min_gpus else "gpus"
    return field, (
        f"needs {spec.lowest} GPUs at least, but user {me.name!r} may hold "
        f"{me.quota_gpus} at once; ask for {me.quota_gpus} or fewer, or ask an admin "
        "for a larger quota"
    )


def _is_dir(path: str) -> bool:
    try:
        return Path(path).is_dir()
    except OSError:  # a name too long, a loop of links: not a directory we can use
        return False


def router(store: Store, controller: Controller) -> APIRouter:
    """The routes of the caller's jobs (every job, for an admin)."""
    api = APIRouter()
    _collection(api, store, controller)
    _one_job(api, store, controller)
    return api


def _collection(api: APIRouter, store: Store, controller: Controller) -> None:
    """``POST /jobs`` and ``GET /jobs``: submit one, list a page."""

    @api.post(
        "/jobs", status_code=201, response_model=None, responses={201: {"model": schemas.Job}}
    )
    async def submit(request: Request, me: Me) -> JSONResponse | dict[str, Any]:
        """Queue a job for the caller: its ``user`` is the token's, never the spec's."""
        data, bad = await json_body(request)
        if bad is not None:
            return bad
        if isinstance(data, dict):
            if "user" in data and data["user"] != me.name:
                return problems(
                    [("user", f"a job is its submitter's: yours is {me.name!r}; leave user out")]
                )
            data = data | {"user": me.name}
        try:
            spec = parse_spec(data, cluster=controller.cluster)
        except SpecError as err:
            return problems(err.problems)
        if spec.priority > me.priority_max:
            return problems([("priority", _above(spec.priority, me))])
        if me.quota_gpus is not None and spec.lowest > me.quota_gpus:
            return problems([_beyond_quota(spec, me)])
        if spec.workdir is not None and not _is_dir(spec.workdir):
            return problems([("workdir", f"{spec.workdir[:200]}: no such directory here")])
        row = store.add(spec)
        controller.poke()
        return presentation.public(row)

    @api.get("/jobs", response_model=None, responses={200: {"model": list[schemas.JobSummary]}})
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
            return problems(
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


def _one_job(api: APIRouter, store: Store, controller: Controller) -> None:
    """``GET``, ``DELETE`` and ``PATCH /jobs/{job_id}``: one job, shown or changed."""

    def _get(job_id: str) -> JobRow:
        row = store.get(job_id)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        return row

    @api.get("/jobs/{job_id}", response_model=None, responses=ONE_JOB)
    def show(job_id: Named) -> dict[str, Any]:
        try:
            row = _get(job_id)
            public: dict[str, Any] = _with_reason(presentation.public(row), controller, row)
            public["type_speeds"] = speeds_shown(controller.cluster, row.type_observations)
            public["log_ranks"] = output.log_ranks(row)
        except DamagedRow as err:
            public = presentation.public(err)
        return public | {"events": [_in_words(e) for e in store.events(job_id)]}

    @api.delete("/jobs/{job_id}", response_model=None, responses=CHANGED_JOB)
    def cancel(job_id: Named) -> dict[str, Any]:
        row = store.request_cancel(job_id)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        controller.poke()
        return presentation.public(row)

    @api.patch("/jobs/{job_id}", response_model=None, responses=CHANGED_JOB)
    async def change(job_id: JobId, request: Request, me: Me) -> JSONResponse | dict[str, Any]:
        """Change what may change while a job runs: today its ``priority``.

        The body is checked before the job is looked up: a request of the wrong
        type is refused (415) whatever job it names.
        """
        data, bad = await json_body(request)
        if bad is not None:
            return bad
        if not isinstance(data, dict) or set(data) != {"priority"}:
            return problems([("(body)", 'expected {"priority": N}; nothing else can change')])
        priority = data["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int):
            return problems([("priority", f"{priority!r} is not an integer")])
        if not -1000 <= priority <= 1000:
            return problems([("priority", f"{priority} is outside -1000..1000")])
        if priority > me.priority_max:
            return problems([("priority", _above(priority, me))])
        job_id = job_named(request, job_id, me)
        row = store.set_priority(job_id, priority)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        controller.poke()
        return presentation.public(row)
