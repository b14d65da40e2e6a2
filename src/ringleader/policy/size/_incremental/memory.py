"""What an elastic size stage keeps between decisions: its bases and its chains."""

from __future__ import annotations

from ringleader.policy.size._incremental.bases import LastBase
from ringleader.policy.size._incremental.chains import Chains


class Growing:
    """The last decision's base counts (``LastBase``) and the growth chains kept across
    decisions (``Chains``) of one ``Doubling`` or ``OptimusGreedy``."""

    __slots__ = ("base", "chains")

    def __init__(self) -> None:
        self.base = LastBase()
        self.chains = Chains()
