"""The REST API: submit, list, inspect, cancel, read logs. OpenAPI at ``/docs``.

Handlers only read the store or record a request in it; the controller does
the work. Bad input gets 422 with ``{"detail": [{"field", "reason"}]}``, the
same field names the CLI prints, and never reaches the controller.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from ringleader import __version__
from ringleader.runtime.controller import Controller
from ringleader.runtime.spec import SpecError, parse_spec
from ringleader.runtime.store import DamagedRow, JobRow, Store

MAX_BODY = 1 << 20


def _problems(problems: list[tuple[str, str]]) -> JSONResponse:
    detail = [{"field": f, "reason": r} for f, r in problems]
    return JSONResponse(status_code=422, content={"detail": detail})


async def _json_body(request: Request) -> tuple[Any, JSONResponse | None]:
    """The request's JSON, or the 422 that says why there is none (too big, not JSON).

    The body is read in chunks and dropped once over the limit, so an
    oversized request costs the server no more than the limit in memory.
    """
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
        return json.loads(body), None
    except (ValueError, UnicodeDecodeError) as err:
        return None, _problems([("(body)", f"not valid JSON: {err}")])
    except RecursionError:
        return None, _problems([("(body)", "not valid JSON: nested too deeply")])


def create_app(store: Store, controller: Controller) -> FastAPI:
    app = FastAPI(
        title="ringleader",
        version=__version__,
        description="Scheduler for deep-learning training jobs on shared GPU clusters.",
    )

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
        # The job exists but its row cannot be read: a server-side problem,
        # said plainly (and the rest of the API keeps working).
        return JSONResponse(status_code=500, content={"detail": str(err)})

    @app.get("/health")
    def health() -> dict[str, Any]:
        status: dict[str, Any] = {
            "ok": True,
            "version": __version__,
            "policy": controller.config.policy.name,
        }
        if store.damaged:
            status["damaged_jobs"] = {i: str(e) for i, e in sorted(store.damaged.items())}
        return status

    @app.get("/cluster")
    def cluster() -> dict[str, Any]:
        nodes = [{"name": n.name, "gpus": n.gpus} for n in controller.cluster.nodes]
        gpus = controller.cluster.capacity
        return {"executor": controller.executor.name, "gpus": gpus, "nodes": nodes}

    @app.post("/jobs", status_code=201, response_model=None)
    async def submit(request: Request) -> JSONResponse | dict[str, Any]:
        data, bad = await _json_body(request)
        if bad is not None:
            return bad
        try:
            spec = parse_spec(data, capacity=controller.cluster.capacity)
        except SpecError as err:
            return _problems(err.problems)
        row = store.add(spec)
        controller.poke()
        return row.public()

    @app.get("/jobs")
    def jobs() -> list[dict[str, Any]]:
        return [row.public() for row in store.all()]

    def _get(job_id: str) -> JobRow:
        row = store.get(job_id)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        return row

    @app.get("/jobs/{job_id}")
    def show(job_id: str) -> dict[str, Any]:
        public: dict[str, Any] = _get(job_id).public()
        return public | {"events": store.events(job_id)}

    @app.delete("/jobs/{job_id}")
    def cancel(job_id: str) -> dict[str, Any]:
        row = store.request_cancel(job_id)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        controller.poke()
        return row.public()

    @app.patch("/jobs/{job_id}", response_model=None)
    async def change(job_id: str, request: Request) -> JSONResponse | dict[str, Any]:
        """Change what may change while a job runs: today its ``priority``."""
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
        row = store.set_priority(job_id, priority)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        controller.poke()
        return row.public()

    @app.get("/jobs/{job_id}/logs", response_class=PlainTextResponse)
    def logs(job_id: str, rank: int = 0, offset: int = 0) -> PlainTextResponse:
        row = _get(job_id)
        path = controller.job_dir(job_id) / "logs" / f"rank{rank}.log"
        widest = max(row.workers, row.last_workers, row.spec.highest)
        if not 0 <= rank < widest and not path.exists():
            raise HTTPException(
                404, detail=f"job {job_id!r} has ranks 0..{widest - 1}; no rank {rank}"
            )
        text, end = _read_from(path, offset)
        return PlainTextResponse(text, headers={"X-Log-Offset": str(end)})

    @app.get("/jobs/{job_id}/progress")
    def progress(job_id: str, every: int = 1) -> list[dict[str, Any]]:
        _get(job_id)
        path = controller.job_dir(job_id) / "progress.jsonl"
        out = []
        try:
            lines = path.read_text().splitlines()
        except OSError:
            return []
        for i, line in enumerate(lines):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if "event" in rec or i % max(every, 1) == 0:
                out.append(rec)
        return out

    return app


def _read_from(path: Path, offset: int) -> tuple[str, int]:
    try:
        with open(path, "rb") as f:
            f.seek(max(offset, 0))
            data = f.read(1 << 20)
            return data.decode(errors="replace"), max(offset, 0) + len(data)
    except OSError:
        return "", offset
