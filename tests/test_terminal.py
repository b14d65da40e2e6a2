"""The CLI shows text from users and jobs literally (``ringleader.cli.terminal``)."""

from __future__ import annotations

import pytest

from ringleader.cli.terminal import console, shown


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("\x1b[2J", "\\x1b[2J"),
        ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),
        ("abc\u202edcb", "abc\\u202edcb"),
        ("\x9b31m", "\\x9b31m"),
        ("a\nb\tc", "a\\x0ab\\x09c"),
        ("[/]", "[/]"),
        ("日本語", "日本語"),
    ],
)
def test_controls_are_escaped_on_one_line(text: str, expected: str) -> None:
    assert shown(text) == expected


def test_a_log_keeps_its_lines_and_a_carriage_return_starts_a_new_one() -> None:
    assert shown("a\r\nb\rc\n\x1b[1m", multiline=True) == "a\nb\nc\n\\x1b[1m"


def test_markup_in_data_is_printed_as_it_is() -> None:
    out = console()
    with out.capture() as captured:
        out.print("[/] [bold]x[/] :smile:")
    assert captured.get().strip() == "[/] [bold]x[/] :smile:"
