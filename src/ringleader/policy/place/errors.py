"""Errors a place stage raises, apart from the stages themselves.

Here rather than in ``ringleader.policy.place.fewest_nodes`` so that module can be
compiled (``ringleader.hotpath``): the compiled build cannot define a
subclass of ``RuntimeError``.
"""

from __future__ import annotations


class PlacementError(RuntimeError):
    """The allocation asks for more GPUs than the cluster has free."""
