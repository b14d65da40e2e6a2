"""The web dashboard: its pages, a browser's sign-in, and the cluster's recent usage.

The pages are four static files in the package (``runtime/http/web/``), served
as they are: no build step, nothing fetched from the internet, so the
dashboard works on an offline cluster. Every figure on them comes from the
same API a script uses, with the same rights: the browser signs in once
(``ringleader.runtime.http.browser``) and its cookie then stands for the token.

What a page shows is put in as text, never as markup, and the
Content-Security-Policy below forbids any script but the package's own, so
a job named ``<script>`` is shown as that and nothing more.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from ringleader.runtime.http import schemas
from ringleader.runtime.http.access import bearer, caller
from ringleader.runtime.http.browser import COOKIE, SESSION_S, TICKET_S, Sessions
from ringleader.runtime.http.usage import UsageHistory
from ringleader.runtime.state.users import User, token_hash

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # The sign-in URL carries a ticket: never hand it on in a Referer.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "charts.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
SIGN_IN_FAILED = """<!doctype html><meta charset="utf-8"><title>ringleader: sign-in</title>
<p>This sign-in link has been used or has expired (a link works once, for two minutes).
Run <code>ringleader dashboard</code> for a new one.</p>"""

Me = Annotated[User, Depends(caller)]


def _asset(name: str) -> bytes:
    return (resources.files("ringleader.runtime.http") / "web" / name).read_bytes()


def router(sessions: Sessions, usage: UsageHistory) -> APIRouter:
    """The dashboard's routes; pages and their files need no sign-in (they hold no data)."""
    api = APIRouter()
    _pages(api)
    _sign_in(api, sessions)

    @api.get("/cluster/usage", response_model=None, responses={200: {"model": schemas.Usage}})
    def cluster_usage(
        request: Request,
        me: Me,
        since: Annotated[float, Query(ge=0, le=1e12)] = 0.0,
    ) -> dict[str, Any]:
        """GPUs held per user, sampled every 2 s over the last hour (after ``since``).

        Every user sees every user's total, as ``reason`` names who holds the
        GPUs a job waits for; job names and commands stay their owners'.
        """
        controller = request.app.state.controller
        return {
            "gpus": controller.cluster.capacity,
            "now": time.time(),
            "samples": [s.public() for s in usage.since(since)],
        }

    @api.get("/cluster/devices", response_model=None, responses={200: {"model": schemas.Devices}})
    def cluster_devices(request: Request, me: Me) -> dict[str, Any]:
        """Each node's GPUs and the jobs on each, as of the last usage sample (2 s).

        Like the usage chart, every user sees which user holds each GPU; the job's
        id and name only where the job is theirs (an admin sees all).
        """
        cluster = request.app.state.controller.cluster
        viewer = None if me.admin else me.name
        on: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for held in usage.holdings():
            on.setdefault((held.node, held.index), []).append(held.public(viewer))
        nodes = [
            {
                "name": n.name,
                "gpu_type": n.gpu_type or "",
                "gpus": [on.get((n.name, i), []) for i in range(n.gpus)],
            }
            for n in cluster.nodes
        ]
        return {"nodes": nodes}

    return api


def _pages(api: APIRouter) -> None:
    """``/ui/``: the dashboard's page, script and style, from the package."""
    # Read once: the package's files do not change under a running server.
    files = {name: _asset(name) for name in ASSETS}

    def page(name: str) -> Response:
        return Response(files[name], media_type=ASSETS[name], headers=PAGE_HEADERS)

    @api.get("/ui", include_in_schema=False)
    def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=308)

    @api.get("/ui/", include_in_schema=False)
    def index() -> Response:
        return page("index.html")

    @api.get("/ui/charts.js", include_in_schema=False)
    def charts() -> Response:
        return page("charts.js")

    @api.get("/ui/app.js", include_in_schema=False)
    def script() -> Response:
        return page("app.js")

    @api.get("/ui/style.css", include_in_schema=False)
    def style() -> Response:
        return page("style.css")


def _sign_in(api: APIRouter, sessions: Sessions) -> None:
    """A browser's sign-in: a ticket spent for a cookie, and the cookie ended."""

    @api.get("/ui/login", include_in_schema=False)
    def login(request: Request, ticket: Annotated[str, Query(max_length=200)] = "") -> Response:
        """Spend a ticket: set the session cookie and go to the dashboard."""
        session = sessions.spend(ticket, time.time()) if ticket else None
        if session is None:
            html = ASSETS["index.html"]
            return Response(SIGN_IN_FAILED, 401, media_type=html, headers=PAGE_HEADERS)
        response = RedirectResponse("/ui/", status_code=303, headers=PAGE_HEADERS)
        response.set_cookie(
            COOKIE,
            session,
            max_age=int(SESSION_S),
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @api.post("/ui/logout", include_in_schema=False)
    def logout(request: Request, me: Me) -> Response:
        sessions.end(request.cookies.get(COOKIE, ""))
        response = Response(status_code=204, headers=PAGE_HEADERS)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    @api.post("/dashboard/ticket", response_model=None, responses={200: {"model": schemas.Ticket}})
    def ticket(request: Request, me: Me) -> dict[str, Any]:
        """A one-time link that signs a browser in as the caller (``ringleader dashboard``)."""
        token = bearer(request)
        digest = None if token is None else token_hash(token)
        if digest is None:
            # Signed in by cookie: a ticket for the same token the session stands for.
            digest = sessions.holder(request.cookies.get(COOKIE, ""), time.time()) or ""
        value = sessions.ticket(digest, time.time())
        return {"url": f"/ui/login?ticket={value}", "expires_in": TICKET_S}
