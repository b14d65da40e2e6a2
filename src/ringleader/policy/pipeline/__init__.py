"""The pipeline: a policy composed of stages, order → size → place (``deciding.Policy``).

A package so that its speed machinery sits beside it, private (``_incremental``).
"""

from ringleader.policy.pipeline.deciding import Policy

__all__ = ["Policy"]
