"""Users and their tokens: who may call the API, as whom, and within what bounds.

A token is 32 random bytes, shown once when it is made; only its SHA-256 is
stored. A fast hash is enough here, unlike for passwords: a token has 256
bits of entropy, so there is nothing to guess from its hash. Users live in
the jobs database (their own table), so a backup of ``ringleader.db`` is a
backup of both.

On its first start a server makes the user ``admin`` and writes its token to
``STATE_DIR/admin.token`` (mode 0600): whoever can read that file runs the
server. A token file that no longer holds the admin's token (deleted, or the
database restored from a backup) is replaced by a fresh one at the next start.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ringleader.credentials import ADMIN_TOKEN_FILE, write_private
from ringleader.runtime.workers.identity import FIRST_DYNAMIC_UID

ADMIN = "admin"
TOKEN_FILE = ADMIN_TOKEN_FILE
NAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
"""A Unix user name's rules (``useradd``'s default), so a name can be a uid's too."""
PRIORITY_BOUND = 1000
"""Priorities lie in -1000..1000 (``JobSpec.priority``)."""
DEFAULT_PRIORITY_MAX = 0
"""A user may lower their own jobs' priority, but raise it only as far as an admin allows."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    admin INTEGER NOT NULL DEFAULT 0,
    uid INTEGER,
    quota_gpus INTEGER,
    priority_max INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
"""
_COLUMNS = ("name", "admin", "uid", "quota_gpus", "priority_max", "created")


class UserError(ValueError):
    """A user that cannot be made or changed; ``field`` names what to fix."""

    def __init__(self, field: str, reason: str) -> None:
        self.field, self.reason = field, reason
        super().__init__(f"{field}: {reason}")


@dataclass(frozen=True, slots=True)
class User:
    """Someone with a token: their name, rights and bounds."""

    name: str
    admin: bool = False
    uid: int | None = None
    """The Unix uid this user's jobs run as when the server runs as root (``--uid``,
    else one of ``identity.FIRST_DYNAMIC_UID`` and up, given at creation)."""
    quota_gpus: int | None = None
    """GPUs this user's jobs may hold at once (None: no quota)."""
    priority_max: int = DEFAULT_PRIORITY_MAX
    created: float = 0.0

    def public(self) -> dict[str, Any]:
        return asdict(self)


def new_token() -> str:
    """A fresh token; ``rl_`` marks it as ours, for secret scanners and for people."""
    return "rl_" + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class Users:
    """The users table, safe to use from the API's threads."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._token_file: Path | None = None
        """Where the server keeps the admin's token (``ensure_admin``): kept current."""

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(
        self,
        name: str,
        *,
        admin: bool = False,
        uid: int | None = None,
        quota_gpus: int | None = None,
        priority_max: int | None = None,
    ) -> tuple[User, str]:
        """Make a user; returns it and its token, the only time the token is seen."""
        if not isinstance(name, str) or not NAME.match(name):
            raise UserError(
                "name", "use 1-32 of a-z 0-9 _ . - starting with a letter or _ (as useradd does)"
            )
        if uid is not None and not 1 <= uid < 2**31:
            raise UserError("uid", f"{uid} is not an unprivileged uid (1..2147483647)")
        if quota_gpus is not None and not 0 <= quota_gpus <= 1 << 20:
            raise UserError("quota_gpus", f"{quota_gpus} is not a GPU count (0 or more)")
        if priority_max is None:
            priority_max = PRIORITY_BOUND if admin else DEFAULT_PRIORITY_MAX
        if not -PRIORITY_BOUND <= priority_max <= PRIORITY_BOUND:
            raise UserError("priority_max", f"{priority_max} is outside -1000..1000")
        token = new_token()
        with self._lock:
            if uid is None:
                uid = self._next_uid()
            elif holder := self._db.execute(
                "SELECT name FROM users WHERE uid = ?", (uid,)
            ).fetchone():
                raise UserError("uid", f"{uid} is user {holder[0]!r}'s; give each user their own")
            user = User(name, admin, uid, quota_gpus, priority_max, time.time())
            try:
                self._db.execute(
                    "INSERT INTO users (name, token_hash, admin, uid, quota_gpus, priority_max, "
                    "created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        name,
                        token_hash(token),
                        int(admin),
                        uid,
                        quota_gpus,
                        priority_max,
                        user.created,
                    ),
                )
            except sqlite3.IntegrityError:
                raise UserError("name", f"user {name!r} exists already") from None
        return user, token

    def by_token(self, token: str) -> User | None:
        """Whose token this is, if anyone's."""
        return self._one("token_hash = ?", token_hash(token))

    def by_token_hash(self, digest: str) -> User | None:
        """Whose token hashes to ``digest`` (a browser session remembers only the hash)."""
        return self._one("token_hash = ?", digest)

    def get(self, name: str) -> User | None:
        return self._one("name = ?", name)

    def all(self) -> list[User]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM users ORDER BY created"
            ).fetchall()
        return [_user(row) for row in rows]

    def run_uid(self, name: str) -> int | None:
        """The uid ``name``'s jobs run as (given one now if they have none); None: no such user."""
        with self._lock:
            row = self._db.execute("SELECT uid FROM users WHERE name = ?", (name,)).fetchone()
            if row is None:
                return None
            if row[0] is not None:
                return int(row[0])
            uid = self._next_uid()
            self._db.execute("UPDATE users SET uid = ? WHERE name = ?", (uid, name))
            return uid

    def _next_uid(self) -> int:
        """A uid from the dynamic range never given before, even to a removed user
        (whose files a newcomer must not inherit). Called with the lock held."""
        row = self._db.execute("SELECT value FROM counters WHERE name = 'uid'").fetchone()
        uid = FIRST_DYNAMIC_UID if row is None else int(row[0])
        self._db.execute(
            "INSERT INTO counters (name, value) VALUES ('uid', ?) "
            "ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            (uid + 1,),
        )
        return uid

    def quotas(self) -> dict[str, int]:
        """Each user's GPU quota, for users that have one (read at every decision)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT name, quota_gpus FROM users WHERE quota_gpus IS NOT NULL"
            ).fetchall()
        return {str(name): int(q) for name, q in rows}

    def remove(self, name: str) -> bool:
        """Delete a user, and so its token; their jobs stay, as records."""
        with self._lock:
            return self._db.execute("DELETE FROM users WHERE name = ?", (name,)).rowcount > 0

    def new_token_for(self, name: str) -> str | None:
        """Replace ``name``'s token (the old one stops working at once); None: no such user."""
        token = new_token()
        with self._lock:
            changed = self._db.execute(
                "UPDATE users SET token_hash = ? WHERE name = ?", (token_hash(token), name)
            ).rowcount
        if changed and name == ADMIN and self._token_file is not None:
            # The CLI on the server's own host reads the admin's token from there.
            write_private(self._token_file, token + "\n")
        return token if changed else None

    def ensure_admin(self, state_dir: Path) -> Path:
        """Make sure ``admin`` exists and ``state_dir/admin.token`` holds its token.

        Returns the token file's path. The file is written 0600 through a
        temporary name, so it is never seen half-written or readable by others.
        """
        path = self._token_file = state_dir / TOKEN_FILE
        held = _read_token(path)
        admin = self.get(ADMIN)
        if admin is not None and held is not None and self.by_token(held) == admin:
            return path
        if admin is None:
            _, token = self.add(ADMIN, admin=True)
        else:
            token = self.new_token_for(ADMIN) or ""
        write_private(path, token + "\n")
        return path

    def _one(self, where: str, value: str) -> User | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM users WHERE {where}", (value,)
            ).fetchone()
        return None if row is None else _user(row)


def _user(row: tuple[Any, ...]) -> User:
    name, admin, uid, quota, priority_max, created = row
    return User(str(name), bool(admin), uid, quota, int(priority_max), float(created))


def _read_token(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None
