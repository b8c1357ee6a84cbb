"""The parser and the judge on every nccl-tests output recorded on two H100s (tests/fixtures/nccl/gpu/, how
they were made in its README): the table as the log prints it (rows, the largest size's out-of-place and
in-place busbw, the footer), the transport NCCL names, #wrong, and the verdict against each profile's floor.

The expected figures are the logs' own last rows and footers (quoted in EXPECTED), read off the files, not
from the parser. The recordings come from one host, so NCCL's net is always `Socket` (it initialises its net
plugin even when NVLink carries the data): only a profile that expects Socket (g4, one node) can pass on them,
and every profile that expects a network plugin must call them a socket fallback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helm_nemo.fabric import nccl_log
from helm_nemo.fabric.judge import judge
from helm_nemo.generate.profiles import load_profiles

GPU = Path(__file__).resolve().parent / "fixtures" / "nccl" / "gpu"
GiB, MiB = 1 << 30, 1 << 20

# log -> (benchmark, distinct sizes in the table (all_gather of 8 B and 16 B on 2 ranks: two `0` rows, one size),
# largest size, busbw and in-place busbw there, `# Avg bus bandwidth`, `Using network`)
EXPECTED = {
    "all_reduce_nvlink_info": ("all_reduce", 29, 2 * GiB, 340.11, 341.58, 94.0476, "Socket"),
    "all_gather_nvlink_info": ("all_gather", 28, 2 * GiB, 276.59, 301.03, 73.9689, "Socket"),
    "all_reduce_ring_nvlink": ("all_reduce", 11, 1 * GiB, 326.90, 326.70, 212.566, None),
    "all_reduce_nvlink_plain": ("all_reduce", 13, 128 * MiB, 283.96, 284.72, 59.7287, None),
    "all_gather_threads_nvlink": ("all_gather", 10, 512 * MiB, 255.44, 274.67, 158.154, None),
    "all_reduce_socket_info": ("all_reduce", 15, 2 * GiB, 2.79, 2.89, 1.40564, "Socket"),
    "all_gather_socket_info": ("all_gather", 14, 512 * MiB, 2.76, 2.62, 1.04988, "Socket"),
}


def test_every_recorded_output_is_covered():
    assert sorted(p.stem for p in GPU.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_table_as_the_log_prints_it(name):
    benchmark, rows, size, busbw, inplace, average, network = EXPECTED[name]
    run = nccl_log.read(GPU / f"{name}.log")
    assert run.benchmark == benchmark
    assert len(run.rows) == rows and run.largest.size == size
    assert (run.largest.busbw, run.largest.busbw_inplace) == (busbw, inplace)
    assert run.avg_busbw == average and (run.out_of_bounds, run.out_of_bounds_ok) == (0, True)
    assert all(r.wrong == 0 and r.wrong_inplace == 0 for r in run.rows)  # validated: 0, never N/A
    assert run.transport == network
    assert (run.tests_version, run.nccl_version, run.hosts) == ("2.19.6", "22809", ["vm"])
    assert run.rows == sorted(run.rows, key=lambda r: r.size) and len({r.size for r in run.rows}) == rows


def test_the_socket_runs_name_their_channels_and_the_nvlink_runs_do_not():
    """Forced onto sockets, NCCL logs each channel `via NET/Socket/0`; over NVLink it logs no NET channel."""
    assert nccl_log.read(GPU / "all_reduce_socket_info.log").channel_nets == ["Socket"]
    assert nccl_log.read(GPU / "all_reduce_nvlink_info.log").channel_nets == []
    assert nccl_log.read(GPU / "all_reduce_nvlink_info.log").mnnvl is False  # `MNNVL ... state 3`: not in use


# (log, profile, nodes) -> (verdict, words the message holds, the floor picked (None: no floor))
VERDICTS = [
    # The good fabric: G4's floor is the average busbw of a one-node all_reduce sweep (>= 30 GB/s), Socket expected.
    ("all_reduce_nvlink_info", "g4", 1, "ok", "average busbw 94.0 GB/s over Socket (floor 30 GB/s)", 30),
    ("all_reduce_nvlink_plain", "g4", 1, "warn", "transport is not in the log", 30),
    # Too low: the socket transport's 1.4 GB/s average against G4's 30, with the transport it expects.
    ("all_reduce_socket_info", "g4", 1, "fail", "below the floor 30 GB/s", 30),
    # Socket fallbacks: every profile that expects a plugin.
    ("all_gather_socket_info", "a3ultra", 2, "fail", "NCCL used Socket, not gIB; below the floor 260 GB/s", 260),
    ("all_reduce_socket_info", "a3ultra", 2, "fail", "NCCL used Socket, not gIB", None),
    ("all_gather_socket_info", "a3high", 2, "fail", "NCCL used Socket, not GPUDirectTCPX", 55),
    ("all_gather_socket_info", "a3mega", 2, "fail", "NCCL used Socket, not FasTrak", 150),
    ("all_reduce_socket_info", "p5", 2, "fail", "NCCL used Socket, not Libfabric; below the floor 270 GB/s", 270),
    ("all_reduce_socket_info", "p4de", 2, "fail", "NCCL used Socket, not Libfabric", 60),
    # NVLink figures above a floor still fail where the profile expects a plugin: Socket is in the log.
    ("all_reduce_nvlink_info", "p5", 2, "fail", "NCCL used Socket, not Libfabric", 270),
    ("all_gather_nvlink_info", "a3mega", 2, "fail", "NCCL used Socket, not FasTrak", 150),
    ("all_gather_nvlink_info", "a4", 2, "fail", "NCCL used Socket, not gIB; below the floor 300 GB/s", 300),
    # Without NCCL's INFO lines the transport is unknown: a figure above the floor is only a warning.
    (
        "all_reduce_nvlink_plain",
        "p5",
        2,
        "warn",
        "busbw at 128 MiB 284.0 GB/s transport not in the log: 284.0 >= floor 270 GB/s, but NCCL's transport is not in the log",
        270,
    ),
    ("all_gather_threads_nvlink", "a3mega", 2, "warn", "but NCCL's transport is not in the log", 150),
    ("all_gather_threads_nvlink", "a4", 2, "fail", "below the floor 300 GB/s", 300),
    # A Ring all_reduce recorded without NCCL's ENV line (NCCL_ALGO=Ring unseen) gets no Ring floor.
    ("all_reduce_ring_nvlink", "a3high", 2, "warn", "no published floor for all_reduce on 2 node(s)", None),
]


@pytest.mark.parametrize(
    "name, accelerator, nodes, verdict, words, floor", VERDICTS, ids=[f"{v[0]}-{v[1]}" for v in VERDICTS]
)
def test_the_verdict_against_each_profile(name, accelerator, nodes, verdict, words, floor):
    run = nccl_log.read(GPU / f"{name}.log")
    result = judge(run, load_profiles()[accelerator], nodes)
    assert result.id == "fabric.busbw"
    assert (result.verdict, result.details["floor"]) == (verdict, floor), result.message
    assert words in result.message, result.message
    assert result.details["wrong"] == 0 and result.details["transport"] == EXPECTED[name][6]
    assert result.details["busbw"] == EXPECTED[name][3] and result.details["nodes"] == nodes
