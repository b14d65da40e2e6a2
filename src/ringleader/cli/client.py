"""The CLI's way to the server: ``ringleader.Client`` at ``RINGLEADER_URL`` (default
http://127.0.0.1:8765) with the token ``ringleader.credentials`` finds, its refusals
turned into the CLI's messages and exit codes (2: the request was wrong; 1: otherwise)."""

from __future__ import annotations

import functools
import os
from typing import Any, NoReturn

import httpx

from ringleader.cli.errors import USAGE_ERROR, say_error
from ringleader.cli.terminal import console, shown
from ringleader.client import DEFAULT_URL, ApiError, Client, NotRingleader, Unreachable, said
from ringleader.client import job_path as _job_path
from ringleader.credentials import TOKEN_ENV, found_token

_stderr = console(stderr=True)
USAGE_STATUSES = frozenset({404, 409, 415, 422})
"""Refusals of what the user asked for (exit 2); any other is exit 1."""


def server_url() -> str:
    return os.environ.get("RINGLEADER_URL", DEFAULT_URL).rstrip("/")


@functools.cache
def api() -> Client:
    """One client per command. A person is waiting: one retry to connect, not three."""
    return Client(server_url(), retries=1)


def job_path(job_id: str, suffix: str = "") -> str:
    """The API path of one job: checked and escaped, so no id can name another endpoint."""
    try:
        return _job_path(job_id, suffix)
    except ValueError:
        say_error("JOB_ID: empty; `ringleader jobs` lists the ids")
        raise SystemExit(USAGE_ERROR) from None


def request(method: str, path: str, **kw: Any) -> httpx.Response:
    try:
        return api().request(method, path, **kw)
    except (Unreachable, ApiError) as err:
        failed(err)


def failed(err: Unreachable | ApiError) -> NoReturn:
    """Say what went wrong with a request, and exit as the CLI does (2 or 1)."""
    if isinstance(err, Unreachable):
        say_error(f"{err}; start one with `ringleader server`, or set RINGLEADER_URL")
        raise SystemExit(1) from None
    if isinstance(err, NotRingleader):
        _not_ours(err)
    _refused(err)


def request_json(method: str, path: str, **kw: Any) -> Any:
    """``request``, decoded; a reply that is not JSON is not from a ringleader server."""
    response = request(method, path, **kw)
    try:
        return response.json()
    except ValueError:
        _not_ours(NotRingleader(response.status_code, response.text[:200], server_url()))


def _not_ours(err: ApiError) -> NoReturn:
    say_error(
        f"{err.url} answered {err.status} with something that is not a ringleader reply; "
        "is RINGLEADER_URL the ringleader server?"
    )
    raise SystemExit(1)


def _refused(err: ApiError) -> NoReturn:
    if err.status == 401:
        _, source = found_token(server_url())
        if source:  # a token was sent, and refused: say which one
            say_error(
                f"{err.url} refused the token from {source}: it is not (or no longer) one of "
                f"its tokens. Set {TOKEN_ENV} to a valid one, or run `ringleader login` again"
            )
        else:
            say_error(
                f"{err.url} wants a token: set {TOKEN_ENV}, or run `ringleader login` with the "
                "token your admin gave you (the server's own admin token is in "
                "STATE_DIR/admin.token)"
            )
        raise SystemExit(1)
    if err.status in (403, 421):  # not allowed, or not from here: the server says which
        say_error(_text(err.detail))
        raise SystemExit(1)
    if err.status not in USAGE_STATUSES:
        say_error(f"server answered {err.status}: {_text(err.detail)}")
        raise SystemExit(1)
    if isinstance(err.detail, str):
        say_error(err.detail)
    else:
        say_error("the server rejected the request:")
        for field, reason in err.problems or [("?", _text(err.detail))]:
            _stderr.print(f"  {shown(field)}: {shown(reason)}")
    raise SystemExit(USAGE_ERROR)


def _text(detail: Any) -> str:
    """The server's words as one line; a sentence is cut at 2,000 characters."""
    return detail[:2000] if isinstance(detail, str) else said(detail)
