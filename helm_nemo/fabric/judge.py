"""Judge a parsed nccl-tests run against the accelerator profile's `ncclTest` data: the floor of its collective
and node count, the transport NCCL should use, and wrong results. Returns a preflight Result `fabric.busbw`."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.fabric.nccl_log import NcclTestOutput
    from helm_nemo.preflight.model import Result

CHECK_ID = "fabric.busbw"


def pick_floor(
    floors: list[dict[str, Any]], benchmark: str | None, nodes: int, algo: str | None
) -> dict[str, Any] | None:
    """The floor for this collective with the largest minNodes not above `nodes` (and not past maxNodes); a
    Ring-only floor needs a run that forced Ring, any other floor a run that did not (Ring lowers 2-node AR)."""
    ring = (algo or "").lower() == "ring"
    fitting = [
        f
        for f in floors
        if f["collective"] == benchmark
        and f["minNodes"] <= nodes <= f.get("maxNodes", nodes)
        and (f.get("algo", "any") == "Ring") == (ring and benchmark == "all_reduce")
    ]
    return max(fitting, key=lambda f: f["minNodes"], default=None)


def transport_ok(reported: str | None, expected: list[str]) -> bool | None:
    if reported is None:
        return None
    return any(reported.startswith(name) for name in expected)


def judge(run: NcclTestOutput, profile: dict[str, Any], nodes: int | None = None) -> Result:
    from helm_nemo.preflight.model import FAIL, OK, WARN, Result

    spec = profile["ncclTest"]
    nodes = nodes or len(run.hosts) or 1
    largest = run.largest
    assert largest is not None  # the parser refuses a run without rows
    floor = pick_floor(spec["floors"], run.benchmark, nodes, run.algo)
    measured = run.avg_busbw if floor and floor.get("metric") == "average" else largest.busbw
    what = "average busbw" if floor and floor.get("metric") == "average" else f"busbw at {_size(largest.size)}"
    wrong = sum(r.wrong or 0 for r in run.rows) + sum(r.wrong_inplace or 0 for r in run.rows)
    transport = run.transport
    matches = transport_ok(transport, spec["transports"])
    details: dict[str, Any] = {
        "accelerator": profile["id"],
        "benchmark": run.benchmark,
        "nodes": nodes,
        "largest_size": largest.size,
        "busbw": largest.busbw,
        "busbw_inplace": largest.busbw_inplace,
        "avg_busbw": run.avg_busbw,
        "measured": measured,
        "floor": floor["busbw"] if floor else None,
        "floor_source": floor["source"] if floor else None,
        "grey_zone": spec["greyZone"],
        "transport": transport,
        "expected_transport": spec["transports"],
        "wrong": wrong,
        "out_of_bounds": run.out_of_bounds,
        "algo": run.algo,
        "nccl_version": run.nccl_version,
        "tests_version": run.tests_version,
    }
    net = f"over {transport}" if transport else "transport not in the log"
    head = f"{run.benchmark or 'nccl-tests'} on {nodes} node(s): {what} {measured:.1f} GB/s {net}"
    problems: list[tuple[str, str]] = []  # (message, hint), the worst first
    if wrong or (run.out_of_bounds or 0) > 0:
        problems.append(
            (
                f"{wrong or run.out_of_bounds} wrong result(s) in the data check",
                "a GPU or link corrupts data: rerun on the same nodes, then drain the node whose ranks report #wrong",
            )
        )
    if matches is False:
        problems.append(
            (
                f"NCCL used {transport}, not {spec['transports'][0]}",
                f"the {spec['transports'][0]} plugin did not load (`NET/Plugin` and `NCCL WARN` lines above the "
                "table say why): check the plugin installer, NCCL_PLUGIN_PATH/LD_LIBRARY_PATH and the pod's networks",
            )
        )
    if floor and measured < floor["busbw"]:
        problems.append(
            (
                f"below the floor {floor['busbw']:g} GB/s",
                f"a healthy fabric measures more ({floor.get('note') or floor['source']}); look for a slow node or "
                "link: run it pairwise",
            )
        )
    if problems:
        message, hint = problems[0]
        extra = "; ".join(m for m, _ in problems[1:])
        return Result(CHECK_ID, FAIL, f"{head}: {message}" + (f"; {extra}" if extra else ""), hint, details=details)
    if floor is None:
        return Result(
            CHECK_ID,
            WARN,
            f"{head}: no published floor for {run.benchmark} on {nodes} node(s)",
            "judge the figure against the fabric's line rate, or run all_gather on 2 nodes, which the profile "
            "has a floor for"
            if any(f["collective"] == "all_gather" for f in spec["floors"])
            else "judge the figure against the fabric's line rate",
            details=details,
        )
    if matches is None:
        return Result(
            CHECK_ID,
            WARN,
            f"{head}: {measured:.1f} >= floor {floor['busbw']:g} GB/s, but NCCL's transport is not in the log",
            "run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (the chart's launcher does)",
            details=details,
        )
    if measured < floor["busbw"] * (1 + spec["greyZone"]):
        return Result(
            CHECK_ID,
            WARN,
            f"{head}: within {spec['greyZone']:.0%} of the floor {floor['busbw']:g} GB/s",
            "rerun; a figure that stays this close to the floor points at one slow link or NIC",
            details=details,
        )
    return Result(CHECK_ID, OK, f"{head} (floor {floor['busbw']:g} GB/s)", details=details)


def _size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"
