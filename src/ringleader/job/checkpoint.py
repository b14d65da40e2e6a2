"""Checkpoints a crash cannot half-write, and that say when they are damaged.

A checkpoint is one file, ``ckpt-<step>.rlck``: a magic string, the SHA-256 of
the payload, then the payload (``torch.save`` of the job's state). It is written
to a temporary file in the same directory, fsynced, renamed into place and the
directory fsynced, so a reader sees either the whole old file set or the whole
new one. On restore the newest checkpoint whose checksum matches wins; a
corrupt or truncated one is reported and the previous one used, which is why
more than one is kept. When every one is damaged the restore fails
(``CheckpointsDamaged``) rather than start the training over, unless the
job's spec says ``on_bad_checkpoint: restart``.

Loading uses ``torch.load(weights_only=True)``: tensors, numbers, strings and
containers of them — what model and optimizer ``state_dict``s hold — and never
arbitrary pickled code.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

MAGIC = b"RLCKPT1\n"
_DIGEST = 32
_NAME = re.compile(r"^ckpt-(\d{12})\.rlck$")
DAMAGED_SUFFIX = ".damaged"
"""Appended to a damaged checkpoint's name when a restart sets it aside (kept for a look)."""

OnBadCheckpoint = Literal["fail", "restart"]
"""What a job does when checkpoints exist and every one is damaged (its spec's choice)."""
ON_BAD_CHECKPOINT_ENV = "RINGLEADER_ON_BAD_CHECKPOINT"
"""The variable through which the scheduler tells every worker its spec's choice."""


class CorruptCheckpoint(ValueError):
    """A checkpoint file whose contents do not match its checksum."""


class CheckpointsUnreadable(OSError):
    """Checkpoints exist but none could be read for a reason other than damage.

    An I/O error (EIO, a stale NFS handle) may pass; starting over from step 0
    would throw the training away for good, since the old checkpoints are then
    pruned. Failing the attempt lets the retry read them.
    """


class CheckpointsDamaged(ValueError):
    """Checkpoints exist but every one is damaged (checksum, truncation, unloadable payload).

    Returning "nothing to restore" here would start the training over from
    step 0 without a word, and the next checkpoints would prune the damaged
    ones for good; a person should decide that, so the restore fails instead.
    """

    def __init__(self, directory: Path, count: int, first_reason: str) -> None:
        self.directory, self.count, self.first_reason = directory, count, first_reason
        super().__init__(
            f"all {count} checkpoint(s) in {directory} are damaged (first: {first_reason})"
        )


def on_bad_checkpoint_from_env() -> OnBadCheckpoint:
    """The job's choice, as the scheduler set it; ``fail`` where nothing set it (torchrun)."""
    value = os.environ.get(ON_BAD_CHECKPOINT_ENV, "fail")
    if value == "restart":
        return "restart"
    if value == "fail":
        return "fail"
    raise ValueError(f"{ON_BAD_CHECKPOINT_ENV}={value[:40]!r}: give 'fail' or 'restart'")


@dataclass(frozen=True, slots=True)
class Restored:
    step: int
    state: dict[str, Any]
    path: Path
    skipped: tuple[Path, ...] = ()
    """Newer checkpoints passed over because they were corrupt."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointStore:
    """Atomic, checksummed checkpoints of one job in one directory."""

    def __init__(self, directory: Path | str, keep: int = 2) -> None:
        if keep < 2:
            raise ValueError("keep at least 2 checkpoints, so a corrupt newest has a fallback")
        self.directory = Path(directory)
        self.keep = keep
        self._set_aside: tuple[Path, ...] = ()
        """Damaged checkpoints a restart passed over, renamed at the next save."""

    def path_for(self, step: int) -> Path:
        return self.directory / f"ckpt-{step:012d}.rlck"

    def steps(self) -> list[int]:
        """Steps that have a checkpoint file, oldest first (checksums not checked)."""
        if not self.directory.is_dir():
            return []
        found = (_NAME.match(p.name) for p in self.directory.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def save(self, step: int, state: dict[str, Any]) -> Path:
        """Write ``state`` as the checkpoint of ``step``; prune beyond ``keep``."""
        import torch

        if step < 0:
            raise ValueError(f"step must be non-negative, got {step}")
        buffer = io.BytesIO()
        torch.save(state, buffer)
        payload = buffer.getvalue()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._put_aside_damaged()  # first: this save may reuse a damaged one's step
        target = self.path_for(step)
        fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC)
                f.write(hashlib.sha256(payload).digest())
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(self.directory)
        for old in self.steps()[: -self.keep]:
            self.path_for(old).unlink(missing_ok=True)
        return target

    @staticmethod
    def read(path: Path) -> dict[str, Any]:
        """One checkpoint's state; raises ``CorruptCheckpoint`` if it is damaged."""
        import torch

        blob = path.read_bytes()
        head = len(MAGIC) + _DIGEST
        if len(blob) < head or not blob.startswith(MAGIC):
            raise CorruptCheckpoint(f"{path}: not a ringleader checkpoint or truncated header")
        digest, payload = blob[len(MAGIC) : head], blob[head:]
        if hashlib.sha256(payload).digest() != digest:
            raise CorruptCheckpoint(f"{path}: checksum mismatch (partial or damaged write)")
        state = torch.load(io.BytesIO(payload), weights_only=True)
        if not isinstance(state, dict):
            raise CorruptCheckpoint(f"{path}: payload is {type(state).__name__}, not a dict")
        return state

    def restore(
        self,
        on_skip: Callable[[Path, str], None] | None = None,
        on_all_damaged: OnBadCheckpoint = "fail",
    ) -> Restored | None:
        """The newest intact checkpoint, or ``None`` when there is none to resume from.

        Raises ``CheckpointsUnreadable`` when a checkpoint could not be read
        (an I/O error) and none could, and ``CheckpointsDamaged`` when every
        one is damaged, unless ``on_all_damaged`` is ``"restart"``: then the
        answer is ``None`` and the damaged files are set aside at the next
        save, since they would otherwise outrank (and so prune) the new ones.
        """
        skipped: list[Path] = []
        io_error: OSError | None = None
        first_reason = ""
        for step in reversed(self.steps()):
            path = self.path_for(step)
            try:
                state = self.read(path)
            except (CorruptCheckpoint, OSError, RuntimeError, EOFError) as err:
                skipped.append(path)
                if isinstance(err, OSError) and io_error is None:
                    io_error = err
                first_reason = first_reason or str(err)
                if on_skip is not None:
                    on_skip(path, str(err))
                continue
            return Restored(step, state, path, tuple(skipped))
        if io_error is not None:
            raise CheckpointsUnreadable(
                f"{len(skipped)} checkpoint(s) in {self.directory} could not be read "
                f"({io_error}); not starting over from step 0"
            )
        if skipped and on_all_damaged == "fail":
            raise CheckpointsDamaged(self.directory, len(skipped), first_reason)
        self._set_aside = tuple(skipped)
        return None

    def _put_aside_damaged(self) -> None:
        """Rename the damaged checkpoints a restart passed over, out of ``steps()``.

        Done at the first save rather than at the restore: only rank 0 saves,
        and by then every rank has finished reading, so no rank finds a file
        gone under it.
        """
        for path in self._set_aside:
            # A file gone already (removed by hand) has nothing left to set aside.
            with contextlib.suppress(FileNotFoundError):
                path.rename(path.with_name(path.name + DAMAGED_SUFFIX))
        self._set_aside = ()
