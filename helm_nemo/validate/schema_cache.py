"""A disk cache of the parsed JSON schemas the manifest check reads: the vendored CRD schemas (the JobSet's:
0.7 MB), and a `$defs` document laid out otherwise than kubernetes-validate's _definitions.json (1.3 MB,
~10 ms to parse whole), whose definitions are instead read straight from the file, each when first used
(SlicedDefs: ~3 ms, cold or not; the cache cost a cold run ~15 ms to parse and write it).

Each schema file is cached as Python's `marshal` of its parsed content (a `$defs` file as one marshal per
definition behind an index, unmarshalled when the check first needs it: a JobSet and a ConfigMap use a
handful of the ~640), under a name made of the source's size and CRC-32, this module's FORMAT, the
package version and the marshal/Python versions: any change of the source or of the code reading it is
a different file. CRC-32s in the file are checked before use (a document's whole payload; a `$defs`
file's index, then each definition when read: a corrupt one makes the source be parsed after all).

Where: $HELM_NEMO_CACHE_DIR, else $HELM_CACHE_HOME/helm-nemo (helm sets it for its plugins: the plugin's
cache lives with helm's), else $XDG_CACHE_HOME/helm-nemo, else ~/.cache/helm-nemo. Writes are atomic (a
temporary file in the folder, then os.replace), so concurrent runs see a whole file or none. The cache
is only a speed-up: a missing, corrupt, unreadable or read-only cache is ignored silently and the
source is parsed as without it. HELM_NEMO_CACHE_DIR="" turns it off.
"""

from __future__ import annotations

import binascii
import json
import marshal
import os
import sys
from collections.abc import Mapping
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Callable, Iterator

FORMAT = 2
_MAGIC = b"helm-nemo schema cache\n"


def cache_dir() -> Path | None:
    """The cache folder (it may not exist yet), or None when HELM_NEMO_CACHE_DIR is set empty."""
    explicit = os.environ.get("HELM_NEMO_CACHE_DIR")
    if explicit is not None:
        return Path(explicit) if explicit else None
    for variable in ("HELM_CACHE_HOME", "XDG_CACHE_HOME"):
        base = os.environ.get(variable)
        if base and os.path.isabs(base):
            return Path(base) / "helm-nemo"
    try:
        return Path.home() / ".cache" / "helm-nemo"
    except RuntimeError:  # no HOME and no passwd entry
        return None


class LazyDefs(Mapping[str, object]):
    """A cached `$defs` mapping: each definition is unmarshalled, after its own CRC-32 is checked, on first
    access. `index`: name -> (offset, length, CRC-32) in `payload`; `fallback()`: the parsed definitions,
    for when an entry turns out corrupt (then every later access reads them)."""

    def __init__(self, index: dict[str, tuple[int, int, int]], payload: memoryview, fallback: Callable[[], Any]):
        self._index, self._payload, self._fallback = index, payload, fallback
        self._loaded: dict[str, Any] = {}
        self._parsed: dict[str, Any] | None = None

    def __getitem__(self, name: str) -> Any:
        try:
            return self._loaded[name]
        except KeyError:
            pass
        if self._parsed is None:
            offset, length, crc = self._index[name]
            blob = self._payload[offset : offset + length]
            try:
                if binascii.crc32(blob) != crc:
                    raise ValueError("checksum")
                self._loaded[name] = marshal.loads(blob)
                return self._loaded[name]
            except (ValueError, EOFError, TypeError):
                self._parsed = self._fallback()
        value = self._loaded[name] = self._parsed[name]
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def load_json(path: Path) -> Any:
    """The parsed JSON document at `path` (through the cache)."""
    return _load(path, "doc")


def load_defs(path: Path) -> Mapping[str, Any]:
    """The `$defs` of the JSON document at `path`, each definition parsed on first use: straight from the
    file when it is laid out as kubernetes-validate writes it (SlicedDefs: no cache needed, a cold run is
    as fast as a warm one), else through the cache."""
    source = path.read_bytes()
    sliced = SlicedDefs.of(source)
    return sliced if sliced is not None else _load(path, "defs", source)


class SlicedDefs(Mapping[str, object]):
    """The definitions of a `$defs` document written with two-space indentation (kubernetes-validate's
    _definitions.json: 1.3 MB, ~10 ms to parse whole): each definition starts on a line of its own at four
    spaces, so its text is found without parsing the rest, and parsed (json) when first read. Any surprise
    (another layout, a name with an escape, a slice that is not JSON) means the whole document is parsed
    after all: the result is always what json.loads(source)["$defs"] holds."""

    _HEAD = b'{\n  "$defs": {\n'
    _START = b'\n    "'

    def __init__(self, source: bytes, index: dict[str, tuple[int, int]]):
        self._source, self._index = source, index
        self._loaded: dict[str, Any] = {}
        self._parsed: dict[str, Any] | None = None

    @classmethod
    def of(cls, source: bytes) -> SlicedDefs | None:
        if not source.startswith(cls._HEAD):
            return None
        import re

        end_of_defs = source.rfind(b"\n  }")
        found = list(re.compile(rb'\n    "((?:[^"\\\n]|\\.)*)": ').finditer(source, len(cls._HEAD) - 1, end_of_defs))
        if not found:
            return None
        index = {}
        for number, match in enumerate(found):
            value_end = found[number + 1].start() if number + 1 < len(found) else end_of_defs
            name = match.group(1)
            index[json.loads(b'"' + name + b'"') if b"\\" in name else name.decode("utf-8")] = (match.end(), value_end)
        return cls(source, index)

    def _whole(self) -> dict[str, Any]:
        """Every definition, parsed from the whole document (the way out of any surprise)."""
        if self._parsed is None:
            self._parsed = _parse(self._source, "defs")
        return self._parsed

    def __getitem__(self, name: str) -> Any:
        try:
            return self._loaded[name]
        except KeyError:
            pass
        where = self._index.get(name) if self._parsed is None else None
        if where is not None:
            try:
                value = json.loads(self._source[where[0] : where[1]].rstrip().rstrip(b","))
            except ValueError:  # not the layout it looked like: parse the whole document
                value = self._whole()[name]
        else:  # not found on a line of its own (or already parsed whole): the whole document says
            value = self._whole()[name]
        self._loaded[name] = value
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._index or name in self._whole()

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def _load(path: Path, kind: str, source: bytes | None = None) -> Any:
    source = path.read_bytes() if source is None else source
    folder = cache_dir()
    if folder is None:
        return _parse(source, kind)
    from helm_nemo import __version__

    crc = binascii.crc32(source)
    python = f"{sys.version_info[0]}{sys.version_info[1]}"
    name = f"{path.stem}-{kind}-{len(source)}-{crc:08x}-f{FORMAT}-v{__version__}-m{marshal.version}-py{python}.bin"

    def parse_and_write() -> Any:  # a cold cache, or a corrupt entry (rewritten)
        parsed = _parse(source, kind)
        _write(folder, name, parsed, kind)
        return parsed

    cached = _read(folder / name, kind, parse_and_write)
    return parse_and_write() if cached is None else cached


def _parse(source: bytes, kind: str) -> Any:
    data = json.loads(source)
    return (data.get("$defs") or {}) if kind == "defs" else data


def _read(file: Path, kind: str, fallback: Callable[[], Any]) -> Any:
    """The cached content, or None when the file is missing, unreadable or not a whole valid cache file.
    A `doc` entry's payload is checked whole; a `defs` entry's index here, each definition when read."""
    try:
        with open(file, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    head = len(_MAGIC)
    if len(raw) < head + 8 or not raw.startswith(_MAGIC):
        return None
    crc, size = int.from_bytes(raw[head : head + 4], "big"), int.from_bytes(raw[head + 4 : head + 8], "big")
    checked = memoryview(raw)[head + 8 : head + 8 + size]
    if len(checked) != size or binascii.crc32(checked) != crc:
        return None
    try:
        data = marshal.loads(checked)
    except (ValueError, EOFError, TypeError):
        return None
    if kind == "defs":
        if not isinstance(data, dict) or not all(isinstance(v, tuple) and len(v) == 3 for v in data.values()):
            return None
        return LazyDefs(data, memoryview(raw)[head + 8 + size :], fallback)
    return data if isinstance(data, (dict, list)) else None


def _write(folder: Path, name: str, parsed: Any, kind: str) -> None:
    """Best effort, atomic: a temporary file in `folder`, then renamed over `name`; any failure is ignored."""
    temporary = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(descriptor, "wb") as handle:
            if kind == "defs":  # the index (checked whole), then the definitions (each checked when read)
                blobs, index, offset = [], {}, 0
                for key, value in parsed.items():
                    blob = marshal.dumps(value)
                    index[key] = (offset, len(blob), binascii.crc32(blob))
                    blobs.append(blob)
                    offset += len(blob)
                checked, rest = marshal.dumps(index), b"".join(blobs)
            else:
                checked, rest = marshal.dumps(parsed), b""
            handle.write(
                _MAGIC + binascii.crc32(checked).to_bytes(4, "big") + len(checked).to_bytes(4, "big") + checked + rest
            )
        os.replace(temporary, folder / name)
        temporary = None
    except (OSError, ValueError):
        pass
    finally:
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass
