"""The order stage's protocol: who is served first.

An order stage may also bound each user's GPUs (``UserShares``, as fair share
does): it says so with ``bounds_users``, and the pipeline then sizes each
user's jobs within their share first. A stage that does not say so bounds no
one, so a user-written order needs only the three members of ``Order``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from ringleader.policy.model.objective import Candidate


class Order(Protocol):
    """Who is served first (see the module docstring)."""

    @property
    def needs_speed(self) -> bool:
        """Whether the order reads speed models (so the policy must have them)."""
        ...

    @property
    def needs_true_remaining(self) -> bool:
        """Whether it reads each job's true remaining time (an oracle)."""
        ...

    def order(self, jobs: Sequence[Candidate], now: float) -> list[Candidate]:
        """``jobs`` (given in submission order) in the order to serve them."""
        ...


class UserShares(Order, Protocol):
    """An order that also bounds each user's GPUs (``order.fairshare.FairShare``)."""

    @property
    def bounds_users(self) -> bool: ...

    def order_and_shares(
        self, jobs: Sequence[Candidate], now: float, capacity: int
    ) -> tuple[list[Candidate], dict[str, int]]:
        """The order, and each user's share of ``capacity`` GPUs."""
        ...


def user_shares(order: Order) -> UserShares | None:
    """``order`` as one that bounds users' GPUs, if it says it does (``bounds_users``)."""
    return cast(UserShares, order) if getattr(order, "bounds_users", False) else None
