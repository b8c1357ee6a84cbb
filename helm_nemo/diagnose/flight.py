"""PyTorch flight-recorder dumps (`nccl_trace_rank_N`, written on a collective timeout with
TORCH_NCCL_DUMP_ON_TIMEOUT=1): which rank did not join the collective the others wait in.

A dump is a pickle of plain data ({"version", "pg_config", "entries": [{"pg_id", "process_group",
"collective_seq_id", "profiling_name", "state", …}]}). It is read with a restricted unpickler that builds no
object of any class (a user's file is never given to plain pickle.load): dicts, lists, tuples, strings and
numbers only, plus torch's own list/tag helpers mapped to harmless functions.
"""

from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path

from helm_nemo.diagnose.events import Hang

DUMP_NAME = re.compile(r"(?:^|_)nccl_trace_rank_(\d+)$|^fr_trace_rank_(\d+)$|_trace_rank_(\d+)(?:\.pkl)?$")
MAX_DUMP = 256 << 20


def _identity(*args: object) -> object:
    return args[0] if args else None


_ALLOWED = {
    ("torch.jit._pickle", "build_intlist"): _identity,
    ("torch.jit._pickle", "build_doublelist"): _identity,
    ("torch.jit._pickle", "build_boollist"): _identity,
    ("torch.jit._pickle", "build_list"): _identity,
    ("torch.jit._pickle", "restore_type_tag"): _identity,
    ("collections", "OrderedDict"): dict,
}


class _Plain(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        allowed = _ALLOWED.get((module, name))
        if allowed is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not plain data")
        return allowed


def load(path: Path) -> dict[str, object]:
    """A dump's data; ValueError when it is not a flight-recorder dump of plain data."""
    data = path.read_bytes()
    if len(data) > MAX_DUMP:
        raise ValueError(f"{path}: larger than {MAX_DUMP >> 20} MiB")
    try:
        found = _Plain(io.BytesIO(data)).load()
    except Exception as err:  # any unpickling failure: not a dump we read
        raise ValueError(f"{path}: not a flight-recorder dump ({err})") from None
    if not isinstance(found, dict) or not isinstance(found.get("entries"), list):
        raise ValueError(f"{path}: not a flight-recorder dump (no entries)")
    return found


def rank_of(name: str) -> int | None:
    found = DUMP_NAME.search(name)
    if not found:
        return None
    return int(next(g for g in found.groups() if g is not None))


@dataclass
class Stuck:
    """The collective the ranks wait in, per process group."""

    group: str
    seq: int
    op: str
    joined: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)


def analyse(dumps: dict[int, dict[str, object]], hang: Hang | None = None) -> Hang:
    """Which ranks did not join the last collective of a process group that others started."""
    hang = hang or Hang()
    last: dict[str, dict[int, tuple[int, str, str]]] = {}  # group -> rank -> (seq, op, state)
    members: dict[str, list[int]] = {}
    for rank, dump in sorted(dumps.items()):
        for entry in dump.get("entries") or []:  # type: ignore[attr-defined]
            if not isinstance(entry, dict) or entry.get("is_p2p"):
                continue
            group = _group(entry)
            seq = entry.get("collective_seq_id")
            if not isinstance(seq, int):
                continue
            seen = last.setdefault(group, {}).get(rank)
            if seen is None or seq >= seen[0]:
                last[group][rank] = (seq, str(entry.get("profiling_name") or ""), str(entry.get("state") or ""))
        for name, config in (dump.get("pg_config") or {}).items():  # type: ignore[attr-defined]
            ranks = _ranks(config.get("ranks") if isinstance(config, dict) else None)
            desc = config.get("desc", "") if isinstance(config, dict) else ""
            if ranks:
                members.setdefault(f"{name} ({desc})" if desc else str(name), ranks)
    stuck: list[Stuck] = []
    for group, by_rank in last.items():
        top = max(seq for seq, _, _ in by_rank.values())
        waiting = [r for r, (seq, _, state) in by_rank.items() if seq == top and state != "completed"]
        if not waiting:
            continue
        expected = members.get(group) or sorted(set(by_rank) | set(dumps))
        missing = sorted(r for r in expected if by_rank.get(r, (-1, "", ""))[0] < top and r in dumps)
        op = by_rank[waiting[0]][1]
        stuck.append(Stuck(group, top, op, sorted(waiting), missing))
    stuck.sort(key=lambda s: (not s.missing, s.group))
    if stuck:
        first = stuck[0]
        hang.not_joined = first.missing
        hang.collective = f"{first.op or 'a collective'} #{first.seq} of process group {first.group}"
        expected = members.get(first.group) or []
        hang.no_dump = sorted(set(expected) - set(dumps))
    else:
        hang.notes.append("the flight-recorder dumps show no collective left waiting")
    return hang


def _group(entry: dict[str, object]) -> str:
    pg = entry.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        name, desc = str(pg[0]), str(pg[1]) if len(pg) > 1 else ""
        return f"{name} ({desc})" if desc else name
    return str(entry.get("pg_id", "?"))


def _ranks(value: object) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value if isinstance(v, int)]
    if isinstance(value, str):
        return [int(v) for v in re.findall(r"\d+", value)]
    return []
