"""The CLI's way to the server: ``RINGLEADER_URL`` (default http://127.0.0.1:8765)."""

from __future__ import annotations

import os
from typing import Any, NoReturn

import httpx
from rich.console import Console

from ringleader.cli.errors import USAGE_ERROR

DEFAULT_URL = "http://127.0.0.1:8765"
_stderr = Console(stderr=True, highlight=False)


def server_url() -> str:
    return os.environ.get("RINGLEADER_URL", DEFAULT_URL).rstrip("/")


def _unreachable(url: str, err: Exception) -> NoReturn:
    _stderr.print(
        f"[bold red]error:[/] cannot reach the ringleader server at {url} ({err}); "
        "start one with `ringleader server`, or set RINGLEADER_URL"
    )
    raise SystemExit(1)


def request(method: str, path: str, **kw: Any) -> httpx.Response:
    url = server_url()
    try:
        response = httpx.request(method, url + path, timeout=30.0, **kw)
    except httpx.HTTPError as err:
        _unreachable(url, err)
    if response.status_code == 404:
        _stderr.print(f"[bold red]error:[/] {response.json().get('detail', 'not found')}")
        raise SystemExit(USAGE_ERROR)
    if response.status_code == 422:
        _stderr.print("[bold red]error:[/] the server rejected the request:")
        for problem in response.json().get("detail", []):
            _stderr.print(f"  {problem.get('field', '?')}: {problem.get('reason', problem)}")
        raise SystemExit(USAGE_ERROR)
    if response.status_code >= 400:
        _stderr.print(
            f"[bold red]error:[/] server answered {response.status_code}: {response.text}"
        )
        raise SystemExit(1)
    return response
