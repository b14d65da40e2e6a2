"""ringleader: a scheduler for deep-learning training jobs on shared GPU clusters.

One pure policy core decides; a discrete-event simulator and a real runtime
carry its plans out. See ``docs/architecture.md``. ``ringleader.Client`` is
the API from Python (``ringleader.client``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from ringleader import hotpath as _hotpath

_hotpath.choose()  # the compiled hot path, only where it matches its source

if TYPE_CHECKING:
    from ringleader.client import Client


def __getattr__(name: str) -> Any:
    # Imported on first use: `import ringleader` (every CLI command, every job) stays light.
    if name == "Client":
        from ringleader.client import Client

        return Client
    raise AttributeError(f"module 'ringleader' has no attribute {name!r}")


__all__ = ["Client", "__version__"]
