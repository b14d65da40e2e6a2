"""What the CLI prints is shown literally: no markup, no terminal control from data.

Job names, users, log lines, losses and server messages come from users and
from jobs, and a terminal obeys what it is sent: ``\\x1b[2J`` clears the
screen, an OSC sequence can retitle the window or write a hyperlink, and a
right-to-left override reorders what the eye reads. Rich would also read
``[/]`` in a job name as markup and crash. So every console here is made
with markup and emoji codes off, and every text from outside goes through
``shown``, which writes control characters as escapes (``\\x1b``) that a
person can read and a terminal does not act on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
"""C0 and C1 controls but tab and newline, line separators, and the bidirectional marks."""
_LINE_BREAKS = re.compile(r"[\n\t]")


def console(*, stderr: bool = False) -> Console:
    """A console that prints text as it is: no markup, no emoji codes, no highlighting."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, soft_wrap=stderr)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(value: object, *, multiline: bool = False) -> str:
    """``value`` as text safe for a terminal: controls escaped; newlines kept if ``multiline``."""
    text = value if isinstance(value, str) else str(value)
    if multiline:  # a carriage return (a progress bar's redraw) reads as a new line
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub(_escape, text)
    if not multiline:
        text = _LINE_BREAKS.sub(_escape, text)
    return text


def compact_table(title: str | None = None) -> Table:
    """A borderless table, its columns one space apart: what fits most on 80 columns,
    for tables whose cells must not be cut (``whole_widths``)."""
    return Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0)
    )


def whole_widths(heads: Sequence[str], cells: Sequence[Sequence[str]]) -> list[int]:
    """Each column's width that cuts nothing: its widest value, or header line."""
    return [
        max([*map(len, head.split("\n")), *(len(row[i]) for row in cells)])
        for i, head in enumerate(heads)
    ]
