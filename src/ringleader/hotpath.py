"""The optional compiled hot path: the simulator and the policy core built with mypyc.

A simulation or a decision spends its time in a few modules (the event loop,
the job states, the policy stages and the views they read). ``make compiled``
builds exactly those modules, unchanged, into C extensions beside their
sources; Python then imports the extension before the ``.py``. The pure-Python
code stays the reference: it is what CI tests and what runs wherever nothing
was built, and the compiled build plays the same runs to the same bits
(``bench/same_runs.py --check``).

An extension that no longer matches its source would run old code silently,
so the build records each source's digest, and ``ringleader`` checks them when
first imported: if any source changed since (or ``RINGLEADER_PURE`` is set),
every listed module is loaded from its ``.py`` instead, with a warning saying
how to rebuild. A half-compiled mix never runs.
"""

from __future__ import annotations

# Imported by every `import ringleader` (each CLI command, each job): where
# nothing is built this costs one walk of the package's directories, so hashlib,
# json and the build's own imports wait until something is built.
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

MODULES: tuple[str, ...] = (
    "ringleader.sim.jobs",
    "ringleader.sim.submitted",
    "ringleader.sim.engine",
    "ringleader.sim.occupancy",
    "ringleader.sim.pacing",
    "ringleader.sim.playing",
    "ringleader.sim.result",
    "ringleader.sim.ticks",
    "ringleader.spine.actions",
    "ringleader.spine.deciding",
    "ringleader.spine.effects",
    "ringleader.spine.observe",
    "ringleader.spine.round",
    "ringleader.spine.views",
    "ringleader.policy.pipeline._incremental.assigning",
    "ringleader.policy.model._incremental.beside",
    "ringleader.policy.gandiva._incremental.memory",
    "ringleader.policy.gandiva._incremental.openings",
    "ringleader.policy.gandiva._incremental.regroup",
    "ringleader.policy.gandiva.groups",
    "ringleader.policy.gandiva.sharing",
    "ringleader.policy.model.arrival",
    "ringleader.policy.model.memory",
    "ringleader.policy.model.needs",
    "ringleader.policy.model.objective",
    "ringleader.policy.model.plan",
    "ringleader.policy.model.views",
    "ringleader.policy.order.fairshare",
    "ringleader.policy.order.queues",
    "ringleader.policy.order.stage",
    "ringleader.policy.pipeline.deciding",
    "ringleader.policy.place._incremental.free",
    "ringleader.policy.place._incremental.keeping",
    "ringleader.policy.place.fewest_nodes",
    "ringleader.policy.place.stage",
    "ringleader.policy.place.type_aware",
    "ringleader.policy.profile._incremental.candidates",
    "ringleader.policy.profile.sources",
    "ringleader.policy.profile.stage",
    "ringleader.policy.share.packing",
    "ringleader.policy.share.stage",
    "ringleader.policy.share.timeslice",
    "ringleader.policy.size._incremental.bases",
    "ringleader.policy.size._incremental.batched",
    "ringleader.policy.size._incremental.chain",
    "ringleader.policy.size._incremental.chains",
    "ringleader.policy.size._incremental.cut",
    "ringleader.policy.size._incremental.flat",
    "ringleader.policy.size._incremental.kept",
    "ringleader.policy.size._incremental.memory",
    "ringleader.policy.size._incremental.walk",
    "ringleader.policy.size._incremental.walk_notes",
    "ringleader.policy.size.allocators",
    "ringleader.policy.size.goodput",
    "ringleader.policy.size.growth",
    "ringleader.policy.size.payback",
    "ringleader.policy.size.steps",
    "ringleader.policy.traffic",
)
"""What ``make compiled`` builds: where a trace simulation and a decision spend their time."""

PACKAGE = Path(__file__).resolve().parent
SOURCES = PACKAGE.parent
"""The directory holding the ``ringleader`` package (``src/`` in a checkout)."""
STAMP = PACKAGE / "_compiled.json"
"""Written by a build: each compiled module's source digest, and the Python it is for."""
GROUP = "ringleader_hot"
"""The name of the one shared library a build makes (``src/ringleader_hot__mypyc*.so``)."""
PURE_ENV = "RINGLEADER_PURE"


def source_of(module: str, root: Path = SOURCES) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def digest(path: Path) -> str:
    """The source's SHA-256 ("" where there is none: a module deleted since the build)."""
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def extensions(root: Path = SOURCES) -> dict[str, Path]:
    """Every built extension module in the package, listed or not (a module dropped
    from ``MODULES`` since a build would otherwise run its old code unchecked)."""
    found: dict[str, Path] = {}
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for folder, dirs, names in os.walk(root / "ringleader"):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        package = Path(folder).relative_to(root).parts
        for name in names:
            if name.endswith(suffixes):
                found[".".join((*package, name.split(".", 1)[0]))] = Path(folder, name)
    return found


def stale(
    root: Path = SOURCES, stamp: Path | None = None, built: dict[str, Path] | None = None
) -> list[str]:
    """The modules whose extension would not run their source as it is now: source
    changed since the build, built for another Python, listed but not built, built
    but not recorded, or the build's shared library gone. Empty where all match, or
    where nothing is built. ``built``: ``extensions(root)``, where the caller has it."""
    built = extensions(root) if built is None else built
    if not built:
        return []
    import json

    stamp = stamp if stamp is not None else root / "ringleader" / STAMP.name
    try:
        recorded = json.loads(stamp.read_text())
        digests = recorded["modules"] if recorded.get("python") == sys.version else {}
    except (OSError, ValueError, KeyError, TypeError):
        digests = {}
    if not any(root.glob(f"{GROUP}__mypyc*")):
        digests = {}
    changed = []
    for module in (*MODULES, *sorted(built.keys() - set(MODULES))):
        source = source_of(module, root)
        if module not in built or digests.get(module) != digest(source):
            changed.append(module)
    return changed


class _FromSource:
    """Loads the listed modules from their ``.py``, passing over a built extension."""

    def __init__(self, modules: Sequence[str], root: Path) -> None:
        self.modules = frozenset(modules)
        self.root = root

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.modules:
            return None  # every other import in the process passes here: no file look-up
        source = source_of(fullname, self.root)
        if not source.exists():
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(fullname, source)


def choose() -> None:
    """Run the compiled modules only where every one matches its source (see the module
    docstring); called once, when ``ringleader`` is first imported."""
    if any(isinstance(f, _FromSource) for f in sys.meta_path):
        return
    built = extensions()
    if not built:
        return
    if os.environ.get(PURE_ENV):
        sys.meta_path.insert(0, _FromSource([*MODULES, *built], SOURCES))
        return
    changed = stale(built=built)
    if changed:
        sys.meta_path.insert(0, _FromSource([*MODULES, *built], SOURCES))
        names = ", ".join(changed[:3])
        if len(changed) > 3:
            names += f" and {len(changed) - 3} more"
        sys.stderr.write(
            f"ringleader: the compiled hot path does not match its source ({names}): "
            "running the pure-Python code. `make compiled` builds it again, "
            "`make uncompiled` removes it.\n"
        )


def in_use() -> bool:
    """Whether this process runs the compiled modules (benchmarks record it)."""
    import ringleader.sim.engine as engine

    return not str(engine.__file__).endswith(".py")


def remove() -> list[Path]:
    """Delete every built extension of the listed modules, the shared library and the
    stamp; the pure-Python code runs again. Returns what it deleted."""
    gone = list(extensions().values())
    gone += [p for p in SOURCES.glob(f"{GROUP}__mypyc*") if p.is_file()]
    gone += [STAMP] if STAMP.exists() else []
    for path in gone:
        path.unlink()
    return gone


def build() -> None:
    """Compile the listed modules with mypyc beside their sources and record their digests."""
    import json
    import tempfile

    try:
        from mypyc.build import mypycify
        from setuptools import setup  # type: ignore[import-untyped]
    except ImportError as exc:
        raise SystemExit(
            f"make compiled: {exc.name} is missing; it comes with the dev extras "
            "(pip install -e '.[dev]'), which `make` installs in .venv"
        ) from None
    remove()
    paths = [str(source_of(m).relative_to(SOURCES)) for m in MODULES]
    with tempfile.TemporaryDirectory(prefix="ringleader-hot-") as tmp:
        here = os.getcwd()
        os.chdir(SOURCES)  # mypyc names modules by their path from here
        try:
            setup(
                name=GROUP,
                ext_modules=mypycify(
                    [*paths, f"--cache-dir={Path(tmp, 'mypy')}"],  # not a cache in src/
                    group_name=GROUP,
                    target_dir=str(Path(tmp, "c")),
                ),
                script_args=[
                    *("--quiet", "build_ext", "--inplace"),
                    *("--build-temp", tmp, "--build-lib", str(Path(tmp, "lib"))),
                ],
            )
        finally:
            os.chdir(here)
    digests = {m: digest(source_of(m)) for m in MODULES}
    STAMP.write_text(json.dumps({"python": sys.version, "modules": digests}, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    """``build``, ``remove`` or ``status``: what ``make compiled`` and ``make uncompiled``
    call (``python -c 'from ringleader.hotpath import main; main(["status"])'``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    what = args[0] if args else "status"
    if what == "build":
        import time

        started = time.perf_counter()
        print(f"compiling {len(MODULES)} modules with mypyc (a minute or two) ...", flush=True)
        build()
        print(f"built in {time.perf_counter() - started:.0f} s: {len(extensions())} modules")
    elif what == "remove":
        print(f"removed {len(remove())} files: the pure-Python code runs")
    elif what == "status":
        built = extensions()
        changed = stale(built=built)
        if built and os.environ.get(PURE_ENV):
            print(f"built, but {PURE_ENV} is set: pure Python runs")
        elif not built:
            print("pure Python: nothing built (make compiled builds the hot path)")
        elif changed:
            print(f"built but stale ({len(changed)} of {len(MODULES)} modules): pure Python runs")
        else:
            print(f"compiled: {len(built)} modules built and matching their source")
    else:
        raise SystemExit(f"hotpath: build, remove or status, not {what!r}")
