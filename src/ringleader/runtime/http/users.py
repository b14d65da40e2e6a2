"""``/whoami`` and ``/users``: who the caller is, and the users an admin keeps.

A token is shown once, in the reply that made it; listings never show one.
A user may rotate their own token; everything else here is an admin's.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request
from fastapi import Path as FastPath
from fastapi.responses import JSONResponse

from ringleader.runtime.http import schemas
from ringleader.runtime.http.access import Admin, Me
from ringleader.runtime.http.bodies import json_body, problems
from ringleader.runtime.state.users import UserError, Users


def router(users: Users) -> APIRouter:
    """The routes of the caller and of the users an admin manages."""
    api = APIRouter()

    @api.get("/whoami", response_model=None, responses={200: {"model": schemas.User}})
    def whoami(me: Me) -> dict[str, Any]:
        """The user the token names, and their bounds."""
        return me.public()

    @api.get("/users", response_model=None, responses={200: {"model": list[schemas.User]}})
    def list_users(me: Admin) -> list[dict[str, Any]]:
        """Every user (admin only). Tokens are never shown again."""
        return [u.public() for u in users.all()]

    @api.post(
        "/users",
        status_code=201,
        response_model=None,
        responses={201: {"model": schemas.UserWithToken}},
    )
    async def add_user(request: Request, me: Admin) -> JSONResponse | dict[str, Any]:
        """Make a user (admin only); the reply holds their token, shown this once."""
        data, bad = await json_body(request)
        if bad is not None:
            return bad
        fields = {"name", "admin", "uid", "quota_gpus", "priority_max"}
        if not isinstance(data, dict) or "name" not in data or set(data) - fields:
            return problems([("(body)", f"expected an object with name and any of {fields}")])
        for key in ("uid", "quota_gpus", "priority_max"):
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                return problems([(key, f"{str(value)[:40]!r} is not an integer")])
        if not isinstance(data.get("admin", False), bool):
            return problems([("admin", "true or false")])
        try:
            user, token = users.add(
                data["name"],
                admin=data.get("admin", False),
                uid=data.get("uid"),
                quota_gpus=data.get("quota_gpus"),
                priority_max=data.get("priority_max"),
            )
        except UserError as err:
            return problems([(err.field, err.reason)])
        return user.public() | {"token": token}

    @api.delete(
        "/users/{name}",
        response_model=None,
        responses={200: {"model": schemas.Removed}, 409: {"model": schemas.Message}},
    )
    def remove_user(name: Annotated[str, FastPath(max_length=100)], me: Admin) -> dict[str, Any]:
        """Remove a user and their token (admin only); their jobs stay."""
        if name == me.name:
            raise HTTPException(409, detail="an admin cannot remove themself")
        if not users.remove(name):
            raise HTTPException(404, detail=f"no user {name!r}")
        return {"removed": name}

    @api.post("/users/{name}/token", response_model=None, responses={200: {"model": schemas.Token}})
    def rotate_token(name: Annotated[str, FastPath(max_length=100)], me: Me) -> dict[str, Any]:
        """A new token for ``name`` (an admin's, or the caller's own); the old one stops."""
        if name != me.name and not me.admin:
            raise HTTPException(404, detail=f"no user {name!r}")
        token = users.new_token_for(name)
        if token is None:
            raise HTTPException(404, detail=f"no user {name!r}")
        return {"name": name, "token": token}

    return api
