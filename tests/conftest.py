"""Shared settings and fixtures."""

from collections.abc import Iterator

import pytest
from hypothesis import settings

from ringleader.runtime.executor.local import LocalExecutor

settings.register_profile("ci", max_examples=60, deadline=None)
settings.load_profile("ci")


@pytest.fixture
def executor() -> Iterator[LocalExecutor]:
    """A local executor on 2 virtual devices, its fork server ready for warm starts."""
    ex = LocalExecutor(gpus=2)
    assert ex.warm.ready(60), "the fork server did not finish importing"
    yield ex
    ex.warm.close()
