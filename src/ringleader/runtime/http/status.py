"""``/health``, ``/cluster`` and ``/metrics``: the server itself, not any one job.

The health check is the one route that wants no token: a load balancer or
``ringleader`` itself asks it before it has one.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from ringleader import __version__
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.http import schemas
from ringleader.runtime.http.access import Admin, Me
from ringleader.runtime.state.store import Store


def health_router(store: Store, controller: Controller) -> APIRouter:
    """``GET /health``: up, which version, which policy, and how many rows are damaged."""
    api = APIRouter()

    @api.get("/health", response_model=None, responses={200: {"model": schemas.Health}})
    def health() -> dict[str, Any]:
        status: dict[str, Any] = {
            "ok": True,
            "version": __version__,
            "policy": controller.config.policy.name,
        }
        if store.damaged:
            status["damaged_jobs"] = len(store.damaged)  # which and why: GET /jobs, as an admin
        return status

    return api


def router(controller: Controller) -> APIRouter:
    """``GET /metrics`` (admins) and ``GET /cluster``: what the scheduler runs on and does."""
    api = APIRouter()

    @api.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {}}}},
    )
    def metrics(me: Admin) -> Response:
        """Prometheus' text format (admins only: the series name every user's jobs)."""
        return Response(controller.telemetry.text(), media_type=CONTENT_TYPE_LATEST)

    @api.get("/cluster", response_model=None, responses={200: {"model": schemas.Cluster}})
    def cluster(me: Me) -> dict[str, Any]:
        nodes = [
            {"name": n.name, "gpus": n.gpus, "gpu_type": n.gpu_type}
            for n in controller.cluster.nodes
        ]
        gpus = controller.cluster.capacity
        shown = {"executor": controller.executor.name, "gpus": gpus, "nodes": nodes}
        return {**shown, **controller.reach.shown()}

    return api
