"""The house's figures: how the source tree is laid out, measured.

Prints, for ``src/ringleader``: the number of Python files, the import circles
(type-only imports included: a circle that only the type checker follows is
still a knot a reader has to untie), the entries at the top of ``policy/``,
files over 400 lines and functions over 80, and the lines of the decision's
speed machinery (the issue's list of modules and classes) that live outside a
private ``_incremental/`` folder. ``--check`` exits 1 on any circle, on more
than 12 entries in ``policy/``, or on a file or function over its limit that
``EXCEPTIONS`` does not name; ``tests/test_house.py`` runs it in ``make test``.

    python bench/house.py            # the figures, as JSON
    python bench/house.py --check    # and fail on what breaks the rules
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80
MAX_POLICY_ENTRIES = 12

EXCEPTIONS: dict[str, str] = {
    "ringleader/policy/size/_incremental/walk.py:walk": (
        "one pass over every walked job's chain whose locals are the walk's state; its "
        "phases (whole levels, the cut, the heap past it) share a dozen lists"
    ),
    "ringleader/policy/size/_incremental/batched.py:walk": (
        "the same walk in numpy: its phases share the gathered arrays and the cut"
    ),
}
"""A file (``path``) or function (``path:name``) allowed past its limit, and why."""

SPEED_MODULES = ("walk", "batched", "flat", "cut", "beside", "regroup", "assigning")
SPEED_CLASSES = (
    "LastBase",
    "Chains",
    "LastKept",
    "Outcome",
    "Openings",
    "Changes",
    "Memo",
    "LastCandidates",
    "FreeGPUs",
)


@dataclass
class Tree:
    """Every module under ``src/``: its dotted name, file and parsed source."""

    files: dict[str, Path] = field(default_factory=dict)
    parsed: dict[str, ast.Module] = field(default_factory=dict)

    @classmethod
    def read(cls, src: Path = SRC) -> Tree:
        tree = cls()
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            tree.files[name] = path
            tree.parsed[name] = ast.parse(path.read_text(), str(path))
        return tree

    def module_of(self, dotted: str) -> str | None:
        """The module a dotted name lives in: itself, or the nearest package above."""
        while dotted and dotted not in self.files:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def imports(self) -> dict[str, set[str]]:
        """Who imports whom, among our modules; ``if TYPE_CHECKING`` imports too."""
        edges: dict[str, set[str]] = {name: set() for name in self.files}
        for name, module in self.parsed.items():
            package = name if self.files[name].name == "__init__.py" else name.rpartition(".")[0]
            for node in ast.walk(module):
                for target in _targets(node, package, self.files):
                    found = self.module_of(target)
                    if found is not None and found != name:
                        edges[name].add(found)
        return edges


def _targets(node: ast.AST, package: str, files: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    # ``from pkg import sub`` imports the submodule; ``from pkg import name``, the package.
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def functions(module: ast.Module) -> list[tuple[str, int]]:
    """Every function's qualified name and length in lines (a nested one counts in both)."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out.append((name, (child.end_lineno or child.lineno) - child.lineno + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(module, "")
    return out


def speed_lines_outside_incremental(tree: Tree, src: Path = SRC) -> dict[str, int]:
    """Lines of the speed machinery that live outside an ``_incremental/`` folder."""
    out: dict[str, int] = {}
    for name, module in tree.parsed.items():
        path = tree.files[name]
        if "_incremental" in path.parts or not name.startswith("ringleader.policy"):
            continue
        rel = str(path.relative_to(src))
        if path.stem in SPEED_MODULES:
            out[rel] = path.read_text().count("\n")
            continue
        for node in module.body:
            if isinstance(node, ast.ClassDef) and node.name in SPEED_CLASSES:
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                out[f"{rel}:{node.name}"] = lines
    return out


def measure(src: Path = SRC) -> dict[str, object]:
    tree = Tree.read(src)
    policy = src / "ringleader" / "policy"
    entries = sorted(
        p.name
        for p in policy.iterdir()
        if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())
    )  # sources and packages: a build's .so files and caches are not the layout
    long_files = {}
    long_functions = {}
    largest = ("", 0)
    for name, module in tree.parsed.items():
        path = tree.files[name]
        rel = str(path.relative_to(src))
        lines = path.read_text().count("\n")
        if lines > MAX_FILE_LINES:
            long_files[rel] = lines
        for qualified, length in functions(module):
            if length > largest[1]:
                largest = (f"{rel}:{qualified}", length)
            if length > MAX_FUNCTION_LINES:
                long_functions[f"{rel}:{qualified}"] = length
    speed = speed_lines_outside_incremental(tree, src)
    return {
        "files": len(tree.files),
        "circles": circles(tree.imports()),
        "policy_top_level": entries,
        "largest_function": {"name": largest[0], "lines": largest[1]},
        "files_over_400": long_files,
        "functions_over_80": long_functions,
        "speed_lines_outside_incremental": sum(speed.values()),
        "speed_outside_incremental": speed,
    }


def problems(figures: dict[str, object]) -> list[str]:
    """What breaks the house's rules, a line each."""
    out = [f"import circle: {' <-> '.join(c)}" for c in figures["circles"]]  # type: ignore[attr-defined]
    entries = figures["policy_top_level"]
    assert isinstance(entries, list)
    if len(entries) > MAX_POLICY_ENTRIES:
        out.append(f"policy/ has {len(entries)} top-level entries, over {MAX_POLICY_ENTRIES}")
    limits = (("files_over_400", MAX_FILE_LINES), ("functions_over_80", MAX_FUNCTION_LINES))
    for key, limit in limits:
        over = figures[key]
        assert isinstance(over, dict)
        for where, lines in sorted(over.items()):
            if where not in EXCEPTIONS:
                out.append(f"{where}: {lines} lines, over {limit} (split it, or add to EXCEPTIONS)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 on what breaks the rules")
    args = parser.parse_args(argv)
    figures = measure()
    print(json.dumps(figures, indent=2))
    if not args.check:
        return 0
    found = problems(figures)
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
