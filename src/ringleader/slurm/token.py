"""The JWT a server outside the MUNGE perimeter shows slurmrestd, and where it comes from.

``SLURM_JWT`` holds one token for the server's life, as Slurm's own clients
take it. A token expires (``scontrol token lifespan=``), so a server meant to
run for longer reads it from the file ``SLURM_JWT_FILE`` names instead, again
whenever the file changes: whoever renews it (a cron job, a secret mount)
renews the server's too, with no restart. The token is write-only: it is in
no ``repr``, no log line and no error message.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

HOW = "make one with `scontrol token username=NAME lifespan=SECONDS` on the cluster"


class TokenError(ValueError):
    """No token, or not a Slurm JWT; the message says where it looked and how to get one."""


@dataclass
class Token:
    """The current token: fixed, or the contents of ``path`` as of its last change."""

    value: str = field(default="", repr=False)
    path: Path | None = None
    user: str = ""
    """Whom ``value`` is for (its ``sun`` claim), worked out when it is read."""
    _changed: int | None = field(default=None, repr=False)
    """``path``'s mtime (ns) when it was last read."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Token:
        """``SLURM_JWT_FILE``'s token if it is set, else ``SLURM_JWT``'s; ``TokenError``
        naming the variable if there is none, or it is not a Slurm JWT."""
        if env.get("SLURM_JWT_FILE"):
            token = cls(path=Path(env["SLURM_JWT_FILE"]))
            token.current()
            return token
        value = _bare(env.get("SLURM_JWT", ""))
        if not value:
            raise TokenError(
                "SLURM_JWT is not set: set it to the service account's token, or "
                f"SLURM_JWT_FILE to a file that holds it; {HOW}"
            )
        return cls(value, user=token_user(value, "SLURM_JWT"))

    def current(self) -> str:
        """The token to send now, ``user`` set to whom it is for (``TokenError`` if its
        file cannot be read, or holds no Slurm JWT)."""
        if self.path is None:
            return self.value
        try:
            changed = self.path.stat().st_mtime_ns
            if changed != self._changed:
                value = _bare(self.path.read_text(errors="replace"))
                user = token_user(value, f"SLURM_JWT_FILE {self.path}")
                self.value, self.user, self._changed = value, user, changed
        except OSError as err:
            raise TokenError(f"SLURM_JWT_FILE {self.path}: {err.strerror}; {HOW}") from None
        return self.value


def token_user(token: str, where: str = "SLURM_JWT") -> str:
    """The user a Slurm JWT was made for (its ``sun`` claim). Read, not verified:
    slurmctld verifies it."""
    parts = token.split(".")
    try:
        if len(parts) != 3:
            raise ValueError
        payload = parts[1] + "=" * (-len(parts[1]) % 4)
        user = json.loads(base64.urlsafe_b64decode(payload))["sun"]
        if not isinstance(user, str) or not user:
            raise ValueError
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise TokenError(
            f"{where} is not a Slurm token (three dot-separated parts, a `sun` claim): {HOW}"
        ) from None
    return user


def _bare(text: str) -> str:
    """A token as given, without whitespace or the ``SLURM_JWT=`` that ``scontrol
    token`` prints before it."""
    return text.strip().removeprefix("SLURM_JWT=").strip()
