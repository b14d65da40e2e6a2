"""Signing a browser in, as Jupyter does: a one-time ticket in a URL becomes a cookie.

A token never goes into a URL (URLs end up in shell history, proxy logs and
``Referer`` headers). Instead ``ringleader dashboard`` asks the server, with
the user's token, for a **ticket**: random, good for one use within
``TICKET_S``. Opening ``/ui/login?ticket=…`` spends it and sets a **session**
cookie that is ``HttpOnly`` (page scripts cannot read it), ``SameSite=Strict``
(no other site's page can make the browser send it) and ``Secure`` over HTTPS.

A session remembers the hash of the token it was made from, so rotating or
removing a user's token ends their sessions too. Sessions live in the
server's memory: a restart signs every browser out, which is the safe way to
fail. Pure bookkeeping, no I/O; the clock is passed in.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass

COOKIE = "ringleader_session"
TICKET_S = 120.0
"""How long a dashboard URL can be opened: once, within this many seconds."""
SESSION_S = 12 * 3600.0
"""How long a browser stays signed in."""
MOST_SESSIONS = 10_000
"""Past this many live sessions the oldest go first: memory stays bounded whoever calls."""


@dataclass(frozen=True, slots=True)
class Grant:
    """Whose a ticket or session is: the token hash it stands for, and until when."""

    token_hash: str
    until: float


class Sessions:
    """Tickets waiting to be spent, and the sessions they became (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tickets: dict[str, Grant] = {}
        self._sessions: dict[str, Grant] = {}

    def ticket(self, token_hash: str, now: float) -> str:
        """A new one-time ticket for the holder of ``token_hash``."""
        ticket = secrets.token_urlsafe(32)
        with self._lock:
            self._drop_expired(self._tickets, now)
            _bound(self._tickets)
            self._tickets[ticket] = Grant(token_hash, now + TICKET_S)
        return ticket

    def spend(self, ticket: str, now: float) -> str | None:
        """A new session id for ``ticket``, which is gone after this; None: no such ticket."""
        with self._lock:
            grant = self._tickets.pop(ticket, None)
            if grant is None or grant.until < now:
                return None
            session = secrets.token_urlsafe(32)
            self._drop_expired(self._sessions, now)
            _bound(self._sessions)
            self._sessions[session] = Grant(grant.token_hash, now + SESSION_S)
        return session

    def holder(self, session: str, now: float) -> str | None:
        """The token hash a live session stands for; None: unknown or expired."""
        with self._lock:
            grant = self._sessions.get(session)
            if grant is None:
                return None
            if grant.until < now:
                del self._sessions[session]
                return None
            return grant.token_hash

    def end(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)

    @staticmethod
    def _drop_expired(grants: dict[str, Grant], now: float) -> None:
        for key in [k for k, g in grants.items() if g.until < now]:
            del grants[key]


def _bound(grants: dict[str, Grant]) -> None:
    # Dicts keep insertion order: the first keys are the oldest grants.
    while len(grants) >= MOST_SESSIONS:
        del grants[next(iter(grants))]
