"""Public cluster traces: loading, validation, and turning trace rows into simulated jobs."""

from ringleader.traces.load import TraceError, TraceJob, load_trace, resolve_trace

__all__ = ["TraceError", "TraceJob", "load_trace", "resolve_trace"]
