"""Where a client finds its token: the environment, ``ringleader login``, or a server it runs.

In order:

1. ``RINGLEADER_TOKEN``;
2. the token ``ringleader login`` saved for this server's URL
   (``~/.config/ringleader/tokens.json``, mode 0600);
3. the admin token of a server this same Unix user started on this machine:
   each server records its URL and state dir under
   ``~/.config/ringleader/servers/``, and its ``admin.token`` (mode 0600)
   is readable only by whoever started it. So ``ringleader server`` and then
   ``ringleader jobs`` in another terminal just work, as they did before
   tokens, while another local user gets 401.

Standard library only: every CLI command reads this before it does anything.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

TOKEN_ENV = "RINGLEADER_TOKEN"
ADMIN_TOKEN_FILE = "admin.token"


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ringleader"


def tokens_file() -> Path:
    return config_dir() / "tokens.json"


def _servers_dir() -> Path:
    return config_dir() / "servers"


def _record_path(port: int) -> Path:
    return _servers_dir() / f"{port}.json"


def token_for(url: str) -> str | None:
    """The token to send to the server at ``url``, if one can be found."""
    return found_token(url)[0]


def found_token(url: str) -> tuple[str | None, str]:
    """The token for ``url`` and where it was found, in words (for an error that says
    which token a server refused), or (None, "") where none was."""
    if token := os.environ.get(TOKEN_ENV, "").strip():
        return token, TOKEN_ENV
    saved = _read_json(tokens_file())
    if isinstance(saved, dict) and isinstance(saved.get(url), str):
        return str(saved[url]), f"the token `ringleader login` saved in {tokens_file()}"
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1") or parts.port is None:
        return None, ""
    record = _read_json(_record_path(parts.port))
    if isinstance(record, dict) and isinstance(record.get("state_dir"), str):
        path = Path(record["state_dir"]) / ADMIN_TOKEN_FILE
        admin = _read_token(path)
        return (admin, f"the server's admin token in {path}") if admin else (None, "")
    return None, ""


def save_token(url: str, token: str) -> Path:
    """Keep ``token`` for ``url`` (``ringleader login``); the file is private to its user."""
    path = tokens_file()
    saved = _read_json(path)
    tokens = saved if isinstance(saved, dict) else {}
    tokens[url] = token
    write_private(path, json.dumps(tokens, indent=1, sort_keys=True))
    return path


def record_server(port: int, url: str, state_dir: Path) -> Path:
    """Note that this user runs a server at ``url`` (the CLI then finds its admin token)."""
    path = _record_path(port)
    record = {"url": url, "state_dir": str(state_dir.resolve()), "pid": os.getpid()}
    write_private(path, json.dumps(record))
    return path


def forget_server(port: int) -> None:
    path = _record_path(port)
    record = _read_json(path)
    if isinstance(record, dict) and record.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()


def _read_token(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()[:200] or None
    except (OSError, UnicodeDecodeError):
        return None


def _read_json(path: Path) -> object:
    try:
        with open(path, encoding="utf-8") as f:
            return json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, never seen half-written."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
