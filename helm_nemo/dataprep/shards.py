"""The shard rules of the data-prep chart kind, in one place (docs/data-prep.md):

- the shard list: `shards.numbers` ("0-5,7", NeMo-Launcher's `file_numbers`) expanded through
  `shards.urlPattern` (`{index}` -> the number, zero-padded to `shards.indexWidth`), in the order written,
  then `shards.files` in order;
- a shard's name: its `name`, else the last part of its URL path without `.zst`, `.gz`, `.jsonl`, `.json`
  (`.../train/00.jsonl.zst` -> `00`);
- worker i (of `workers`) takes shards k with k % workers == i (round robin), so the work of a restarted
  index is the same work;
- outputs: `<output.path>/<name>_<jsonKey>_document.bin/.idx` (NeMo's preprocess_data_for_megatron.py
  names them so), complete when `<output.path>/.helm-nemo/<name>.done` exists; training reads the prefixes
  `<output.path>/<name>_<jsonKey>_document`.

The Helm template expands the same rules (a test compares the two).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
NUMBERS = re.compile(r"\s*\d+\s*(-\s*\d+\s*)?(,\s*\d+\s*(-\s*\d+\s*)?)*")
SUFFIXES = (".zst", ".gz", ".jsonl", ".json")
MARKER_DIR = ".helm-nemo"
MAX_SHARDS = 100_000


@dataclass(frozen=True)
class Shard:
    """One shard: its name (outputs `<name>_<key>_document`), where it comes from, its checksum if given."""

    name: str
    source: str  # https:// URL or an absolute path on mounted storage
    sha256: str | None


class ShardError(ValueError):
    """A shard spec that cannot be expanded; `path` is the values path (tuple) it is about."""

    def __init__(self, path: tuple[Any, ...], message: str, expected: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.expected = expected


def expand_numbers(text: str, where: tuple[Any, ...] = ("shards", "numbers")) -> list[int]:
    """ "0-5,7" -> [0, 1, 2, 3, 4, 5, 7]; a range runs low to high, inclusive; a number twice is refused."""
    if not isinstance(text, str) or not NUMBERS.fullmatch(text):
        raise ShardError(where, f"{text!r} is not a list of numbers and ranges", 'e.g. "0-5" or "0,3,7-9"')
    numbers: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        first, last = int(low), int(high) if high.strip() else int(low)
        if last < first:
            raise ShardError(where, f"range {part.strip()!r} runs backwards", "low-high, low <= high")
        if len(numbers) + last - first + 1 > MAX_SHARDS:
            raise ShardError(where, f"more than {MAX_SHARDS} shards", f"at most {MAX_SHARDS}")
        numbers.extend(range(first, last + 1))
    if len(set(numbers)) != len(numbers):
        twice = sorted({n for n in numbers if numbers.count(n) > 1})
        raise ShardError(where, f"shard number {twice[0]} is listed twice", "each number once")
    return numbers


def shard_name(source: str) -> str:
    """The name a URL or path gives its shard: the last path part without compression/JSON suffixes."""
    base = source.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    changed = True
    while changed:
        changed = False
        for suffix in SUFFIXES:
            if base.endswith(suffix) and len(base) > len(suffix):
                base, changed = base[: -len(suffix)], True
    return base


def expand(values: dict[str, Any]) -> list[Shard]:
    """The chart values' shard list (ShardError with the values path when it cannot be made)."""
    spec = values.get("shards") or {}
    checksums = spec.get("sha256") or {}
    shards: list[Shard] = []
    if spec.get("numbers") not in (None, ""):
        pattern = spec.get("urlPattern")
        if not pattern or "{index}" not in pattern:
            raise ShardError(
                ("shards", "urlPattern"),
                "shards.numbers needs a urlPattern with {index}",
                "a URL or path with {index}, e.g. https://host/train/{index}.jsonl.zst",
            )
        width = int(spec.get("indexWidth", 2) or 0)
        for number in expand_numbers(spec["numbers"]):
            source = pattern.replace("{index}", str(number).zfill(width))
            name = shard_name(source)
            shards.append(Shard(name, source, checksums.get(name)))
    for index, item in enumerate(spec.get("files") or []):
        source = item["url"]
        shards.append(Shard(item.get("name") or shard_name(source), source, item.get("sha256")))
        if not NAME.fullmatch(shards[-1].name):
            raise ShardError(
                ("shards", "files", index),
                f"shard name {shards[-1].name!r} is not a file name",
                "letters, digits, '.', '_', '-' (set `name:`)",
            )
    seen: dict[str, int] = {}
    for index, shard in enumerate(shards):
        if not NAME.fullmatch(shard.name):
            raise ShardError(
                ("shards",),
                f"shard name {shard.name!r} (from {shard.source}) is not a file name",
                "letters, digits, '.', '_', '-'",
            )
        if shard.name in seen:
            raise ShardError(
                ("shards",),
                f"two shards are named {shard.name!r} (#{seen[shard.name]} and #{index}); "
                "their outputs would overwrite each other",
                "distinct names (set `name:` on files)",
            )
        seen[shard.name] = index
    unknown = sorted(set(checksums) - set(seen))
    if unknown:
        raise ShardError(
            ("shards", "sha256", unknown[0]),
            f"no shard is named {unknown[0]!r}",
            f"one of: {', '.join(sorted(seen)[:8])}",
        )
    return shards


def assignment(shards: list[Shard], workers: int, worker: int) -> list[Shard]:
    """The shards worker `worker` (0-based) of `workers` prepares: round robin."""
    return [shard for k, shard in enumerate(shards) if k % workers == worker]


def json_keys(values: dict[str, Any]) -> list[str]:
    return list((values.get("tokenizer") or {}).get("jsonKeys") or ["text"])


def output_prefixes(values: dict[str, Any], root: str | None = None) -> list[str]:
    """What training reads: one prefix per shard and JSON key, in shard order; `root`: the output folder as
    the training mounts it (default: output.path, where the data-prep release writes)."""
    folder = (root if root is not None else values["output"]["path"]).rstrip("/")
    keys = json_keys(values)
    return [f"{folder}/{shard.name}_{key}_document" for shard in expand(values) for key in keys]


def data_prefix_override(values: dict[str, Any], root: str | None = None) -> str:
    """The Hydra override a NeMo (1.x, Megatron GPT) training gets: equal weights over every prefix."""
    return "model.data.data_prefix=[" + ",".join(f"1.0,{prefix}" for prefix in output_prefixes(values, root)) + "]"
