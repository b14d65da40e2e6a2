"""Hostile input against a real server: the corpus of ``tests.hostile``, every case at once.

The corpus is generated from tables (every spec field, query value, job id,
body encoding and progress key × every hostile value), so a new field or a
new value is one line. The assertions: no server error, the server stays up,
a good job is still listed and unchanged, what a job wrote never damages its
row, and the CLI neither crashes nor hands the terminal a control sequence.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.job.records import progress_record, rank_of, read_exit_code
from tests.hostile import EXIT_FILES, RANK_NAMES, run_corpus
from tests.live_server import LiveServer, serving

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serving(tmp_path_factory.mktemp("hostile-server"), 2)


def test_the_hostile_corpus_gets_no_server_error_and_loses_nothing(
    server: LiveServer, tmp_path: Path
) -> None:
    report = run_corpus(server.url, tmp_path, server.state_dir / "ringleader.db", server.token)
    print(f"hostile corpus: {report.cases} cases {report.by_part}")
    assert report.cases >= 1000, report.by_part
    assert not report.failures, "\n".join(report.failures[:40])


@pytest.mark.parametrize(("content", "code"), EXIT_FILES)
def test_an_exit_file_is_read_as_a_code_or_nothing(
    tmp_path: Path, content: bytes, code: int | None
) -> None:
    path = tmp_path / "rank0.exit"
    path.write_bytes(content)
    assert read_exit_code(path) == code


def test_an_exit_file_that_is_a_fifo_a_link_or_a_folder_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "rank0.exit"
    os.mkfifo(fifo)
    link = tmp_path / "rank1.exit"
    link.symlink_to(tmp_path / "target")
    (tmp_path / "target").write_text("0\n")
    folder = tmp_path / "rank2.exit"
    folder.mkdir()
    assert [read_exit_code(p) for p in (fifo, link, folder)] == [None, None, None]


@pytest.mark.parametrize(("name", "rank"), RANK_NAMES)
def test_only_plain_rank_file_names_give_a_rank(name: str, rank: int | None) -> None:
    assert rank_of(Path(name), ".exit") == rank


def test_a_good_progress_line_keeps_its_values_and_drops_unknown_keys() -> None:
    line = b'{"g": 2, "step": 9, "epoch": 0.5, "loss": null, "t_launch": 1.5, "x": [1]}'
    assert progress_record(line) == {"g": 2, "step": 9, "epoch": 0.5, "loss": None, "t_launch": 1.5}
