"""Read an nccl-tests output (any 2.x build, one or many ranks' lines mixed in, NCCL INFO lines between).

What is kept: the result rows (size, out-of-place and in-place time/algbw/busbw and wrong counts), the footer
(`# Out of bounds values`, `# Avg bus bandwidth`), the header facts (benchmark, nccl-tests and NCCL versions,
hosts from `# Using devices`), and what NCCL says about its network (`Using network X`, `NET/... via` channel
lines, `NCCL_ALGO set by environment`, `MNNVL`). One pass of cheap string tests, and a row repeated by
other ranks is dropped before it is built: a 10,000-line log costs about 2.5 times splitting its lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from pathlib import Path

# The column header: `size count type redop root time algbw busbw #wrong ...` (2.13+), `size count type redop time
# algbw busbw error ...` (older reductions), `size count type root time ...` (older broadcast).
_HEADER = re.compile(r"^#?\s*size\s+count\s+type\b(?P<rest>.*)$")
_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?$")
_USING_NETWORK = re.compile(r"NCCL INFO Using network (?P<name>\S.*?)\s*$")
_CHANNEL_NET = re.compile(r"via NET/(?P<name>[^/\s]+)")
_ALGO_ENV = re.compile(r"NCCL INFO NCCL_ALGO set by environment to (?P<algo>\S+)")
_MNNVL = re.compile(r"\bMNNVL (?P<on>[01])\b")
_RANK_HOST = re.compile(r"^#\s+Rank\s+\d+\b.*?\bon\s+(?P<host>\S+)\s+device\b")
_BINARY = re.compile(r"\b(?P<bench>[a-z_]+)_perf(?:_mpi)?\b")


@dataclass
class Row:
    """One message size: out-of-place and (when printed) in-place busbw in GB/s, wrong element counts
    (None: not validated, `N/A`; older builds print a max error instead, read as 0 when it is 0)."""

    size: int
    count: int
    dtype: str
    busbw: float
    algbw: float
    time_us: float
    wrong: int | None
    busbw_inplace: float | None = None
    wrong_inplace: int | None = None


@dataclass
class NcclTestOutput:
    """One run as read from its log: rows by size, footer, header facts and NCCL's network lines."""

    rows: list[Row] = field(default_factory=list)
    benchmark: str | None = None
    tests_version: str | None = None
    nccl_version: str | None = None
    hosts: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)  # `Using network X`, in order of first appearance
    channel_nets: list[str] = field(default_factory=list)  # `via NET/X/...`, in order of first appearance
    algo: str | None = None  # NCCL_ALGO from NCCL's own ENV line
    mnnvl: bool | None = None
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    header_line: int | None = None  # 1-based line of the column header
    footer_seen: bool = False

    @property
    def largest(self) -> Row | None:
        return max(self.rows, key=lambda r: r.size) if self.rows else None

    @property
    def transport(self) -> str | None:
        """The net NCCL used: `Using network`, else the first channel line's net."""
        names = self.networks or self.channel_nets
        return names[0] if names else None


class NotAnNcclTestsOutput(ValueError):
    """The text has no nccl-tests result table, or the table is cut short. `line`: where (1-based) or None."""

    def __init__(self, message: str, expected: str, hint: str, line: int | None = None):
        super().__init__(message)
        self.message, self.expected, self.hint, self.line = message, expected, hint, line


def _columns(rest: str) -> tuple[bool, bool]:
    """From the header after `type`: whether the rows carry a redop and a root column."""
    words = rest.split()
    return "redop" in words, "root" in words


def _wrong(word: str) -> int | None:
    if word == "N/A":
        return None
    if word.isdigit():
        return int(word)
    try:  # builds before the 2.13 resync print the max error (a float) where #wrong is now
        return 0 if float(word) == 0 else 1
    except ValueError:
        return None


def parse(text: str) -> NcclTestOutput:
    """The run in `text` (raises NotAnNcclTestsOutput when it holds no complete result table)."""
    out = NcclTestOutput()
    lines = text.splitlines()
    layout: tuple[bool, bool] | None = None
    seen_rows: dict[int, Row] = {}
    last_row_line = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        if "NCCL INFO" in line:
            if (m := _USING_NETWORK.search(line)) and m["name"] not in out.networks:
                out.networks.append(m["name"])
            elif " via NET/" in line and (m := _CHANNEL_NET.search(line)) and m["name"] not in out.channel_nets:
                out.channel_nets.append(m["name"])
            elif m := _ALGO_ENV.search(line):
                out.algo = m["algo"]
            elif " MNNVL " in line and (m := _MNNVL.search(line)) and out.mnnvl is not True:
                out.mnnvl = m["on"] == "1"
            continue
        # mpirun --tag-output prefixes lines with `[1,0]<stdout>:`: drop it.
        if line.startswith("[") and "]<std" in line:
            line = line.split(">:", 1)[-1].strip()
        if line.startswith(("size ", "Out of bounds values", "Avg bus bandwidth")):
            line = "# " + line  # some pastes lose the leading '#' of nccl-tests' comment lines
        if line.startswith("#"):
            if m := _HEADER.match(line):
                layout = _columns(m["rest"])
                out.header_line = out.header_line or number
            elif line.startswith("# nccl-tests version"):
                out.tests_version = line.split()[3] if len(line.split()) > 3 else None
                if "nccl-library=" in line:
                    out.nccl_version = line.split("nccl-library=", 1)[1].split()[0]
            elif line.startswith("# Collective test starting:") and (m := _BINARY.search(line)):
                out.benchmark = m["bench"]
            elif line.replace(" ", "").startswith("#Outofboundsvalues"):
                parts = line.split(":", 1)[1].split()
                out.out_of_bounds = int(parts[0]) if parts and parts[0].isdigit() else None
                out.out_of_bounds_ok = len(parts) > 1 and parts[1] == "OK"
            elif line.replace(" ", "").startswith("#Avgbusbandwidth"):
                parts = line.split(":", 1)[1].split()
                out.avg_busbw = float(parts[0]) if parts and _NUMBER.match(parts[0]) else None
                out.footer_seen = True
            elif m := _RANK_HOST.match(line):
                if m["host"] not in out.hosts:
                    out.hosts.append(m["host"])
            continue
        if line.startswith("NCCL version ") and out.nccl_version is None:
            out.nccl_version = line.split()[2].split("+")[0]
            continue
        if layout is None or not line[0].isdigit():
            if out.benchmark is None and "_perf" in line and (m := _BINARY.search(line)):
                out.benchmark = m["bench"]
            continue
        words = line.split()
        if words[0].isdigit() and int(words[0]) in seen_rows:  # several processes print the same table
            last_row_line = number  # keep the first; a repeat still counts as a row line
            continue
        row = _row(words, layout)
        if row is not None:
            seen_rows[row.size] = row
            last_row_line = number
    out.rows = sorted(seen_rows.values(), key=lambda r: r.size)
    _check_complete(out, lines, last_row_line)
    return out


def _row(words: list[str], layout: tuple[bool, bool]) -> Row | None:
    has_redop, has_root = layout
    lead = 3 + has_redop + has_root  # size count type [redop] [root]
    if len(words) < lead + 4 or not words[0].isdigit() or not words[1].isdigit():
        return None
    try:
        oop = words[lead : lead + 4]
        row = Row(
            size=int(words[0]),
            count=int(words[1]),
            dtype=words[2],
            time_us=float(oop[0]),
            algbw=float(oop[1]),
            busbw=float(oop[2]),
            wrong=_wrong(oop[3]),
        )
        ip = words[lead + 4 : lead + 8]
        if len(ip) == 4 and _NUMBER.match(ip[2]):
            row.busbw_inplace, row.wrong_inplace = float(ip[2]), _wrong(ip[3])
    except ValueError:
        return None
    return row


def _check_complete(out: NcclTestOutput, lines: list[str], last_row_line: int | None) -> None:
    expected = (
        "nccl-tests output: a `#  size  count  type  redop  root  time  algbw  busbw  #wrong ...` header, one row "
        "per message size, then `# Avg bus bandwidth : X`"
    )
    if out.header_line is None:
        raise NotAnNcclTestsOutput(
            "no nccl-tests result table found" if any(s.strip() for s in lines) else "the file is empty",
            expected,
            "give the log of rank 0 (kubectl logs <job>-0 -c workload), or the file the chart's launcher wrote "
            "under LOG_DIR",
        )
    if not out.rows:
        raise NotAnNcclTestsOutput(
            "the result table has a header but no rows (the run stopped before its first message size)",
            expected,
            "look for `NCCL WARN` or `Test failure` lines above it: NCCL failed before measuring",
            out.header_line,
        )
    if not out.footer_seen:
        raise NotAnNcclTestsOutput(
            f"the result table is cut short after {len(out.rows)} row(s): no `# Avg bus bandwidth` line",
            expected,
            "the run was stopped or the log truncated; rerun or give the whole log",
            (last_row_line or 0) + 1,
        )


def read(path: Path) -> NcclTestOutput:
    return parse(path.read_text(encoding="utf-8", errors="replace"))
