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
(``Authorization: Bearer …``), which names the caller, or a dashboard
session's cookie (``ringleader.runtime.http.browser``). A request that changes
something on a cookie alone must also carry its page's ``Origin`` (browsers
always send it on such requests), so only this server's pages can.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request
from fastapi import Path as FastPath
from starlette.types import ASGIApp, Receive, Scope, Send

from ringleader.runtime.http.asgi import send_json
from ringleader.runtime.http.browser import COOKIE, Sessions
from ringleader.runtime.state.store import Store
from ringleader.runtime.state.users import User, Users

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
    if token is None and COOKIE in request.cookies:
        return _session_user(request, users)
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


def _session_user(request: Request, users: Users) -> User:
    """The user a dashboard session cookie stands for (401 if it is stale or unknown)."""
    sessions: Sessions = request.app.state.sessions
    session = request.cookies.get(COOKIE, "")
    digest = sessions.holder(session, time.time()) if len(session) <= 200 else None
    user = users.by_token_hash(digest) if digest is not None else None
    if user is None:
        raise HTTPException(
            401,
            detail="the dashboard session has ended (expired, signed out, or the token "
            "was rotated): run `ringleader dashboard` for a new sign-in link",
        )
    if request.method not in SAFE_METHODS and "origin" not in request.headers:
        raise HTTPException(
            403, detail="a change made with a session cookie must come from this server's page"
        )
    return user


Me = Annotated[User, Depends(caller)]
"""The user a request's token (or dashboard session) names."""
Admin = Annotated[User, Depends(admin)]

MAX_JOB_ID = 256
"""Longer than any id the store makes (a 40-character name, a dash, 8 hex digits)."""
JobId = Annotated[str, FastPath(min_length=1, max_length=MAX_JOB_ID)]


def job_named(request: Request, job_id: JobId, me: Me) -> str:
    """The full id of the caller's job that ``job_id`` names: itself, or the one id it
    begins. Another user's jobs are not looked at, so a prefix reveals nothing of them."""
    store: Store = request.app.state.store
    found = store.ids_starting(job_id, owner=None if me.admin else me.name)
    if not found:
        raise HTTPException(404, detail=f"no job {job_id!r}")
    if len(found) > 1:
        more = ", ".join(found[:2]) + (", ..." if len(found) > 2 else "")
        raise HTTPException(
            409, detail=f"{job_id!r} begins more than one job id ({more}): give more of it"
        )
    return found[0]


Named = Annotated[str, Depends(job_named)]
"""A job id in a path, as the client may shorten it (git's and docker's short ids)."""
