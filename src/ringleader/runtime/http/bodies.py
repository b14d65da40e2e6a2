"""Request bodies read strictly, and refusals in the project's one shape.

A refusal is ``{"detail": [{"field", "reason"}]}``, with the field names the
CLI prints. A body is JSON only by its content type, bounded in size, and
free of duplicate keys, non-JSON constants and text that has no UTF-8 form.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from ringleader.job.records import strict_json

MAX_BODY = 1 << 20


def problems(problems: list[tuple[str, str]]) -> JSONResponse:
    detail = [{"field": f, "reason": r} for f, r in problems]
    return JSONResponse(status_code=422, content={"detail": detail})


async def json_body(request: Request) -> tuple[Any, JSONResponse | None]:
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
    too_big = problems([("(body)", "over the 1 MiB limit for a request")])
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
        return None, problems([("(body)", f"not valid JSON: {err}")])
    except RecursionError:
        return None, problems([("(body)", "not valid JSON: nested too deeply")])


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
