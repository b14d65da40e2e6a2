"""The compiled hot path runs only where every extension matches its source.

The extensions here are empty files with an extension's name: what is tested
is which modules would be loaded from where, not the compiler (``make
compiled`` and ``bench/same_runs.py --check`` cover that).
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader import hotpath

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _tree(root: Path, built: bool = True) -> Path:
    """A package tree with every listed module's source, "built" and stamped."""
    digests = {}
    for module in hotpath.MODULES:
        source = hotpath.source_of(module, root)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"NAME = {module!r}\n")
        digests[module] = hotpath.digest(source)
        if built:
            source.with_name(source.stem + SUFFIX).write_bytes(b"")
    if built:
        (root / f"{hotpath.GROUP}__mypyc{SUFFIX}").write_bytes(b"")
    stamp = root / "ringleader" / hotpath.STAMP.name
    stamp.write_text(json.dumps({"python": sys.version, "modules": digests}))
    return stamp


def test_a_build_that_matches_its_source_runs(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert set(hotpath.extensions(tmp_path)) == set(hotpath.MODULES)
    assert hotpath.stale(tmp_path) == []


def test_nothing_built_is_not_stale(tmp_path: Path) -> None:
    _tree(tmp_path, built=False)
    assert hotpath.extensions(tmp_path) == {}
    assert hotpath.stale(tmp_path) == []


def test_a_source_changed_since_the_build_is_named(tmp_path: Path) -> None:
    _tree(tmp_path)
    changed = hotpath.source_of("ringleader.sim.engine", tmp_path)
    changed.write_text(changed.read_text() + "# edited after the build\n")
    assert hotpath.stale(tmp_path) == ["ringleader.sim.engine"]


def test_a_module_left_unbuilt_makes_the_build_stale(tmp_path: Path) -> None:
    _tree(tmp_path)
    source = hotpath.source_of("ringleader.policy.pipeline.deciding", tmp_path)
    source.with_name(source.stem + SUFFIX).unlink()
    assert hotpath.stale(tmp_path) == ["ringleader.policy.pipeline.deciding"]


def test_an_unlisted_module_built_long_ago_makes_the_build_stale(tmp_path: Path) -> None:
    """A module dropped from MODULES since the build must not run its old code."""
    _tree(tmp_path)
    old = tmp_path / "ringleader" / "sim" / "retired.py"
    old.write_text("OLD = True\n")
    old.with_name("retired" + SUFFIX).write_bytes(b"")
    assert hotpath.stale(tmp_path) == ["ringleader.sim.retired"]
    old.unlink()  # its source deleted too: still stale, and no error
    assert hotpath.stale(tmp_path) == ["ringleader.sim.retired"]


def test_the_shared_library_gone_makes_every_module_stale(tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / f"{hotpath.GROUP}__mypyc{SUFFIX}").unlink()
    assert hotpath.stale(tmp_path) == list(hotpath.MODULES)


@pytest.mark.parametrize("stamp_text", ["", "{not json", json.dumps({"python": "2.7"})])
def test_a_missing_or_foreign_stamp_makes_every_module_stale(
    tmp_path: Path, stamp_text: str
) -> None:
    stamp = _tree(tmp_path)
    stamp.write_text(stamp_text)
    assert hotpath.stale(tmp_path) == list(hotpath.MODULES)
    stamp.unlink()
    assert hotpath.stale(tmp_path) == list(hotpath.MODULES)


def test_the_fallback_loads_the_source_over_an_extension(tmp_path: Path) -> None:
    _tree(tmp_path)
    finder = hotpath._FromSource(hotpath.MODULES, tmp_path)
    spec = finder.find_spec("ringleader.policy.place._incremental.keeping")
    assert spec is not None and spec.origin is not None
    assert Path(spec.origin) == hotpath.source_of(
        "ringleader.policy.place._incremental.keeping", tmp_path
    )
    assert finder.find_spec("ringleader.cli") is None  # not listed: the usual import


def test_ringleader_pure_runs_the_source() -> None:
    """Whether or not this checkout has a build, RINGLEADER_PURE runs every .py."""
    code = (
        "import importlib, ringleader.hotpath as h\n"
        "for m in h.MODULES:\n"
        "    f = importlib.import_module(m).__file__\n"
        "    assert f.endswith('.py'), f\n"
        "print(h.in_use())\n"
    )
    env = {**os.environ, hotpath.PURE_ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
