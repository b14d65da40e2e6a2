"""Which rows a read wants, in SQL: every column, a page, a job's owner.

A page is cut by a cursor (the ``seq`` of the last job shown), not by an
offset, so it stays valid however many jobs arrive between pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringleader.runtime.state.rows import State
from ringleader.runtime.state.schema import COLUMNS


@dataclass(frozen=True, slots=True)
class PageQuery:
    """Which jobs a listing wants: at most ``limit``, after ``cursor``, filtered."""

    limit: int = 100
    cursor: int | None = None
    states: tuple[str, ...] = ()
    user: str | None = None
    newest_first: bool = False


SELECT = f"SELECT {', '.join(COLUMNS)} FROM jobs"
SELECT_SEQ = f"SELECT seq, {', '.join(COLUMNS)} FROM jobs"
"""Also the raw ``seq`` (a damaged row's parsed one is not to be trusted): the page cursor."""
OWNER = "CASE WHEN json_valid(spec) THEN json_extract(spec, '$.user') END"
"""A row's user in SQL: NULL for a spec that is not JSON (a damaged row), never an error."""
FINISHED = ", ".join(f"'{s.value}'" for s in State if s.finished)


def page_sql(query: PageQuery) -> tuple[str, list[object]]:
    """The select for one page of ``query`` (one row more than its limit: is there a next?)."""
    where: list[str] = []
    params: list[object] = []
    if query.cursor is not None:
        where.append("seq < ?" if query.newest_first else "seq > ?")
        params.append(query.cursor)
    if query.states:
        where.append(f"state IN ({', '.join('?' for _ in query.states)})")
        params.extend(query.states)
    if query.user is not None:
        where.append(f"{OWNER} = ?")
        params.append(query.user)
    sql = SELECT_SEQ + (f" WHERE {' AND '.join(where)}" if where else "")
    sql += f" ORDER BY seq {'DESC' if query.newest_first else 'ASC'} LIMIT ?"
    return sql, [*params, query.limit + 1]
