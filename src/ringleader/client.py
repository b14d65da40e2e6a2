"""``ringleader.Client``: the API from Python, typed, for scripts, notebooks and the CLI.

    from ringleader import Client

    with Client() as rl:                       # RINGLEADER_URL, your token as the CLI finds it
        job = rl.submit({"name": "r20", "command": "python train.py", "gpus": 2})
        done = rl.wait(job.id, timeout=3600)   # polls until it has finished
        print(done.state, rl.logs(job.id, tail=20))
        print(rl.metrics())                    # Prometheus text (admins)

Replies are the API's own models (``ringleader.runtime.http.schemas``). A refusal
raises ``ApiError`` with the status and the server's words; a server that
cannot be reached, after ``retries`` attempts to connect, ``Unreachable``.
Only connecting is retried: a request that reached the server is never sent
twice, so a submission cannot become two jobs.
"""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from ringleader.credentials import token_for

if TYPE_CHECKING:
    from ringleader.runtime.http import schemas

DEFAULT_URL = "http://127.0.0.1:8765"
FINISHED = frozenset({"succeeded", "failed", "cancelled"})


class ApiError(RuntimeError):
    """The server refused a request: ``status`` and ``detail`` say why, as it said it."""

    def __init__(self, status: int, detail: Any, url: str) -> None:
        self.status, self.detail, self.url = status, detail, url
        super().__init__(f"{url} answered {status}: {said(detail)}")

    @property
    def problems(self) -> list[tuple[str, str]]:
        """``(field, reason)`` pairs of a 422/415/421 (empty for a one-sentence refusal)."""
        if not isinstance(self.detail, list):
            return []
        return [
            (str(p.get("field", "?")), str(p.get("reason", p)))
            for p in self.detail
            if isinstance(p, dict)
        ]


class Unreachable(ConnectionError):
    """No ringleader server answered at the URL (after the retries)."""

    def __init__(self, url: str, err: Exception) -> None:
        self.url = url
        super().__init__(f"cannot reach the ringleader server at {url} ({err})")


class NotRingleader(ApiError):
    """Something answered that is not a ringleader server (a reply that is not our JSON)."""


def said(detail: Any) -> str:
    """A refusal's ``detail`` as one line: the sentence, or ``field: reason; ...``."""
    if isinstance(detail, list):
        return "; ".join(
            f"{p.get('field')}: {p.get('reason')}" if isinstance(p, dict) else str(p)
            for p in detail
        )
    return str(detail)


def job_path(job_id: str, suffix: str = "") -> str:
    """The API path of one job, escaped, so no id can name another endpoint."""
    if not job_id.strip():
        raise ValueError("a job id cannot be empty")
    return f"/jobs/{quote(job_id, safe='')}{suffix}"


class Client:
    """A connection to one ringleader server, as one user.

    ``url``: default ``RINGLEADER_URL``, else http://127.0.0.1:8765.
    ``token``: default as the CLI finds it (``RINGLEADER_TOKEN``, ``ringleader
    login``'s file, or the admin token of a server you started here).
    ``timeout``: seconds for each request. ``retries``: extra attempts to
    connect (with a growing pause), for a server that is starting or restarting.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
    ) -> None:
        self.url = (url or os.environ.get("RINGLEADER_URL") or DEFAULT_URL).rstrip("/")
        token = token if token is not None else token_for(self.url)
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        # Certificates are loaded only for HTTPS: building the context costs a CLI
        # command some 40 ms, and a plain-HTTP client (no redirects) never uses it.
        tls = self.url.startswith("https://")
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=timeout,
            transport=httpx.HTTPTransport(retries=retries, verify=tls),
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- the wire -------------------------------------------------------------
    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One request; ``ApiError`` for a refusal, ``Unreachable`` if nobody answers."""
        try:
            response = self._http.request(method, path, **kw)
        except httpx.TransportError as err:
            raise Unreachable(self.url, err) from None
        if response.status_code >= 400:
            raise self._refusal(response)
        return response

    def request_json(self, method: str, path: str, **kw: Any) -> Any:
        response = self.request(method, path, **kw)
        try:
            return response.json()
        except ValueError:
            raise NotRingleader(response.status_code, response.text[:200], self.url) from None

    def _refusal(self, response: httpx.Response) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "detail" not in body:
            return NotRingleader(response.status_code, response.text[:200], self.url)
        return ApiError(response.status_code, body["detail"], self.url)

    # -- jobs -----------------------------------------------------------------
    def submit(self, spec: Mapping[str, Any]) -> schemas.Job:
        """Queue a job (a spec as ``ringleader submit`` takes it); the job as stored."""
        from ringleader.runtime.http.schemas import Job

        return Job.model_validate(self.request_json("POST", "/jobs", json=dict(spec)))

    def job(self, job_id: str) -> schemas.JobWithEvents:
        """One job (any unique prefix of its id), with its history of events."""
        from ringleader.runtime.http.schemas import JobWithEvents

        return JobWithEvents.model_validate(self.request_json("GET", job_path(job_id)))

    def jobs(
        self,
        *,
        state: str | None = None,
        user: str | None = None,
        newest_first: bool = False,
        page: int = 500,
    ) -> Iterator[schemas.JobSummary]:
        """Every job that matches, page after page (``state``: e.g. ``"queued,running"``)."""
        from ringleader.runtime.http.schemas import JobSummary

        params: dict[str, Any] = {"limit": page, "order": "desc" if newest_first else "asc"}
        if state:
            params["state"] = state
        if user:
            params["user"] = user
        while True:
            response = self.request("GET", "/jobs", params=params)
            for item in response.json():
                yield JobSummary.model_validate(item)
            cursor = response.headers.get("X-Next-Cursor")
            if cursor is None:
                return
            params["cursor"] = cursor

    def cancel(self, job_id: str) -> schemas.Job:
        from ringleader.runtime.http.schemas import Job

        return Job.model_validate(self.request_json("DELETE", job_path(job_id)))

    def set_priority(self, job_id: str, priority: int) -> schemas.Job:
        from ringleader.runtime.http.schemas import Job

        body = {"priority": priority}
        return Job.model_validate(self.request_json("PATCH", job_path(job_id), json=body))

    def wait(
        self, job_id: str, *, timeout: float | None = None, poll_s: float = 1.0
    ) -> schemas.JobWithEvents:
        """The job once it has finished (succeeded, failed or cancelled).

        Raises ``TimeoutError`` after ``timeout`` seconds; a server restarting
        meanwhile is waited for, as connecting is retried.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job.state in FINISHED:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job.id} still {job.state} after {timeout:g} s")
            time.sleep(poll_s)

    def logs(self, job_id: str, *, rank: int = 0, tail: int | None = None) -> str:
        """A rank's log: its first MiB, or with ``tail`` its last lines."""
        params: dict[str, Any] = {"rank": rank}
        if tail is not None:
            params["tail"] = tail
        return self.request("GET", job_path(job_id, "/logs"), params=params).text

    def follow_logs(self, job_id: str, *, rank: int = 0, tail: int | None = None) -> Iterator[str]:
        """A rank's log as the server pushes it, piece by piece, until the job ends.

        Starts at the log's beginning, or at its last ``tail`` lines. The server
        ends each stream after a minute; the next one starts where it stopped.
        """
        params: dict[str, Any] = {"rank": rank, "follow": "true"}
        if tail is not None:
            params["tail"] = tail
        path = job_path(job_id, "/logs")
        # The server speaks at least once a minute (it ends the stream): wait longer.
        timeout = httpx.Timeout(self._http.timeout.connect, read=90.0)
        while True:
            try:
                with self._http.stream("GET", path, params=params, timeout=timeout) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise self._refusal(response)
                    offset = int(response.headers.get("X-Log-Offset", "0"))
                    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                    for chunk in response.iter_bytes():
                        offset += len(chunk)
                        if text := decoder.decode(chunk):
                            yield text
                    if rest := decoder.decode(b"", final=True):
                        yield rest
            except httpx.TransportError as err:
                raise Unreachable(self.url, err) from None
            if self.job(job_id).state in FINISHED | {"damaged"}:
                return
            params = {"rank": rank, "follow": "true", "offset": offset}

    def dashboard_url(self) -> str:
        """A one-time link that signs a browser in as this client's user (for two minutes)."""
        ticket = self.request_json("POST", "/dashboard/ticket")
        return f"{self.url}{ticket['url']}"

    def progress(self, job_id: str, every: int = 1) -> list[dict[str, Any]]:
        """The job's checked progress records (every ``every``-th step, all events)."""
        records: list[dict[str, Any]] = self.request_json(
            "GET", job_path(job_id, "/progress"), params={"every": every}
        )
        return records

    # -- the rest -------------------------------------------------------------
    def cluster(self) -> schemas.Cluster:
        from ringleader.runtime.http.schemas import Cluster

        return Cluster.model_validate(self.request_json("GET", "/cluster"))

    def whoami(self) -> schemas.User:
        from ringleader.runtime.http.schemas import User

        return User.model_validate(self.request_json("GET", "/whoami"))

    def metrics(self) -> str:
        """``GET /metrics``: Prometheus' text format (admins)."""
        return self.request("GET", "/metrics").text

    def health(self) -> schemas.Health:
        from ringleader.runtime.http.schemas import Health

        return Health.model_validate(self.request_json("GET", "/health"))
