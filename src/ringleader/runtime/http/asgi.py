"""A JSON reply sent at the ASGI level, for middleware that answers before any route runs."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Send


async def send_json(send: Send, status: int, content: Any, *, close: bool = False) -> None:
    """Send ``content`` as the whole response; ``close``: ask the client to hang up after."""
    body = json.dumps(content).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
