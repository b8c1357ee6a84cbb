"""`helm nemo status` of a failed 1,024-pod JobSet reads only the logs it needs (issue 34 item 7), on the loopback
emulator, whose request log counts the reads: the run of tests/failed_at_scale.py (real GPU logs adapted per pod),
where the rank that ran out of memory first is killed last, hung in teardown, while 1,023 watchdogs fire.
bench/real_cluster_bench.py times the same state on the real control plane."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import status_states as S
from failed_at_scale import PodRun, failed_run
from helm_nemo.status import failures
from kube_emulator import KubeEmulator
from real_cluster import cri_log

RELEASE = "big-run"
START = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)


def put_failed_run(kube: KubeEmulator, runs: list[PodRun]) -> dict[int, str]:
    """The Failed JobSet and its pods ended as `runs` say, each pod's log served; rank -> pod name."""
    failed = S.condition("Failed", reason="FailedJobs", message="jobset failed: job workload-0 failed", at=START)
    kube.put(S.jobset(RELEASE, len(runs), conditions=[failed], ready=0, active=0, failed=1))
    names = {}
    for run in runs:
        term = {
            "exitCode": run.exit_code,
            "reason": "Error",
            "startedAt": run.started_at,
            "finishedAt": run.finished_at,
        }
        status = [
            {"name": "workload", "ready": False, "restartCount": 0, "image": "nemo", "state": {"terminated": term}}
        ]
        pod = S.pod(RELEASE, run.rank, phase="Failed", statuses=status)
        kube.put(pod)
        names[run.rank] = pod["metadata"]["name"]
        kube.write_cri_log(S.NS, names[run.rank], cri_log(run.log))
    return names


def log_reads(kube: KubeEmulator) -> list[str]:
    return [r.path.split("/")[-2] for r in list(kube.requests) if r.method == "GET" and r.path.endswith("/log")]


def read(kube: KubeEmulator, tmp_path):  # type: ignore[no-untyped-def]
    from helm_nemo.kube import connect
    from helm_nemo.status.cluster import read_statuses

    client = connect(["--kubeconfig", str(kube.kubeconfig(tmp_path / "kc"))], env={}, namespace=S.NS)
    kube.requests.clear()
    (status,) = read_statuses(client, S.NS, [RELEASE])
    return status


def test_a_1024_pod_failure_is_found_in_the_first_batch_though_its_pod_ended_last(tmp_path):
    runs = failed_run(1024, 517, START)
    assert max(runs, key=lambda r: r.finished_at).rank == 517  # ended last: finishedAt alone would read it last
    with KubeEmulator(ready=False) as kube:
        names = put_failed_run(kube, runs)
        status = read(kube, tmp_path)
        reads = log_reads(kube)
    cause = status.diagnosis.cause
    assert (cause.source, cause.klass, cause.rank) == (names[517], "cuda-oom", "517")
    assert cause.at.startswith("2026-11-27T01:00:00.000000")  # its line's own time, not the pod's end
    # rank 0's tail for the progress, then one batch of failed pods (rank 0 among them: not read twice)
    assert len(reads) == len(set(reads)) <= 1 + failures.BATCHES[0], reads
    assert names[517] in reads and names[0] in reads


def test_the_reads_widen_until_a_specific_cause_is_found(tmp_path):
    """The rank that ran out of memory ended 6th of 40 (exit 1, not killed): the first batch (both ends of the
    end times) shows only watchdog timeouts, the second finds it, and no third batch is read."""
    runs = failed_run(40, 9, START)
    oom = runs[9]
    oom.exit_code, oom.finished_at = 1, "2026-11-27T01:01:30Z"  # before the watchdog pods (01:01:31)
    for rank in range(5):  # five pods ended even earlier
        runs[rank + 20].finished_at = f"2026-11-27T01:01:2{rank}Z"
    with KubeEmulator(ready=False) as kube:
        names = put_failed_run(kube, runs)
        status = read(kube, tmp_path)
        reads = log_reads(kube)
    assert (status.diagnosis.cause.source, status.diagnosis.cause.klass) == (names[9], "cuda-oom")
    first, second = failures.BATCHES[:2]
    assert first < len(set(reads) - {names[0]}) <= first + second, reads


@pytest.mark.parametrize("pods", [1024])
def test_a_hang_without_a_specific_cause_reads_at_most_64_failed_pods(tmp_path, pods):
    """Every pod's watchdog fired and nobody says why (the hung rank's log has nothing): the reads stop at the
    last batch; the first cause is the earliest collective timeout."""
    runs = failed_run(pods, None, START)
    with KubeEmulator(ready=False) as kube:
        put_failed_run(kube, runs)
        status = read(kube, tmp_path)
        reads = log_reads(kube)
    assert status.diagnosis.cause.klass == "nccl-timeout"
    assert len(reads) <= 1 + sum(failures.BATCHES), len(reads)
