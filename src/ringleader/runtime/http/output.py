"""A job's output over HTTP: its logs (a page, a tail, or followed live) and progress.

Everything here is read from files a job wrote, so as hostile input: through
``read_regular`` (regular files only, no links, bounded reads) and, for
progress, the strict record checker of ``ringleader.job.records``.

Following a log is pushed by the server: one response streams the log's
bytes as they are written, with no size cut, and ends when the job has
finished and its log is drained, or after ``FOLLOW_S`` so that no request
lives for ever (``X-Log-Offset`` says where the stream began; a client goes
on from there plus what it read).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from ringleader.job.control import PROGRESS
from ringleader.job.records import read_progress, read_regular
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.http import schemas
from ringleader.runtime.http.access import Named
from ringleader.runtime.state.rows import JobRow
from ringleader.runtime.state.store import Store

MAX_RANK = 65535
MAX_OFFSET = 2**53
"""Beyond any log a job can write, and within what a file offset can be."""
CHUNK = 1 << 20
FOLLOW_S = 60.0
"""Longest one followed stream lasts; the client then asks again from where it was."""
POLL_S = 0.2
"""How often a followed log is looked at for new bytes."""


def router(store: Store, controller: Controller) -> APIRouter:
    api = APIRouter()

    def get(job_id: str) -> JobRow:
        row = store.get(job_id)
        if row is None:
            raise HTTPException(404, detail=f"no job {job_id!r}")
        return row

    @api.get(
        "/jobs/{job_id}/logs",
        response_class=PlainTextResponse,
        responses={409: {"model": schemas.Message}},
    )
    def logs(
        job_id: Named,
        rank: Annotated[int, Query(ge=0, le=MAX_RANK)] = 0,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
        tail: Annotated[int | None, Query(ge=1, le=100_000)] = None,
        follow: bool = False,
        download: bool = False,
    ) -> Response:
        """The log from ``offset`` (1 MiB at most; ``X-Log-Offset`` says where to go on),
        or with ``tail`` its last lines. An offset past the end means the log was
        rotated (``ringleader.runtime.workers.bounded``): it is read again from its start.

        With ``follow`` the server streams the log as it grows, whatever its size,
        until the job has finished (or ``FOLLOW_S`` have passed: ask again from
        ``X-Log-Offset`` plus the bytes received). With ``download`` it sends the
        whole log as it is now, as a file to save (``JOB-rankR.log``).
        """
        row = get(job_id)
        path = controller.job_dir(job_id) / "logs" / f"rank{rank}.log"
        widest = log_ranks(row)
        if not 0 <= rank < widest and not path.exists():
            raise HTTPException(
                404, detail=f"job {job_id!r} has ranks 0..{widest - 1}; no rank {rank}"
            )
        if download:
            return _download(path, f"{row.id}-rank{rank}.log")
        if follow:
            first = ""
            if tail is not None:
                first, offset = read_tail(path, tail)
            elif offset > log_size(path):
                offset = 0
            return StreamingResponse(
                _follow(store, job_id, path, first, offset),
                media_type="text/plain; charset=utf-8",
                headers={"X-Log-Offset": str(offset), "Cache-Control": "no-cache"},
            )
        text, end = read_tail(path, tail) if tail is not None else read_from(path, offset)
        return PlainTextResponse(text, headers={"X-Log-Offset": str(end)})

    @api.get(
        "/jobs/{job_id}/progress",
        response_model=None,
        responses={200: {"model": list[dict[str, Any]]}, 409: {"model": schemas.Message}},
    )
    def progress(
        job_id: Named, every: Annotated[int, Query(ge=1, le=1_000_000)] = 1
    ) -> JSONResponse:
        """Checked progress records (every ``every``-th step, all events).

        Read as hostile input (``ringleader.job.records``): bad lines are
        skipped, and their count is in the ``X-Bad-Lines`` header.
        """
        get(job_id)
        out: list[dict[str, Any]] = []
        bad = 0
        for i, record in enumerate(read_progress(controller.job_dir(job_id) / PROGRESS)):
            if record is None:
                bad += 1
            elif "event" in record or i % every == 0:
                out.append(record)
        return JSONResponse(out, headers={"X-Bad-Lines": str(bad)})

    return api


async def _follow(
    store: Store, job_id: str, path: Path, first: str, offset: int
) -> AsyncIterator[bytes]:
    """The log's bytes from ``offset`` on, as they are written, until the job ends."""
    if first:
        yield first.encode()
    ends = time.monotonic() + FOLLOW_S
    while time.monotonic() < ends:
        data = await asyncio.to_thread(read_regular, path, offset, CHUNK)
        if data:
            offset += len(data)
            yield data
            continue
        if offset > log_size(path):
            offset = 0  # rotated: the new file is read from its start
            continue
        row = await asyncio.to_thread(_row_or_none, store, job_id)
        if row is None or row.state.finished:
            # The wrapper has exited, so its last words are on disk: read them and end.
            while data := await asyncio.to_thread(read_regular, path, offset, CHUNK):
                offset += len(data)
                yield data
            return
        await asyncio.sleep(POLL_S)


def _download(path: Path, name: str) -> StreamingResponse:
    """The log whole, as it is now, as a file named ``name`` to save."""
    return StreamingResponse(
        _whole(path, log_size(path)),
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


async def _whole(path: Path, size: int) -> AsyncIterator[bytes]:
    """The log's first ``size`` bytes (its size when asked), a chunk at a time."""
    offset = 0
    while offset < size:
        data = await asyncio.to_thread(read_regular, path, offset, min(CHUNK, size - offset))
        if not data:
            return  # rotated or removed meanwhile: what was sent is what there was
        offset += len(data)
        yield data


def log_ranks(row: JobRow) -> int:
    """How many ranks' logs a job can have: its widest gang so far, or its spec's."""
    return max(row.workers, row.last_workers, row.spec.highest)


def _row_or_none(store: Store, job_id: str) -> JobRow | None:
    try:
        return store.get(job_id)
    except Exception:  # a damaged row: nothing more will be written to follow
        return None


def read_from(path: Path, offset: int) -> tuple[str, int]:
    if offset > log_size(path):
        offset = 0  # rotated since the caller's last read: the file began again
    data = read_regular(path, offset, CHUNK)
    if data is None:
        return "", offset
    return data.decode(errors="replace"), offset + len(data)


def read_tail(path: Path, lines: int) -> tuple[str, int]:
    """The last ``lines`` lines of the log (from its last MiB), and the offset of its end."""
    size = log_size(path)
    data = read_regular(path, max(0, size - CHUNK), CHUNK) or b""
    kept = data.splitlines(keepends=True)[-lines:]
    return b"".join(kept).decode(errors="replace"), size


def log_size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0
