"""Who is calling, and from where: tokens, and requests a browser was tricked into.

Two things keep a web page the user happens to open away from the API:

- **Host.** DNS rebinding points a page's own domain at 127.0.0.1, so the
  browser sends ``Host: evil.example``. Only names this server is known by
  are answered (``421 Misdirected Request`` otherwise): the loopback names,
  the machine's own name, the bound host and any ``--allow-host``. An IP
  literal is always fine: a page cannot rebind a name it does not own.
- **Origin.** A browser names the page behind every cross-site POST, PATCH
  or DELETE. One from anywhere but this server's own origin is refused
  (403). Clients that are not browsers send no ``Origin`` and are unaffected.

Both checks run before routing, so nothing is read or stored for a refused
request. Then every endpoint but ``GET /health`` needs a token
(``Authorization: Bearer …``), which names the caller.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ringleader.runtime.asgi import send_json
from ringleader.runtime.users import User, Users

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def known_names(bound: str, allowed: Iterable[str] = ()) -> frozenset[str]:
    """The host names a request may give: loopback, this machine, ``bound``, ``allowed``."""
    names = set(LOOPBACK_NAMES) | {n.lower() for n in allowed}
    if bound not in ("0.0.0.0", "::", ""):
        names.add(bound.lower().strip("[]"))
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(name.lower())
    return frozenset(names)


def host_name(host_header: str) -> str:
    """``example.org:8765`` → ``example.org``; ``[::1]:8765`` → ``::1``."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class BrowserGuard:
    """ASGI middleware: the Host and Origin checks above, before anything else runs."""

    app: ASGIApp
    names: frozenset[str]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        name = host_name(host)
        if not name or (name not in self.names and not _is_ip(name)):
            reason = (
                f"Host {host[:100]!r} is not a name this server is known by; "
                "an operator can add it with `ringleader server --allow-host NAME`"
            )
            await _refuse(send, 421, "(host)", reason)
            return
        origin = headers.get("origin")
        if scope["method"] not in SAFE_METHODS and origin is not None:
            scheme = scope.get("scheme", "http")
            own = f"{scheme}://{host.lower()}"
            if _origin(origin) != own:
                reason = (
                    f"a {scope['method']} from the web page at {origin[:100]!r} is refused: "
                    "only this server's own pages may change anything"
                )
                await _refuse(send, 403, "(origin)", reason)
                return
        await self.app(scope, receive, send)


def _origin(value: str) -> str:
    parts = urlsplit(value.strip().lower())
    return f"{parts.scheme}://{parts.netloc}"


async def _refuse(send: Send, status: int, field: str, reason: str) -> None:
    await send_json(send, status, {"detail": [{"field": field, "reason": reason}]})


def bearer(request: Request) -> str | None:
    """The token the request carries, if any."""
    kind, _, token = request.headers.get("authorization", "").partition(" ")
    if kind.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def caller(request: Request) -> User:
    """The user behind the request (a FastAPI dependency); 401 without a valid token."""
    users: Users = request.app.state.users
    token = bearer(request)
    user = users.by_token(token) if token is not None and len(token) <= 200 else None
    if user is None:
        why = "no token given" if token is None else "the token is not valid"
        raise HTTPException(
            401,
            detail=f"{why}: send Authorization: Bearer TOKEN (the CLI reads RINGLEADER_TOKEN, "
            "or the file `ringleader login` writes)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return user


def admin(request: Request) -> User:
    """The caller, who must be an admin (403 otherwise)."""
    user = caller(request)
    if not user.admin:
        raise HTTPException(403, detail=f"user {user.name!r} is not an admin")
    return user
