"""Users and tokens from the command line: ``users add/list/remove/token``, ``login``, ``whoami``.

A new token is printed alone on stdout, once, so it can be piped or captured
(``TOKEN=$(ringleader users add alice)``); the server keeps only its hash.
"""

from __future__ import annotations

import getpass
import json
import sys
from typing import Annotated

import typer
from rich.table import Table

from ringleader.cli.client import job_path, request_json, server_url
from ringleader.cli.errors import fail
from ringleader.cli.terminal import console as make_console
from ringleader.cli.terminal import shown
from ringleader.credentials import save_token

console = make_console()

users = typer.Typer(
    help="Add, list and remove users (admins only), or give one a new token.",
    no_args_is_help=True,
)


@users.command("add")
def add(
    name: Annotated[str, typer.Argument(help="A Unix-style user name: a-z 0-9 _ . -")],
    admin: Annotated[bool, typer.Option("--admin", help="May see and change every job.")] = False,
    uid: Annotated[
        int | None,
        typer.Option(min=1, help="Unix uid this user's jobs run as when the server is root."),
    ] = None,
    quota_gpus: Annotated[
        int | None, typer.Option(min=0, help="GPUs this user's jobs may hold at once.")
    ] = None,
    priority_max: Annotated[
        int | None,
        typer.Option(
            min=-1000, max=1000, help="Highest priority the user may set (default 0; admins 1000)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Add a user and print their token on stdout, once; give it to them to `ringleader login`."""
    body: dict[str, object] = {"name": name, "admin": admin}
    for key, value in (("uid", uid), ("quota_gpus", quota_gpus), ("priority_max", priority_max)):
        if value is not None:
            body[key] = value
    made = request_json("POST", "/users", json=body)
    sys.stdout.write(json.dumps(made, indent=2) + "\n" if as_json else f"{made['token']}\n")


@users.command("list")
def list_users(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Every user and their bounds (tokens are never shown again)."""
    if as_json:
        typer.echo(json.dumps(request_json("GET", "/users"), indent=2))
        return
    table = Table(title="users")
    for col in ("name", "admin", "uid", "quota GPUs", "priority max"):
        table.add_column(col)
    for u in request_json("GET", "/users"):
        quota = "-" if u.get("quota_gpus") is None else str(u["quota_gpus"])
        uid = "-" if u.get("uid") is None else str(u["uid"])
        table.add_row(
            shown(u["name"]), "yes" if u["admin"] else "", uid, quota, str(u["priority_max"])
        )
    console.print(table)


@users.command("remove")
def remove(
    name: Annotated[str, typer.Argument(help="The user to remove.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Remove a user: their token stops working at once; their jobs stay on record."""
    gone = request_json("DELETE", f"/users/{_segment(name)}")
    if as_json:
        typer.echo(json.dumps(gone, indent=2))
        return
    console.print(f"removed {shown(name)}")


@users.command("token")
def token(
    name: Annotated[str, typer.Argument(help="Whose token to replace.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Print a new token for NAME (yours, or anyone's for an admin); the old one stops working."""
    made = request_json("POST", f"/users/{_segment(name)}/token")
    sys.stdout.write(json.dumps(made, indent=2) + "\n" if as_json else f"{made['token']}\n")


def login(
    token_stdin: Annotated[
        bool, typer.Option("--token-stdin", help="Read the token from stdin, not a prompt.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Save a token for the server at RINGLEADER_URL, after checking it there.

    Saved in ~/.config/ringleader/tokens.json (mode 0600), per server URL.
    RINGLEADER_TOKEN, when set, still wins.
    """
    given = sys.stdin.readline() if token_stdin else getpass.getpass("token: ")
    given = given.strip()
    if not given:
        fail("no token given")
    me = request_json("GET", "/whoami", headers={"Authorization": f"Bearer {given}"})
    url = server_url()
    path = save_token(url, given)
    if as_json:
        typer.echo(json.dumps({"url": url, "user": me["name"], "saved_in": str(path)}))
        return
    console.print(f"logged in to {shown(url)} as {shown(me['name'])}; token saved in {path}")


def whoami(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Who the server takes you for, and your bounds."""
    me = request_json("GET", "/whoami")
    if as_json:
        typer.echo(json.dumps(me, indent=2))
        return
    quota = "none" if me.get("quota_gpus") is None else f"{me['quota_gpus']} GPUs"
    role = "admin" if me.get("admin") else "user"
    console.print(
        f"{shown(me['name'])} ({role}) at {shown(server_url())}; quota {quota}, "
        f"priority up to {me['priority_max']}"
    )


def _segment(name: str) -> str:
    """``name`` as one escaped path segment (as job ids are)."""
    return job_path(name).removeprefix("/jobs/")
