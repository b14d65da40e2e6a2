"""Allreduce cost models: why some worker counts are cheap and others are not.

Each algorithm is reduced to three coefficients for ``p`` workers exchanging
``n`` bytes of gradients (Thakur, Rabenseifner & Gropp 2005):

* ``latency``: messages on the critical path, multiplied by ``α`` (s/message);
* ``transfer``: bytes sent on the critical path, as a multiple of ``n``,
  multiplied by ``β`` (s/byte);
* ``reduce``: bytes reduced on the critical path, as a multiple of ``n``,
  multiplied by ``γ`` (s/byte).

The NNLS speed model (``ringleader.perf.speed``) uses these coefficients as its
features, so the shape of each curve decides what a fitted job looks like
between and beyond the sizes it was measured at. All three are zero at
``p = 1``: a lone worker exchanges nothing.

Binary blocks is our reconstruction of Rabenseifner & Träff (2004), written
down in ``docs/perf-models.md``: ``p`` is split into power-of-two blocks, each
block runs halving-doubling, and each smaller block folds its partial result
into the next larger one and receives the final result back. The fold sends
the smaller block's whole share, so neighbouring blocks of similar size are
cheap (12 = 8 + 4) and very different ones are expensive (9 = 8 + 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache


class Algorithm(StrEnum):
    """Allreduce algorithms a job's communication library may use."""

    RING = "ring"
    HALVING_DOUBLING = "halving-doubling"
    """Recursive halving-doubling; defined for powers of two only."""
    MPICH = "mpich"
    """Halving-doubling, with extra ranks folded in and out (MPICH's bound)."""
    BINARY_BLOCKS = "binary-blocks"
    """Halving-doubling for powers of two, binary blocks otherwise (default)."""


@dataclass(frozen=True, slots=True)
class AllreduceCost:
    """Critical-path coefficients of one allreduce; see the module docstring."""

    latency: float
    transfer: float
    reduce: float

    def seconds(self, alpha: float, beta: float, gamma: float, nbytes: float) -> float:
        """Time of one allreduce of ``nbytes`` with the given network constants."""
        return self.latency * alpha + (self.transfer * beta + self.reduce * gamma) * nbytes


_ZERO = AllreduceCost(0.0, 0.0, 0.0)


def is_power_of_two(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


def _halving_doubling(p: int) -> AllreduceCost:
    share = (p - 1) / p
    return AllreduceCost(2.0 * math.log2(p), 2.0 * share, share)


def _ring(p: int) -> AllreduceCost:
    share = (p - 1) / p
    return AllreduceCost(2.0 * (p - 1), 2.0 * share, share)


def _mpich(p: int) -> AllreduceCost:
    if is_power_of_two(p):
        return _halving_doubling(p)
    base = _halving_doubling(1 << (p.bit_length() - 1))
    # The extra ranks send their whole vector in (reduced there) and get the
    # result back out: two more messages, 2n bytes sent, n bytes reduced.
    return AllreduceCost(base.latency + 2.0, base.transfer + 2.0, base.reduce + 1.0)


def _binary_blocks(p: int) -> AllreduceCost:
    if is_power_of_two(p):
        return _halving_doubling(p)
    exponents = [k for k in range(p.bit_length() - 1, -1, -1) if p >> k & 1]
    largest = exponents[0]
    top_share = 1.0 - 2.0**-largest
    latency = 2.0 * largest + 2.0 * (len(exponents) - 1)
    # Each smaller block sends its share (n / 2^k_small) into the next larger
    # block and receives the result back; the larger block reduces its own,
    # smaller, share (n / 2^k_larger).
    transfer = 2.0 * top_share + 2.0 * sum(2.0**-k for k in exponents[1:])
    reduce = top_share + sum(2.0**-k for k in exponents[:-1])
    return AllreduceCost(latency, transfer, reduce)


@lru_cache(maxsize=65536)
def allreduce_cost(algorithm: Algorithm, p: int) -> AllreduceCost:
    """Coefficients of one allreduce over ``p`` workers with ``algorithm``.

    Raises ``ValueError`` for ``p < 1`` and for halving-doubling at a ``p``
    that is not a power of two (use ``BINARY_BLOCKS`` or ``MPICH`` there).
    """
    if p < 1:
        raise ValueError(f"worker count must be at least 1, got {p}")
    if p == 1:
        return _ZERO
    match algorithm:
        case Algorithm.RING:
            return _ring(p)
        case Algorithm.HALVING_DOUBLING:
            if not is_power_of_two(p):
                raise ValueError(
                    f"halving-doubling needs a power-of-two worker count, got {p}; "
                    "use 'binary-blocks' or 'mpich' for other counts"
                )
            return _halving_doubling(p)
        case Algorithm.MPICH:
            return _mpich(p)
        case Algorithm.BINARY_BLOCKS:
            return _binary_blocks(p)
    raise ValueError(f"unknown allreduce algorithm {algorithm!r}")
