"""A warm worker's ``destroy_process_group`` keeps the groups it destroys; torch's otherwise."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ringleader.runtime.workers import process_groups


@pytest.fixture
def keeping() -> Iterator[None]:
    original = c10d.destroy_process_group
    assert dist.destroy_process_group is original
    try:
        assert process_groups.keep_destroyed_groups()
        yield
    finally:
        c10d.destroy_process_group = original
        dist.destroy_process_group = original
        process_groups.KEPT.clear()


def test_destroying_the_default_group_keeps_it_and_its_subgroups(keeping: None) -> None:
    assert dist.destroy_process_group is c10d.destroy_process_group
    assert inspect.signature(dist.destroy_process_group) == inspect.signature(
        dist.destroy_process_group.__wrapped__  # type: ignore[attr-defined]
    )
    assert process_groups.keep_destroyed_groups()  # a second call wraps nothing again
    assert not hasattr(dist.destroy_process_group.__wrapped__, "__wrapped__")  # type: ignore[attr-defined]
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    world = dist.group.WORLD
    sub = dist.new_group([0])
    dist.destroy_process_group(sub)
    assert [sub] == process_groups.KEPT
    assert sub not in c10d._world.pg_map  # torch's own bookkeeping, as without us
    dist.destroy_process_group()
    assert [sub, world] == process_groups.KEPT
    assert not dist.is_initialized()


def test_without_torch_distributed_imported_nothing_is_wrapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(__import__("sys").modules, "torch.distributed.distributed_c10d")
    assert not process_groups.keep_destroyed_groups()
