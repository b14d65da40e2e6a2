"""Slurm through ``slurmrestd`` with a JWT: for a server outside the MUNGE perimeter.

A ``SlurmApi`` over Slurm's REST API (``/slurm/v0.0.38``, Slurm 22.05's newest),
authenticated by the headers ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN``.
The token is write-only: it goes in those headers and nowhere else (not in
``repr``, not in a log, not in a job's environment).

What 22.05's REST API cannot do, and what ringleader does instead:
- No ``scontrol suspend``/``resume``: ``can_suspend`` is False, so the server
  runs a policy without its sharing stage, as on a partition that does not
  oversubscribe (``docs/slurm.md``).
- No ``--uid``: a job runs as the user the request names. A token of root or
  of ``SlurmUser`` may name any user, so jobs still run as their owners.
- ``DELETE /job/{id}`` with a signal reaches the batch step only, whose
  ``srun`` ends every rank at once on a SIGTERM (no time to checkpoint). So a
  stop is ``STOP_SIGNAL`` (SIGWINCH), which ``srun`` ignores and the batch
  shell turns into ``scancel -s TERM`` of its own job, run on its node, inside
  the cluster: the ranks get the SIGTERM ``Slurm.stop`` gives them.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ringleader.slurm.api import (
    STOP_SIGNAL,
    UNKNOWN,
    BatchJob,
    SlurmNode,
    SlurmUnavailable,
    SlurmUnreachable,
    gres_gpus,
)
from ringleader.slurm.token import Token, TokenError

VERSION = "v0.0.38"
TIMEOUT_S = 20.0
UNREACHABLE = "Unable to contact slurm controller"
FORGOTTEN = "Invalid job id"
REFUSED = "Unspecified error"
"""All slurmrestd 22.05 says of a token it refuses (forged, expired, another user's)."""
_STATES = {
    "mixed": "mix",
    "allocated": "alloc",
    "error": "err",
    "future": "futr",
    "unknown": UNKNOWN,
}
"""slurmrestd's node states, by the short names ``sinfo`` gives them (``api.USABLE``)."""
_FLAG_STATES = (("DRAIN", "drain"), ("MAINTENANCE", "maint"), ("RESERVED", "resv"))
"""State flags that make a node unusable whatever its base state, as ``sinfo`` names them."""
BATCH_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SLURM_CONF", "PYTHONPATH", "VIRTUAL_ENV")
"""What of the server's environment a batch job gets (slurmrestd wants one; ``sbatch``
would send all of it, the token included). The ranks' own come from their launch files."""


class SlurmForgotten(SlurmUnavailable):
    """slurmctld knows no such job: it ended past ``MinJobAge``, or was lost."""


class SlurmRefused(SlurmUnreachable):
    """slurmrestd refused the token (expired, most likely): to the controller the
    cluster does not answer, and jobs are held until a renewed token is taken."""


@dataclass(frozen=True, slots=True)
class SlurmRest:
    """How to reach one Slurm cluster through ``slurmrestd`` (a ``SlurmApi``)."""

    url: str
    """Where slurmrestd listens, e.g. ``http://slurm-head:6820``."""
    token: Token
    partition: str | None = None
    can_suspend = False

    @classmethod
    def from_env(
        cls, url: str, partition: str | None = None, env: Mapping[str, str] = os.environ
    ) -> SlurmRest:
        """The client for ``url`` with the token ``SLURM_JWT_FILE`` or ``SLURM_JWT``
        gives (``TokenError`` if neither does)."""
        return cls(url.rstrip("/"), Token.from_env(env), partition)

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        as_user: str | None = None,
    ) -> dict[str, Any]:
        try:
            token = self.token.current()
        except TokenError as err:
            raise SlurmRefused(str(err)) from None
        user = self.token.user
        headers = {"X-SLURM-USER-NAME": as_user or user, "X-SLURM-USER-TOKEN": token}
        where = f"{self.url}/slurm/{VERSION}{path}"
        try:
            reply = httpx.request(
                method, where, params=params, json=body, headers=headers, timeout=TIMEOUT_S
            )
        except httpx.TimeoutException:
            raise SlurmUnreachable(
                f"slurmrestd at {self.url} got no answer in {TIMEOUT_S:g} s"
            ) from None
        except httpx.HTTPError as err:
            raise SlurmUnreachable(f"slurmrestd at {self.url} did not answer: {err}") from None
        try:
            data = reply.json()
        except json.JSONDecodeError:
            raise SlurmUnavailable(
                f"slurmrestd {method} {path}: HTTP {reply.status_code}, not JSON: "
                f"{reply.text[:200]!r}; is {self.url} slurmrestd?"
            ) from None
        said = "; ".join(_said(e) for e in data.get("errors") or [])
        if UNREACHABLE in said:
            raise SlurmUnreachable(f"slurmrestd {method} {path}: {said}")
        if reply.status_code in (401, 403, 500) and REFUSED in said:
            raise SlurmRefused(
                f"slurmrestd {method} {path} refused the token of {user!r} (HTTP "
                f"{reply.status_code}: {said}): renew SLURM_JWT_FILE's token, or restart "
                f"with a current SLURM_JWT (`scontrol token username={user}`)"
            )
        if FORGOTTEN in said:
            raise SlurmForgotten(f"slurmrestd {method} {path}: {said}")
        if said or reply.status_code >= 400:
            raise SlurmUnavailable(f"slurmrestd {method} {path} (HTTP {reply.status_code}): {said}")
        return dict(data)

    def nodes(self) -> list[SlurmNode]:
        found = []
        for node in self._request("GET", "/nodes").get("nodes", []):
            if self.partition and self.partition not in node.get("partitions", []):
                continue
            gpus, gpu_type = gres_gpus(node.get("gres") or "")
            flags = set(node.get("state_flags") or [])
            state = _STATES.get(node.get("state", ""), node.get("state", ""))
            for flag, named in _FLAG_STATES:
                if flag in flags:
                    state = named
            responding = "NOT_RESPONDING" not in flags
            found.append(SlurmNode(node["name"], gpus, gpu_type, state, responding))
        return found

    def oversubscribes(self) -> bool:
        """v0.0.38 does not say; and without suspend ringleader does not time-slice
        through slurmrestd anyway."""
        return False

    def submit(self, script: str, job: BatchJob) -> str:
        if job.oversubscribe:
            raise SlurmUnavailable("slurmrestd 22.05 refuses --oversubscribe in a submission")
        properties: dict[str, Any] = {
            "name": job.name,
            "nodelist": ",".join(job.nodes),
            "nodes": str(len(job.nodes)),
            "tasks": job.tasks,
            "standard_output": str(job.output),
            "current_working_directory": str(job.workdir),
            "requeue": False,  # as sbatch --no-requeue: a failed node ends the job
            "environment": {k: os.environ[k] for k in BATCH_ENV if k in os.environ},
        }
        if job.gpus_per_node:
            properties["gres"] = f"gpu:{job.gpus_per_node}"
        if self.partition:
            properties["partition"] = self.partition
        owner = None if job.uid is None else pwd.getpwuid(job.uid).pw_name
        done = self._request(
            "POST", "/job/submit", body={"script": script, "job": properties}, as_user=owner
        )
        return str(done["job_id"])

    def states(self, job_ids: Sequence[str]) -> dict[str, str]:
        states = {}
        for job_id in job_ids:
            try:
                jobs = self._request("GET", f"/job/{int(job_id)}").get("jobs", [])
            except SlurmForgotten:
                continue
            for job in jobs:
                states[str(job["job_id"])] = str(job["job_state"])
        return states

    def stop(self, job_id: str) -> None:
        """``STOP_SIGNAL`` to the batch shell, which hands the ranks a SIGTERM."""
        self._signal(job_id, signal.Signals[f"SIG{STOP_SIGNAL}"])

    def kill(self, job_id: str) -> None:
        self._signal(job_id, signal.SIGKILL)

    def _signal(self, job_id: str, signum: signal.Signals) -> None:
        # By number: 22.05 knows SIGWINCH by no name.
        params = {"signal": str(signum.value)}
        with contextlib.suppress(SlurmForgotten):  # one that ended is no error
            self._request("DELETE", f"/job/{int(job_id)}", params=params)

    def suspend(self, job_id: str) -> None:
        raise SlurmUnavailable("slurmrestd 22.05 cannot suspend a job (scontrol suspend can)")

    def resume(self, job_id: str) -> None:
        raise SlurmUnavailable("slurmrestd 22.05 cannot resume a job (scontrol resume can)")


def _said(error: Mapping[str, Any]) -> str:
    """One of slurmrestd's errors in words: its ``error``, and ``description`` if any."""
    words = str(error.get("error", "")).strip()
    detail = str(error.get("description", "")).strip()
    return f"{words}: {detail}" if words and detail else words or detail
