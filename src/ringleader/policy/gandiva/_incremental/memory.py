"""What Gandiva's stage keeps between decisions: its assignments, groups and free GPUs."""

from __future__ import annotations

from ringleader.policy.gandiva._incremental.regroup import LastGroups
from ringleader.policy.pipeline._incremental.assigning import LastAssignments
from ringleader.policy.place._incremental.free import Blank


class Gandiva:
    """The last decision's assignments, the groups kept from it, and the free-GPU blank
    each decision starts its index from."""

    __slots__ = ("assignments", "blank", "groups")

    def __init__(self) -> None:
        self.assignments = LastAssignments()
        self.groups = LastGroups()
        self.blank = Blank()
