"""Where a job's speed model comes from before the allocator can use it (SPEC A4).

* ``Precompute``: the model is known on arrival (measured offline, or carried
  over from earlier runs), so every job is a candidate from the start.
* ``Exploratory``: a new job first runs a short probe at each of a few sizes
  (default 2.5 min at 1, 2, 4 and 8 GPUs), holding the largest probe size for
  the whole exploration as the seed does; once every probe has run long
  enough, its model is fitted from what it reported and it joins the others.

Fitting is memoised on the samples themselves, so a policy that is asked again
and again about the same job does not refit it: the function stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ringleader.perf.errors import ModelFitError
from ringleader.perf.gradient import online_goodput
from ringleader.perf.overlap import anchored, fit_overlap, overlap_model
from ringleader.perf.speed import SpeedModel, StepSample, fit_speed_model
from ringleader.policy.model.memory import Memory, memory_of
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import ClusterView, JobShape, JobView, Observation
from ringleader.policy.profile._incremental.candidates import LastCandidates
from ringleader.policy.profile.stage import Probe

OVERLAP_AFTER = 2
"""Sizes a job that adapts its batch must have run at before Pollux's overlap model is
fitted to it: from one size the compute prior (all of its step, per example) grows it
faster, which light loads reward (``docs/pollux.md``)."""


class PolicyInputError(ValueError):
    """The snapshot lacks something the chosen policy needs; names the job and the fix."""


@lru_cache(maxsize=8192)
def _fit(shape: JobShape, measured: tuple[tuple[int, float, float], ...]) -> SpeedModel:
    return fit_speed_model(
        tuple(StepSample(*m) for m in measured),
        algorithm=shape.algorithm,
        grad_bytes=shape.grad_bytes,
        examples_per_epoch=shape.examples_per_epoch,
        batch_per_worker=shape.batch_per_worker,
        global_batch=shape.global_batch,
    )


def fitted_model(job: JobView) -> SpeedModel:
    """The speed model fitted from everything ``job`` has reported."""
    return _fit(job.shape, _measured(job.observations))


def _measured(sizes: Mapping[int, Observation]) -> tuple[tuple[int, float, float], ...]:
    """``(workers, seconds per step, batch per worker)`` at each of ``sizes``, by size:
    plain tuples, as fits are memoised on them and they hash in C, where
    ``StepSample``s (dataclasses) hash in Python; the Exploratory policy asks this of
    every profiled job at every event."""
    return tuple((w, obs.step_time, obs.batch_per_worker) for w, obs in sorted(sizes.items()))


def with_kin(job: JobView) -> Mapping[int, Observation]:
    """``job``'s step times by size, and its kin's (``spine.kin``) at the sizes it has
    not run at: what a job that adapts its batch is fitted from."""
    if not job.kin or job.gradient is None:
        return job.observations
    return {**job.kin, **job.observations}


@lru_cache(maxsize=8192)
def _prior(shape: JobShape, step: float, workers: int = 1) -> SpeedModel:
    """Perfect scaling from one step time at ``workers``; one object per input, so
    downstream memos hit. Weak scaling: the same step time at every size; strong
    scaling (a fixed global batch): all of it compute, so it shrinks with the batch."""
    if shape.global_batch is None:
        return _one_term(shape, (0.0, 0.0, 0.0, 0.0, step))
    return _one_term(shape, (step * workers / shape.global_batch, 0.0, 0.0, 0.0, 0.0))


@lru_cache(maxsize=8192)
def _compute_prior(shape: JobShape, step: float, batch: float) -> SpeedModel:
    """Perfect scaling for a job that adapts its batch: all of its one step time is
    compute, in proportion to the examples each GPU takes. The weak-scaling prior
    (the same step time at any batch) would tell it that one GPU takes the largest
    batch as fast as many, so no count would look better than another, and a job
    measured at one size would never be given a second."""
    return _one_term(shape, (step / max(batch, 1), 0.0, 0.0, 0.0, 0.0))


def _one_term(shape: JobShape, theta: tuple[float, float, float, float, float]) -> SpeedModel:
    """A prior: ``shape``'s job with a step time of one term, ``theta`` (rank 1)."""
    return SpeedModel(
        theta,
        shape.algorithm,
        shape.grad_bytes,
        shape.batch_per_worker,
        shape.examples_per_epoch,
        rank=1,
        global_batch=shape.global_batch,
    )


@dataclass(frozen=True, slots=True)
class Precompute:
    name: str = "precompute"

    @property
    def known_on_arrival(self) -> bool:
        return True

    @property
    def probes(self) -> bool:
        return False

    memory: Memory[LastCandidates] = field(
        default_factory=memory_of(LastCandidates), init=False, repr=False, compare=False
    )
    """The last split's candidates: not part of what the stage is, nor of its equality."""

    def split(
        self, jobs: Sequence[JobView], cluster: ClusterView | None = None
    ) -> tuple[list[Candidate], list[JobView]]:
        return self.memory.kept.split(jobs, self._candidate), []

    @staticmethod
    def _candidate(job: JobView) -> Candidate:
        if job.speed is not None:
            return Candidate(job, job.speed)
        try:
            return Candidate(job, fitted_model(job))
        except ModelFitError as err:
            raise PolicyInputError(
                f"job {job.id}: precomputed profiling needs a speed model on arrival "
                f"({err}); give the job a profile or use exploratory profiling"
            ) from err

    def probe(self, job: JobView) -> Probe | None:
        return None


@dataclass(frozen=True, slots=True)
class Exploratory:
    probe_sizes: tuple[int, ...] = (1, 2, 4, 8)
    window_s: float = 150.0
    name: str = "exploratory"

    @property
    def known_on_arrival(self) -> bool:
        return False

    @property
    def probes(self) -> bool:
        return True

    memory: Memory[LastCandidates] = field(
        default_factory=memory_of(LastCandidates), init=False, repr=False, compare=False
    )
    """The last split's candidates of profiled jobs: a candidate is fitted from the step
    times, and refitting (a memo keyed on them, built per job) and building every
    profiled job's candidate at every event was half a trace simulation."""

    def _sizes(self, job: JobView) -> list[int]:
        sizes = [w for w in self.probe_sizes if job.min_gpus <= w <= job.max_gpus]
        return sizes or [job.min_gpus]

    def probe(self, job: JobView) -> Probe | None:
        """The probe ``job`` should run now, or ``None`` when it is fully profiled."""
        sizes = self._sizes(job)
        for w in sizes:
            obs = job.observations.get(w)
            seen = obs.seconds if obs is not None else 0.0
            if seen < self.window_s:
                return Probe(w, self.window_s - seen, max(sizes))
        return None

    def _probing(self, job: JobView) -> bool:
        """Whether ``probe`` has a probe for ``job``, without making it (asked at every
        decision of every job not yet profiled: most have not run at all, and one with
        no observations probes its first size, if the window is any time at all)."""
        if not job.observations and self.window_s > 0:
            return True
        for w in self._sizes(job):
            obs = job.observations.get(w)
            if (obs.seconds if obs is not None else 0.0) < self.window_s:
                return True
        return False

    def split(
        self, jobs: Sequence[JobView], cluster: ClusterView | None = None
    ) -> tuple[list[Candidate], list[JobView]]:
        known: list[Candidate] = []
        exploring: list[JobView] = []
        memo = self.memory.kept
        for job in jobs:
            # A view profiled once stays so (the seconds run at each size only grow), so
            # one with a kept candidate is not asked whether it probes: one look-up a job.
            c = memo.kept(job)
            if c is None:
                if self._probing(job):
                    exploring.append(job)
                    continue
                c = self._candidate(job)
                memo.keep(job, c)
            known.append(c)
        return known, exploring

    @staticmethod
    def _candidate(job: JobView) -> Candidate:
        # Only one probe size fits this job: nothing to choose between, so it runs at
        # its one size like a fixed-size job. Said before fitting, as a fit from one
        # worker count is refused each time (a refusal is not memoised) and most jobs
        # of a trace fit on one GPU (cluster07: 9,854 of 12,701 fits).
        if len(job.observations) < 2:
            return Candidate(job, None)
        try:
            return Candidate(job, fitted_model(job))
        except ModelFitError:
            # The samples support no model (bad values, no single-worker time): it
            # runs at its size, as a job measured at one size does.
            return Candidate(job, None)


@dataclass(frozen=True, slots=True)
class Online:
    """Learn as the job runs, with no probing phase: what a real cluster can know.

    A model given with the job wins; otherwise one fitted from what the job
    reported at two or more sizes; otherwise a prior that assumes perfect
    scaling from its one measured step time, so it is measured at a second
    size soon, after which the fit takes over. A job that has reported
    nothing is marked unmeasured: the allocators grow it before measured jobs
    rather than rank a guess (1 s per step, shape unknown) against them.
    """

    name: str = "online"

    @property
    def known_on_arrival(self) -> bool:
        return False

    @property
    def probes(self) -> bool:
        return False

    memory: Memory[LastCandidates] = field(
        default_factory=memory_of(LastCandidates), init=False, repr=False, compare=False
    )
    """The last split's candidates: not part of what the stage is, nor of its equality."""

    @staticmethod
    def prior(job: JobView) -> SpeedModel:
        batch = float(job.shape.batch_per_worker)  # float: mypyc refuses an int in a float variable
        if not job.observations:
            step, workers = 1.0, 1
        else:
            workers, seen = next(iter(job.observations.items()))
            step, batch = seen.step_time, seen.batch_per_worker
        if job.gradient is not None:
            return _compute_prior(job.shape, step, batch)
        return _prior(job.shape, step, workers)

    def split(
        self, jobs: Sequence[JobView], cluster: ClusterView | None = None
    ) -> tuple[list[Candidate], list[JobView]]:
        per_node = cluster.widest_node if cluster is not None else 0
        return self.memory.kept.split(jobs, lambda job: self._candidate(job, per_node)), []

    @classmethod
    def plain_model(cls, job: JobView, per_node: int = 0) -> tuple[SpeedModel, bool]:
        """The job's step times as fitted from what it reported (its prior where fewer
        than two sizes were measured, or the fit fails), and whether any was measured.

        A job that adapts its batch is fitted from its kin's sizes too (``with_kin``).
        One that ran at ``OVERLAP_AFTER`` sizes or more is fitted
        with Pollux's terms (``perf.overlap``) on nodes of ``per_node`` GPUs (0: not
        known, and the count-only fit): its goodput is weighed at every batch it may
        take, and the first count that spans two nodes is not a point on the curve of
        the counts within one. It answers as measured at each count it was measured
        on (``perf.overlap.anchored``)."""
        sizes = with_kin(job)
        if per_node > 0 and job.gradient is not None and len(sizes) >= OVERLAP_AFTER:
            try:
                most = job.gradient.per_gpu_max
                samples = _measured(sizes)
                fitted = overlap_model(
                    cls.prior(job), fit_overlap(samples, per_node, most), per_node, most
                )
                return anchored(fitted, samples), True
            except ModelFitError:
                pass
        model = None
        if len(sizes) >= 2:
            try:
                model = _fit(job.shape, _measured(sizes))
            except ModelFitError:
                model = None
        measured = model is not None or bool(sizes)
        return (cls.prior(job) if model is None else model), measured

    @classmethod
    def _candidate(cls, job: JobView, per_node: int = 0) -> Candidate:
        model = job.speed
        if model is not None:
            return Candidate(job, model)
        model, measured = cls.plain_model(job, per_node)
        if job.gradient is not None:  # it adapts its batch: weigh it by goodput
            model = online_goodput(model, job.gradient)
        return Candidate(job, model, measured=measured)

    def probe(self, job: JobView) -> Probe | None:
        return None
