"""The commit-subject check that ``make lint`` runs fails on a bad subject, and says which."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=GIT_ENV, check=True
    )
    return done.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "commit", "--allow-empty", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _check(repo: Path, since: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "commits.py"), "--repo", str(repo), "--since", since],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    # Before the convention: not checked.
    return repo, _commit(repo, "fix stuff")


def test_good_subjects_pass_and_a_merge_is_not_checked(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    _commit(repo, "policy/size: keep chains across decisions\n\nA/B 0.91x; same runs 30/30.")
    _git(repo, "checkout", "-q", "-b", "side")
    _commit(repo, "docs/scale, bench: one figure\n\nThe file and the doc agree.")
    _git(repo, "checkout", "-q", "main")
    _commit(repo, "tests: a second test\n\nWhy it is needed.")
    _git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'side'", "side")
    done = _check(repo, base)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 commits after" in done.stdout  # the merge among them, not judged


def test_each_bad_subject_is_named(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    long = _commit(repo, "policy: " + "x" * 70 + "\n\nA body.")
    no_area = _commit(repo, "Keep chains across decisions\n\nA body.")
    no_body = _commit(repo, "policy/size: keep chains across decisions")
    _commit(repo, "sim: fine\n\nA body.")
    done = _check(repo, base)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith(long[:10]) and "78 characters" in line for line in lines)
    assert any(line.startswith(no_area[:10]) and "no area" in line for line in lines)
    assert any(line.startswith(no_body[:10]) and "no body" in line for line in lines)
    assert "3 problem(s) in 4 commits" in done.stdout


def test_a_clone_without_the_first_commit_is_skipped_with_a_message(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    _commit(repo, "bad subject without area or body")
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)],
        capture_output=True,
        env=GIT_ENV,
        check=True,
    )
    done = _check(shallow, base)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not checked" in done.stdout and base in done.stdout
