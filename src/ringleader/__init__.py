"""ringleader: a scheduler for deep-learning training jobs on shared GPU clusters.

One pure policy core decides; a discrete-event simulator and a real runtime
carry its plans out. See ``docs/architecture.md``.
"""

__version__ = "0.1.0"
