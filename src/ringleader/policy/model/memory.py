"""What a policy keeps between decisions, declared: one ``Memory`` per stage.

A policy's output depends on the snapshot alone, but a stage may keep what it
worked out last time to find the same answer sooner (its ``_incremental``
machinery). Each such stage holds it in one field, ``memory``: a ``Memory``
made from a factory, which ``forget`` replaces with a fresh one. So what a
policy remembers is found in one place (``Policy.memories``), and the contract
of every cache is one statement a test can check: a policy that forgets before
each decision decides the same Plans (``tests/test_memory.py``).

The stages stay frozen: their configuration never changes; the memory they
hold is a mutable object, and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

Kept = TypeVar("Kept")


class Memory(Generic[Kept]):
    """One stage's kept state (``kept``), made by ``make`` and made afresh by ``forget``."""

    __slots__ = ("_make", "kept")

    def __init__(self, make: Callable[[], Kept]) -> None:
        self._make = make
        self.kept: Kept = make()

    def forget(self) -> None:
        """Drop what was kept: the next decision works everything out afresh."""
        self.kept = self._make()

    def __reduce__(self) -> tuple[type[Memory[Kept]], tuple[Callable[[], Kept]]]:
        return (Memory, (self._make,))  # what is kept is for the views at hand: none, once pickled

    def __repr__(self) -> str:
        return f"Memory({type(self.kept).__name__})"


def memory_of(make: Callable[[], Kept]) -> Callable[[], Memory[Kept]]:
    """The ``default_factory`` of a stage's ``memory`` field: one ``Memory`` per stage
    object, kept by ``make``. The field is not part of what the stage is: declare it
    ``field(default_factory=memory_of(...), init=False, repr=False, compare=False)``."""
    return lambda: Memory(make)
