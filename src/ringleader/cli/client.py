"""The CLI's way to the server: ``RINGLEADER_URL`` (default http://127.0.0.1:8765),
with the token ``ringleader.credentials`` finds."""

from __future__ import annotations

import os
from typing import Any, NoReturn
from urllib.parse import quote

import httpx

from ringleader.cli.errors import USAGE_ERROR, say_error
from ringleader.cli.terminal import console, shown
from ringleader.credentials import TOKEN_ENV, token_for

DEFAULT_URL = "http://127.0.0.1:8765"
_stderr = console(stderr=True)


def server_url() -> str:
    return os.environ.get("RINGLEADER_URL", DEFAULT_URL).rstrip("/")


def _unreachable(url: str, err: Exception) -> NoReturn:
    say_error(
        f"cannot reach the ringleader server at {url} ({err}); "
        "start one with `ringleader server`, or set RINGLEADER_URL"
    )
    raise SystemExit(1)


def _not_ours(url: str, response: httpx.Response) -> NoReturn:
    say_error(
        f"{url} answered {response.status_code} with something that is "
        "not a ringleader reply; is RINGLEADER_URL the ringleader server?"
    )
    raise SystemExit(1)


def _body(url: str, response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        _not_ours(url, response)


def job_path(job_id: str, suffix: str = "") -> str:
    """The API path of one job: checked and escaped, so no id can name another endpoint."""
    if not job_id.strip():
        say_error("JOB_ID: empty; `ringleader jobs` lists the ids")
        raise SystemExit(USAGE_ERROR)
    return f"/jobs/{quote(job_id, safe='')}{suffix}"


def auth_headers(url: str) -> dict[str, str]:
    token = token_for(url)
    return {} if token is None else {"Authorization": f"Bearer {token}"}


def _unauthorized(url: str, response: httpx.Response) -> NoReturn:
    body = _body(url, response)
    detail = body.get("detail") if isinstance(body, dict) else None
    if response.status_code == 401:
        say_error(
            f"{url} wants a token: set {TOKEN_ENV}, or run `ringleader login` with the "
            "token your admin gave you (the server's own admin token is in STATE_DIR/admin.token)"
        )
    else:
        say_error(str(detail) if detail else f"{url} refused the request ({response.status_code})")
    raise SystemExit(1)


def request(method: str, path: str, **kw: Any) -> httpx.Response:
    url = server_url()
    headers = {**auth_headers(url), **kw.pop("headers", {})}
    try:
        response = httpx.request(method, url + path, timeout=30.0, headers=headers, **kw)
    except httpx.HTTPError as err:
        _unreachable(url, err)
    if response.status_code in (401, 403, 421):
        _unauthorized(url, response)
    if response.status_code in (404, 409, 415, 422):
        body = _body(url, response)
        detail = body.get("detail") if isinstance(body, dict) else None
        if detail is None:
            _not_ours(url, response)
        if isinstance(detail, str):
            say_error(detail)
        else:
            say_error("the server rejected the request:")
            for problem in detail if isinstance(detail, list) else [detail]:
                if isinstance(problem, dict):
                    field = problem.get("field") or ".".join(map(str, problem.get("loc", ["?"])))
                    reason = problem.get("reason") or problem.get("msg") or problem
                    _stderr.print(f"  {shown(field)}: {shown(reason)}")
        raise SystemExit(USAGE_ERROR)
    if response.status_code >= 400:
        say_error(f"server answered {response.status_code}: {response.text[:2000]}")
        raise SystemExit(1)
    return response


def request_json(method: str, path: str, **kw: Any) -> Any:
    """``request``, decoded; a reply that is not JSON is not from a ringleader server."""
    return _body(server_url(), request(method, path, **kw))
