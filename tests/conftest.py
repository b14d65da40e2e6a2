"""Shared settings and fixtures."""

import os
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings

from ringleader.runtime.workers.executor.local import LocalExecutor

# Clients find a local server's admin token through records under the config
# dir (ringleader.credentials): the tests keep theirs out of the user's own.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="ringleader-test-config-")
os.environ.pop("RINGLEADER_TOKEN", None)
# Kept interpolations (ringleader.perf._kept_spread) start empty for each run of the tests.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ringleader-test-cache-")
os.environ.pop("RINGLEADER_CACHE", None)

settings.register_profile("ci", max_examples=60, deadline=None)
settings.load_profile("ci")


@pytest.fixture
def executor() -> Iterator[LocalExecutor]:
    """A local executor on 2 virtual devices, its fork server ready for warm starts."""
    ex = LocalExecutor(gpus=2)
    assert ex.warm.ready(60), "the fork server did not finish importing"
    assert ex.bare.ready(60), "the bare fork server did not start"
    yield ex
    ex.close()
