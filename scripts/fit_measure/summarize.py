"""Print a Markdown table of a measurements file (one JSON record per rank per layout) written by run_all.sh.

Per layout: the parallel layout, the worst rank's measured peak (torch.cuda.max_memory_allocated) and
Megatron-LM's theoretical figure beside it, with the signed error of that figure against the measurement.
Usage: python3 scripts/fit_measure/summarize.py tests/fixtures/fit/megatron_h200.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

GIB = 1024**3


def worst_ranks(path: Path) -> list[dict[str, Any]]:
    """The record of the rank with the highest peak, per layout, in file order."""
    best: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        cur = best.get(rec["layout"])
        if cur is None or rec.get("peak_allocated_bytes", 0) > cur.get("peak_allocated_bytes", 0):
            best[rec["layout"]] = rec
    return list(best.values())


def describe(cfg: dict[str, Any]) -> str:
    """A short layout string: tp/pp/vp/dp, SP, dist. opt, recompute, micro batch x sequence."""
    parts = [f"tp{cfg['tp']} pp{cfg['pp']}" + (f" vp{cfg['vp']}" if cfg["vp"] else "") + f" dp{cfg['dp']}"]
    if cfg["sp"]:
        parts.append("SP")
    if cfg["distributed_optimizer"]:
        parts.append("distopt")
    rc = cfg["recompute"] or "none"
    if rc == "full":
        rc += f"/{cfg['recompute_method']}/{cfg['recompute_num_layers']}"
    parts.append(f"rc={rc}")
    parts.append(f"mbs{cfg['mbs']} s{cfg['seq']} nmb{cfg['num_microbatches']}")
    return " ".join(parts)


def table(path: Path) -> str:
    rows = [
        "| layout | model | parallel layout | status | measured peak GiB (worst rank) | Megatron theoretical GiB "
        "(w+opt / act) | theory vs measured |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for rec in worst_ranks(path):
        cfg = rec["config"]
        th = rec["megatron_theoretical"]
        peak = rec.get("peak_allocated_bytes", 0) / GIB
        w, a = th["weight_and_optimizer_mib"] / 1024, th["activation_mib"] / 1024
        err = f"{(th['total_gib'] - peak) / peak * 100:+.0f} %" if rec["status"] == "ok" else "-"
        status = rec["status"] + (f" (exit {rec['launcher_exit_code']})" if rec["status"] != "ok" else "")
        rows.append(
            f"| {rec['layout']} | {cfg['model_name']} | {describe(cfg)} | {status} | {peak:.2f} | "
            f"{th['total_gib']:.2f} ({w:.2f} / {a:.2f}) | {err} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(Path(sys.argv[1])))
