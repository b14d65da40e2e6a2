"""Kin: what the jobs training the same model measured, for a job that has not run there.

A job that adapts its batch is sized by a model of its step times that the
profile stage fits from the sizes it ran at; until it has run at two, that is
a prior of perfect scaling, and a job told that grows wide, restarts, and
learns. On a shared cluster the same model is trained again and again (a sweep,
a team's nightly run, a course's assignment): the sizes one such job ran at say
how the next one scales before it has run at all. ``KinBook`` keeps, for each
model, the step time last measured at each size by any of its jobs, finished
ones included; ``JobView.kin`` hands a job its model's, and the profile stage
fits its own sizes and its kin's together, its own winning where both ran.

Jobs are kin when they report their gradient (they adapt their batch, so each
step time comes with the per-GPU batch it was taken at) and their shapes agree
on the data and the model: examples per epoch, gradient bytes and all-reduce.
Both bodies keep one book for as long as they run, and record a job's step
times when they build its view, so a view and its kin are one set of step
times (``spine.views``): a body builds a kept view anew once its kin changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ringleader.perf.allreduce import Algorithm
from ringleader.policy.model.views import JobShape, Observation

NO_KIN: Mapping[int, Observation] = MappingProxyType({})
"""One shared empty ``kin``: a job alone of its model, or that keeps its batch."""

Model = tuple[int, float, Algorithm]


def model_of(shape: JobShape) -> Model:
    """What makes two jobs kin: the data (examples per epoch) and the model (gradient
    bytes, and how they are all-reduced); not the batch, which each job picks."""
    return (shape.examples_per_epoch, shape.grad_bytes, shape.algorithm)


class KinBook:
    """Per model, the step time and batch last measured at each size by any of its jobs.

    ``kin(shape)`` is the same mapping object until a step time or batch in it
    changes (a longer measurement at the same step time changes nothing), so a
    body tells a view whose kin moved by identity.
    """

    __slots__ = ("_books",)

    def __init__(self) -> None:
        self._books: dict[Model, Mapping[int, Observation]] = {}

    def record(self, shape: JobShape, observations: Mapping[int, Observation]) -> None:
        """Keep ``observations``, one job's step times by size, as its model's latest."""
        if not observations:
            return
        model = model_of(shape)
        book = self._books.get(model, NO_KIN)
        changed = [
            (size, seen)
            for size, seen in observations.items()
            if (was := book.get(size)) is None
            or (was.step_time, was.batch_per_worker) != (seen.step_time, seen.batch_per_worker)
        ]
        if changed:
            self._books[model] = MappingProxyType({**book, **dict(changed)})

    def joined(
        self, shape: JobShape, observations: Mapping[int, Observation]
    ) -> Mapping[int, Observation]:
        """``record`` a job's step times, and give its model's: its view's ``kin``."""
        self.record(shape, observations)
        return self.kin(shape)

    def kin(self, shape: JobShape) -> Mapping[int, Observation]:
        """The step times by size that the jobs of ``shape``'s model measured."""
        return self._books.get(model_of(shape), NO_KIN)
