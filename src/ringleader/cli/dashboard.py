"""``ringleader dashboard``: a one-time link that signs a browser in, as Jupyter prints one."""

from __future__ import annotations

import json
import webbrowser
from typing import Annotated

import typer

from ringleader.cli.client import api, failed
from ringleader.client import ApiError, Unreachable


def dashboard(
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the link in this machine's web browser.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Print a link to the web dashboard that signs a browser in as you.

    The link works once, within two minutes; it sets a session cookie
    (HttpOnly, SameSite=Strict) that lasts 12 hours or until your token is
    rotated. The dashboard shows the cluster, your jobs (every job for an
    admin), why each waits, its history, charts and a live log.
    """
    try:
        url = api().dashboard_url()
    except (ApiError, Unreachable) as err:
        failed(err)
    if as_json:
        typer.echo(json.dumps({"url": url, "expires_in_s": 120}))
    else:
        typer.echo(url)
        typer.echo("(opens once, within 2 minutes; run this again for a new link)", err=True)
    if open_browser and not webbrowser.open(url):
        typer.echo("no web browser found here: open the link above yourself", err=True)
