"""Who a job runs as: its owner's Unix uid, never the server's root.

A server running as root runs each user's jobs as that user's uid (set with
``ringleader users add --uid``, else one given from a range no login uses).
The job's directory belongs to that uid, mode 0700, inside a state dir that
others may pass through but not list (0711); the database and the admin
token stay 0600 root's. So from inside a job, the database, the tokens and
other users' job directories can be neither read nor written.

The launch wrapper drops to the uid first thing, before it creates or opens
anything in the job's directory: the job owns that directory and could have
planted links in it, which root would follow and the uid cannot exploit.
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
from pathlib import Path

FIRST_DYNAMIC_UID = 1_000_000
"""Uids given to users without ``--uid``: above every login and container range in use
(systemd's dynamic users stop at 65519, /etc/subuid ranges at 65536 × n from 100000)."""


def not_reachable(paths: list[Path]) -> str | None:
    """Why another uid could not use one of ``paths``, if it could not: a directory on
    the way that others cannot search, or a file they cannot read."""
    for path in paths:
        path = path.resolve()
        if (closed := _closed_on_the_way(path)) is not None:
            return f"{closed} (on the way to {path}) cannot be entered by other users"
        if not path.stat().st_mode & stat.S_IROTH:
            return f"{path} cannot be read by other users"
    return None


def not_searchable(directory: Path) -> str | None:
    """Why another uid could not reach ``directory`` (or where it will be made), if it
    could not: an existing directory on the way to it that others cannot search."""
    closed = _closed_on_the_way(directory.resolve())
    return None if closed is None else f"{closed} cannot be entered by other users"


def _closed_on_the_way(path: Path) -> Path | None:
    """The first directory above ``path`` that others cannot search, if any; the walk
    stops at one not made yet (it will be made with the server's umask, searchable)."""
    for step in reversed(path.parents):
        try:
            mode = step.stat().st_mode
        except FileNotFoundError:
            return None
        if not mode & stat.S_IXOTH:
            return step
    return None


def interpreter_paths() -> list[Path]:
    """What a job's ``python`` needs to reach: the interpreter, its library, ringleader."""
    import ringleader

    return [
        Path(sys.executable),
        Path(os.__file__),
        Path(ringleader.__file__),
    ]


def can_switch() -> bool:
    """Whether this process may run jobs as other uids."""
    return os.geteuid() == 0


def gid_for(uid: int) -> int:
    """The uid's primary group if it has a passwd entry, else a group of the same number."""
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return uid


def home_for(uid: int, job_dir: Path) -> str:
    """The uid's home if it has one it owns, else the job's directory (caches go there)."""
    try:
        home = pwd.getpwuid(uid).pw_dir
        if os.stat(home).st_uid == uid:
            return home
    except (KeyError, OSError):
        pass
    return str(job_dir)


def prepare_job_dir(job_dir: Path, uid: int | None) -> None:
    """Make ``job_dir`` the uid's own, mode 0700, before its first worker starts
    (``uid`` None: the server's own jobs, the directory only made).

    Refuses a job directory that is a link (nothing in the state dir should be).
    """
    if uid is None:
        job_dir.mkdir(parents=True, exist_ok=True)
        return
    job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = job_dir.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{job_dir}: not a plain directory; refusing to hand it to uid {uid}")
    if st.st_uid != uid:
        os.chown(job_dir, uid, gid_for(uid), follow_symlinks=False)
    os.chmod(job_dir, 0o700)


def become(uid: int) -> None:
    """Drop every privilege for ``uid``'s: no supplementary groups, its group, its uid.

    Irreversible (real, effective and saved ids all change), which is the point.
    """
    os.setgroups([])
    gid = gid_for(uid)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
