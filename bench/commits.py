"""The house's history: every commit since the convention began says what and why.

CONTRIBUTING.md sets the convention: a subject of at most 72 characters that
names its area (``policy/size: keep chains across decisions``), a blank line,
and a body with the why and the figures. A history of subjects like "fix" or
"more speed" cannot be read back, and history is never rewritten here, so
this checks each commit after ``SINCE`` (issue 56's first commit, where the
convention was written down) and exits 1 naming each one that breaks it.
Merge commits are not checked: their subjects are git's.

A clone without ``SINCE`` in its history (a shallow clone, a tarball) cannot
say which commits came after it, so the check is skipped with a message.

    python bench/commits.py                    # HEAD's history since SINCE
    python bench/commits.py --since REV --repo PATH
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SINCE = "104d526"
"""``bench/house: measure import circles, file and function sizes``: issue 56's first commit."""
MAX_SUBJECT = 72
AREA = re.compile(r"[\w.*/-]+(?:, ?[\w.*/-]+)*: \S")
"""``area: what``, the area a path or name without spaces (``policy/size``,
``docs/scale``, ``bench``), or several joined by commas."""

EXCUSED: frozenset[str] = frozenset(
    {
        "b3761b6eb691b4966aa324dee504a7d6465057af",  # landed without a body
    }
)
"""Commits that landed with a subject that breaks the rules: history is not
rewritten, so a full hash named here is not checked again."""

_FIELD = "\x1f"
_RECORD = "\x1e"


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: int
    subject: str
    body: str


def problems(commit: Commit) -> list[str]:
    """What is wrong with one commit's message; empty where it keeps the convention."""
    if commit.parents > 1 or commit.sha in EXCUSED:
        return []
    found = []
    if len(commit.subject) > MAX_SUBJECT:
        found.append(f"subject is {len(commit.subject)} characters (at most {MAX_SUBJECT})")
    if not AREA.match(commit.subject):
        found.append("subject names no area (`area: what`, e.g. `policy/size: keep chains`)")
    if not commit.body.strip():
        found.append("no body (a blank line, then why, and the figures where any moved)")
    return found


def history(repo: Path, since: str) -> list[Commit] | None:
    """The commits after ``since`` up to HEAD, newest first; None where ``since``
    is not in HEAD's history."""
    known = _git(repo, "merge-base", "--is-ancestor", since, "HEAD", check=False)
    if known.returncode != 0:
        return None
    fields = _FIELD.join(("%H", "%P", "%s", "%b"))
    out = _git(repo, "log", f"--format={fields}{_RECORD}", f"{since}..HEAD").stdout
    commits = []
    for record in out.split(_RECORD):
        if not record.strip():
            continue
        sha, parents, subject, body = record.lstrip("\n").split(_FIELD, 3)
        commits.append(Commit(sha, len(parents.split()), subject, body))
    return commits


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=check
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--since", default=SINCE, help="check the commits after this one")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the repository to check")
    args = parser.parse_args(argv)
    if _git(args.repo, "rev-parse", "--git-dir", check=False).returncode != 0:
        print(f"commit subjects: not checked: {args.repo} is not a git repository")
        return 0
    commits = history(args.repo, args.since)
    if commits is None:
        print(
            f"commit subjects: not checked: {args.since} is not in this clone's history"
            " (a shallow clone?); `git fetch --unshallow` to check them"
        )
        return 0
    bad = 0
    for commit in commits:
        for problem in problems(commit):
            bad += 1
            print(f"{commit.sha[:10]} {commit.subject!r}: {problem}")
    if bad:
        print(f"commit subjects: {bad} problem(s) in {len(commits)} commits after {args.since}")
        print("see CONTRIBUTING.md; a commit already shared is named in EXCUSED, not rewritten")
        return 1
    print(f"commit subjects: {len(commits)} commits after {args.since}, each as CONTRIBUTING says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
