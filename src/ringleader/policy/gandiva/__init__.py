"""Gandiva's mechanisms as one share stage: groups, time-slicing, packing, migration.

``sharing.Sharing`` is the stage; ``groups`` finds Gandiva's groups from where jobs
are. ``_incremental`` keeps the groups from one decision to the next and indexes
the ones with room.
"""
