"""Reading what users hand us, and naming the field at fault: shared by every loader."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError


def read_capped(path: Path, limit: int, what: str, error: type[ValueError]) -> str:
    """The text of ``path``, or ``error`` saying why not (missing, too big, not UTF-8).

    Reads at most ``limit + 1`` bytes whatever the file claims to be, so a
    device or a pipe (``/dev/zero``, whose size reads as 0) cannot fill memory.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise error(f"{path}: larger than the {limit} bytes allowed for {what}")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise error(f"{path}: cannot read the {what}: {err}") from err


def output_dir_problem(path: Path) -> str | None:
    """Create ``path`` if need be; why it cannot hold our output, or ``None`` if it can.

    Checked before a long run, so a bad output path fails in a second, not
    after the work it was to hold.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"cannot be a directory ({err.strerror})"
    if not os.access(path, os.W_OK):
        return "cannot write there"
    return None


if TYPE_CHECKING:
    _Loader = yaml.SafeLoader
else:  # libyaml's parser where PyYAML was built with it (10x the pure-Python one)
    _Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_Loader):
    """Safe YAML without aliases (a few lines of them expand to billions of
    nodes) and without duplicate keys (YAML keeps the last one silently, so a
    repeated field would be a setting the user thinks they made)."""

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _no_aliases(node)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable):
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep)


def _no_aliases(root: Any) -> None:
    """Refuse a document where a node is reached twice: what an alias (``*name``) makes,
    found before anything is built from it (the composer shares, it never copies)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise yaml.composer.ComposerError(
                None,
                None,
                "aliases (*name) are not accepted here; write the value out",
                node.start_mark,
            )
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack += (key, value)
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value


_JSON_OBJECT = re.compile(r"\s*\{")


def looks_like_json(text: str) -> bool:
    """Whether ``text`` is a JSON object, as a program writes a large input (read at
    its start only: ``lstrip`` would copy a file of hundreds of MB)."""
    return _JSON_OBJECT.match(text) is not None


def load_yaml(text: str) -> Any:
    """YAML as plain data; ``yaml.YAMLError`` (with line and column) for anything suspect.

    A document that is a JSON object is read by the json module: YAML 1.2 holds
    JSON, and json's C parser is some 50x libyaml's, whose nodes are Python
    objects (a 20,000-job workload file: 0.04 s against 1.9 s). One that only
    starts like JSON (a YAML flow mapping) is read as YAML.
    """
    if looks_like_json(text):
        try:
            return json.loads(text, object_pairs_hook=_json_object)
        except json.JSONDecodeError:
            pass
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused where a key repeats (as the YAML loader refuses it)."""
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}")
        seen.add(key)
    raise AssertionError("a key repeats, so the loop finds it")


def field_path(loc: Sequence[int | str], whole: str) -> str:
    """A pydantic error location as users write it: ``jobs[2].max_gpus``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or whole


M = TypeVar("M", bound=BaseModel)


def load_yaml_model(
    path: Path,
    model: type[M],
    *,
    what: str,
    error: type[ValueError],
    limit: int,
    top: str,
    yaml_limit: int | None = None,
) -> M:
    """Read a YAML (or JSON) file into ``model``; ``error`` naming the file, each field
    and the fix.

    ``top`` says what the file's top level should hold, for files that are not a
    mapping. ``yaml_limit``: a smaller cap for a file that is not JSON, where
    libyaml's nodes take some 6 KB of memory for every 100 bytes of text.
    """
    text = read_capped(path, limit, what, error)
    if yaml_limit is not None and len(text) > yaml_limit and not looks_like_json(text):
        raise error(
            f"{path}: larger than the {yaml_limit >> 20} MiB allowed for a YAML {what}; "
            f"write it as JSON (a YAML subset), read up to {limit >> 20} MiB and some 50x "
            "faster"
        )
    try:
        data = load_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise error(f"{path}:{where}: not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping with {top} at the top, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        lines = []
        for e in err.errors()[:10]:
            shown = e["type"] not in ("missing", "value_error")
            got = f" (got {e['input']!r})" if shown else ""
            got = got if len(got) < 80 else got[:77] + "...)"
            message = e["msg"].removeprefix("Value error, ")
            lines.append(f"  {field_path(e['loc'], '(top level)')}: {message}{got}")
        more = len(err.errors()) - 10
        tail = f"\n  ... and {more} more" if more > 0 else ""
        raise error(f"{path}: invalid {what}\n" + "\n".join(lines) + tail) from err


def thresholds_problem(levels: Sequence[float]) -> str | None:
    """What is wrong with least-attained-service queue thresholds, or None."""
    if any(not 0 <= x < 1e12 for x in levels) or list(levels) != sorted(set(levels)):
        return "thresholds must be distinct, rising, non-negative GPU-seconds"
    return None


def parse_thresholds(text: str) -> tuple[float, ...]:
    """``"3600,36000"`` → ``(3600.0, 36000.0)``; empty: one queue. ValueError names the fix."""
    try:
        levels = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not comma-separated GPU-seconds") from None
    problem = thresholds_problem(levels)
    if problem is not None:
        raise ValueError(problem)
    return levels
