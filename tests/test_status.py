"""`helm nemo status` / `helm nemo logs` on Kubernetes: the reasons in words (pure functions over API objects),
progress equal to `helm nemo metrics`, the first cause of a failure on real logs (tests/logs/real/), and the named states
of issue 25 end to end against the loopback API emulator (tests/kube_emulator.py): objects shaped as the API
server returns them, the pod log endpoint with tailLines / limitBytes / timestamps / previous / follow."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, UTC
from pathlib import Path

import pytest
from click.testing import CliRunner

import status_states as S
from helm_nemo.cli.group import main
from helm_nemo.metrics import Request, measure
from helm_nemo.diagnose import diagnose_texts, lines as diagnose_lines
from helm_nemo.status import kueue, workloads
from helm_nemo.status.pods import WAITING_FAILURES, condense_scheduling, pod_problem, summarize_pods
from helm_nemo.status.progress import RunInputs, progress, run_inputs
from kube_emulator import ContainerLog, KubeEmulator

RELEASE = "llama-test"
VALUES = f"""\
release: {RELEASE}
chart: jobset
accelerator: a3ultra
queue: a3-ultra
workload:
  gpus: 432
  image: nemo:25.07
  envs:
  - name: NEMO_RECIPE
    value: llama31_405b
  arguments:
  - --global_batch_size=32
  - --max_steps=5000
"""


# --------------------------------------------------------------------------------------------------------
# Reasons in words (pure)


def test_failed_scheduling_is_condensed():
    message = (
        "0/54 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
        "53 Insufficient nvidia.com/gpu. preemption: 0/54 nodes are available: 54 No preemption victims "
        "found for incoming pod."
    )
    assert (
        condense_scheduling(message)
        == "0/54 nodes available: 53 Insufficient nvidia.com/gpu, 1 untolerated taint {node.kubernetes.io/unreachable: }"
    )
    assert (
        condense_scheduling("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.")
        == "0/3 nodes available: 3 didn't match node affinity/selector"
    )
    # Kubernetes 1.32+ (DRA's post-filter), as the real scheduler of tests/real_cluster.py writes it
    assert (
        condense_scheduling(
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. no new claims to deallocate, "
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
        == "0/1 nodes available: 1 Insufficient cpu, 1 Insufficient memory"
    )
    # a reason without a count is said as the scheduler wrote it (not `0 has unbound …`)
    assert (
        condense_scheduling(
            "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are "
            "available: 1 Preemption is not helpful for scheduling."
        )
        == "0/1 nodes available: pod has unbound immediate PersistentVolumeClaims"
    )


@pytest.mark.parametrize(
    "build, reason, words",
    [
        (
            lambda: S.pod(RELEASE, 3, phase="Failed", statuses=[S.terminated("OOMKilled", 137, S.T0)]),
            "OOMKilled",
            "out of memory (OOMKilled), exit code 137 (SIGKILL)",
        ),
        (
            lambda: S.pod(RELEASE, 1, phase="Failed", statuses=[S.terminated("Error", 139, S.T0)]),
            "Error",
            "exit code 139 (SIGSEGV)",
        ),
        (
            lambda: S.pod(
                RELEASE, 2, phase="Running", statuses=[S.terminated("Error", 1, S.T0, restarts=4, state="crash")]
            ),
            "CrashLoopBackOff",
            "the container keeps crashing (restarted 4x; last: exit code 1)",
        ),
        (
            lambda: S.pod(
                RELEASE,
                0,
                phase="Pending",
                statuses=[
                    {
                        "name": "workload",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": 'Back-off pulling image "nvcr.io/nvidia/nemo:25.13"',
                            }
                        },
                    }
                ],
            ),
            "ImagePullBackOff",
            'cannot pull the image: Back-off pulling image "nvcr.io/nvidia/nemo:25.13"',
        ),
        (
            lambda: S.pod(
                RELEASE,
                5,
                phase="Failed",
                statuses=[],
                reason="Evicted",
                message="The node was low on resource: ephemeral-storage.",
            ),
            "Evicted",
            "evicted: The node was low on resource: ephemeral-storage.",
        ),
        (
            lambda: S.pod(
                RELEASE,
                4,
                phase="Pending",
                statuses=[],
                node=False,
                conditions=[
                    S.condition(
                        "PodScheduled",
                        "False",
                        "Unschedulable",
                        "0/54 nodes are available: 54 Insufficient nvidia.com/gpu.",
                    )
                ],
            ),
            "FailedScheduling",
            "0/54 nodes available: 54 Insufficient nvidia.com/gpu",
        ),
        (
            lambda: S.pod(
                RELEASE,
                0,
                phase="Running",
                statuses=[
                    {
                        **S.terminated("OOMKilled", 137, S.T0, restarts=1),
                        "state": {"running": {"startedAt": S.iso(S.T0)}},
                        "lastState": {
                            "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": S.iso(S.T0)}
                        },
                    }
                ],
            ),
            "OOMKilled",
            "was out of memory (OOMKilled) and restarted, exit code 137 (SIGKILL)",
        ),
    ],
)
def test_pod_reasons(build, reason, words):
    problem = pod_problem(build())
    assert (problem.reason, problem.words) == (reason, words)


def test_healthy_pods_have_no_problem_and_groups_merge_identical_reasons():
    assert pod_problem(S.pod(RELEASE, 0)) is None
    unscheduled = [
        S.pod(
            RELEASE,
            i,
            phase="Pending",
            statuses=[],
            node=False,
            conditions=[
                S.condition(
                    "PodScheduled",
                    "False",
                    "Unschedulable",
                    "0/54 nodes are available: 54 Insufficient nvidia.com/gpu.",
                )
            ],
        )
        for i in range(40)
    ]
    oom = S.pod(RELEASE, 41, phase="Failed", statuses=[S.terminated("OOMKilled", 137, S.T0 + timedelta(minutes=4))])
    summary = summarize_pods(unscheduled + [oom] + [S.pod(RELEASE, 50)])
    assert summary.phases == {"Pending": 40, "Failed": 1, "Running": 1}
    assert [(g.reason, len(g.pods)) for g in summary.groups] == [("OOMKilled", 1), ("FailedScheduling", 40)]


@pytest.mark.parametrize(
    "conds, state, why",
    [
        (
            [
                S.condition(
                    "QuotaReserved",
                    "False",
                    "Pending",
                    "couldn't assign flavors to pod set workload: insufficient "
                    "unused quota for nvidia.com/gpu in flavor a3-ultra, 16 more needed",
                )
            ],
            "pending",
            "quota",
        ),
        (
            [
                S.condition(
                    "QuotaReserved",
                    "False",
                    "Pending",
                    "couldn't assign flavors to pod set workload: topology "
                    '"gke-default" doesn\'t allow to fit any of 54 pod(s). Total nodes: 60; excluded: resource '
                    '"nvidia.com/gpu": 8',
                )
            ],
            "pending",
            "topology",
        ),
        (
            [S.condition("QuotaReserved", "True", "QuotaReserved"), S.condition("Admitted", "True", "Admitted")],
            "admitted",
            "",
        ),
        ([S.condition("Finished", "True", "JobFinished", "Job finished successfully")], "finished", ""),
        (
            [S.condition("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload")],
            "evicted",
            "",
        ),
    ],
)
def test_kueue_states(conds, state, why):
    found = kueue.kueue_state(S.workload(S.jobset(RELEASE, 54), conds))
    assert (found.state, found.why) == (state, why)
    if state == "pending":
        assert not found.message.startswith("couldn't assign")  # the prefix every message shares is dropped


def test_workload_states():
    assert workloads.workload_state(S.jobset(RELEASE, 2)).state == "Active"
    done = S.jobset(RELEASE, 2, conditions=[S.condition("Completed", reason="AllJobsCompleted")])
    assert workloads.workload_state(done).state == "Completed"
    failed = S.jobset(
        RELEASE,
        2,
        restarts=3,
        max_restarts=3,
        conditions=[
            S.condition(
                "Failed", reason="ReachedMaxRestarts", message="jobset failed due to reaching max number of restarts"
            )
        ],
    )
    state = workloads.workload_state(failed)
    assert (state.state, state.reason, state.restarts, state.max_restarts) == ("Failed", "ReachedMaxRestarts", 3, 3)
    assert workloads.workload_state(S.jobset(RELEASE, 2, suspend=True)).state == "Suspended"


# --------------------------------------------------------------------------------------------------------
# Failures: real logs of the corpus (tests/logs/real/public/, each with its source in case.yaml)

REAL = Path(__file__).resolve().parent / "logs" / "real" / "public"


def real_log(case: str) -> str:
    return (REAL / case / "log.txt").read_text(encoding="utf-8")


# helm-nemo's own data-prep worker prints these (helm_nemo/dataprep, docs/data-prep.md)
DATA_PREP_FAILED = {
    "data-prep-checksum": "helm-nemo data-prep: shard 03 failed: sha256 mismatch (expected ab12cd34ef56..., got "
    "9f3e00112233...)",
    "data-prep-download": "helm-nemo data-prep: shard 07 failed: download: HTTP 404",
    "data-prep-tokenizer": "helm-nemo data-prep: shard 02 failed: tokenizer exited with status 1",
    "data-prep-shard": "helm-nemo data-prep: shard 05 failed: zstd -d failed",
}
# what a healthy data-prep worker prints (docs/data-prep.md): no signature may match it
DATA_PREP_HEALTHY = """\
helm-nemo data-prep: download /fsx/data/bpe/vocab.json done (1.0 MiB)
helm-nemo data-prep: download /fsx/data/bpe/merges.txt kept (present)
helm-nemo data-prep: worker 0/2 shards 3
helm-nemo data-prep: shard 00 skipped (complete)
helm-nemo data-prep: shard 02 download: attempt 1 of 6 failed (HTTP 503), retrying in 10s
helm-nemo data-prep: shard 02 done (1.2 GiB in 3m10s)
Opening /fsx/data/pile/.helm-nemo/work/04.jsonl
helm-nemo data-prep: shard 04 done (1.1 GiB in 2m58s)
helm-nemo data-prep: worker 0/2 finished: 3 shards, 1 skipped
"""


def test_healthy_logs_of_every_format_are_not_failures():
    for text in (S.nemo2_log(60, 5000) + S.nemo1_log(40, 5000) + S.dllogger_log(30), DATA_PREP_HEALTHY):
        assert not diagnose_texts([("p", text)]).failed


@pytest.mark.parametrize(
    "line, sig_id",
    [
        *((line, sig) for sig, line in DATA_PREP_FAILED.items()),
        ("helm-nemo data-prep: download /fsx/data/bpe/vocab.json failed: HTTP 404", "data-prep-download"),
        (
            "helm-nemo data-prep: download /fsx/data/bpe/vocab.json failed: sha256 mismatch (expected 1..., got 2...)",
            "data-prep-checksum",
        ),
        ("helm-nemo data-prep: shard 01 failed: download: HTTP 503 after 6 attempts", "data-prep-download"),
        ("helm-nemo data-prep: shard 01 failed: the tokenizer wrote no 01_text_document.idx", "data-prep-tokenizer"),
        ("helm-nemo data-prep: shard 01 failed: exit status 137", "data-prep-shard"),
    ],
)
def test_data_prep_failure_lines_of_every_kind(line, sig_id):
    """The worker's failure lines (an extra download, a shard's download after its retries) reach the
    specific signature, not the general one."""
    cause = diagnose_texts([("p", line + "\n")]).cause
    assert cause is not None and (cause.signature, cause.klass) == (sig_id, "data-prep")


# --------------------------------------------------------------------------------------------------------
# Progress equals helm nemo metrics


@pytest.fixture
def values_file(tmp_path) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(VALUES)
    return path


@pytest.mark.parametrize(
    "fmt, log, steps", [("nemo2", S.nemo2_log, 60), ("nemo1", S.nemo1_log, 45), ("dllogger", None, 30)]
)
def test_progress_figures_equal_metrics(tmp_path, values_file, fmt, log, steps):
    text = S.dllogger_log(steps) if log is None else log(steps, 5000)
    found = progress(text, run_inputs(str(values_file)))
    assert found.format == fmt and found.last_step == steps - 1
    assert (found.first_step, found.window_steps) == (steps - 20, 20)
    path = tmp_path / "rank0.log"
    path.write_text(text if text.endswith("\n") else text + "\n")  # the log once the bar's line is ended
    report = measure(
        Request(file=str(path), values=str(values_file), start_step=found.first_step, end_step=found.last_step)
    )
    assert (found.step_time_s, found.tflops_per_gpu, found.mfu) == (
        report.step_time_s,
        report.tflops_per_gpu,
        report.mfu,
    )
    assert found.tokens_per_s == 32 * 8192 / report.step_time_s
    assert found.max_steps == 5000
    assert found.eta_s == (5000 - steps) * report.step_time_s


def test_progress_without_values_gives_step_time_and_says_what_is_missing():
    found = progress(S.nemo2_log(30, 100), RunInputs(missing=["the number of GPUs is not known"]))
    assert found.step_time_s is not None and found.mfu is None and found.max_steps == 100
    assert "no TFLOPS/MFU: the number of GPUs is not known" in found.notes
    assert progress("loading the dataset\n", None) is None


def test_stall_needs_a_timestamped_last_step():
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    log = ContainerLog()
    log.append(S.nemo2_log(30, 100), now - timedelta(hours=1), 1.0)
    stale = progress(log.render(0, len(log.entries), True, True), None, now=now)
    assert stale.stalled and stale.since_last_s > 3000
    fresh = progress(log.render(0, len(log.entries), True, True), None, now=now - timedelta(minutes=59))
    assert not fresh.stalled


# --------------------------------------------------------------------------------------------------------
# The emulator's log endpoint


def test_log_endpoint_tail_timestamps_previous_and_container(tmp_path):
    from helm_nemo.kube import KubeApiError, connect

    with KubeEmulator(ready=False) as kube:
        kube.put(S.pod(RELEASE, 0))
        name = S.pod(RELEASE, 0)["metadata"]["name"]
        kube.write_log(S.NS, name, "a\n" + "x" * 40000 + "\nlast\n", at=S.T0, step_s=1.0)
        client = connect(["--kubeconfig", str(kube.kubeconfig(tmp_path / "kc"))], env={}, namespace=S.NS)
        path = f"/api/v1/namespaces/{S.NS}/pods/{name}/log"
        with pytest.raises(KubeApiError, match="a container name must be specified"):
            client.text(path)
        # a 40000-character line is three runtime entries: tailLines=3 gets the last two and `last`
        assert client.text(path, {"container": "workload", "tailLines": "3"}) == "x" * (40000 - 16384) + "\nlast\n"
        stamped = client.text(path, {"container": "workload", "tailLines": "2", "timestamps": "true"})
        assert (
            stamped.startswith("2026-11-25T10:00:03.000000000Z x")
            and "\n2026-11-25T10:00:04.000000000Z last\n" in stamped
        )
        assert client.text(path, {"container": "workload", "limitBytes": "3"}) == "a\nx"
        with pytest.raises(KubeApiError, match="previous terminated container"):
            client.text(path, {"container": "workload", "previous": "true"})


def test_log_endpoint_follow_streams_until_the_log_closes(tmp_path):
    from helm_nemo.kube import connect

    with KubeEmulator(ready=False) as kube:
        kube.put(S.pod(RELEASE, 0))
        name = S.pod(RELEASE, 0)["metadata"]["name"]
        kube.write_log(S.NS, name, "one\n")
        client = connect(["--kubeconfig", str(kube.kubeconfig(tmp_path / "kc"))], env={}, namespace=S.NS)

        def later():
            time.sleep(0.3)
            kube.write_log(S.NS, name, "two\n")
            time.sleep(0.2)
            kube.write_log(S.NS, name, "three\n", close=True)

        threading.Thread(target=later, daemon=True).start()
        pieces = list(
            client.stream(f"/api/v1/namespaces/{S.NS}/pods/{name}/log", {"container": "workload", "follow": "true"})
        )
        assert "".join(pieces) == "one\ntwo\nthree\n" and len(pieces) >= 2


# --------------------------------------------------------------------------------------------------------
# The named states, end to end (helm nemo status against the emulator)


@pytest.fixture
def cluster(tmp_path):
    with KubeEmulator(ready=False) as kube:
        kube.env = {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kubeconfig", namespace=S.NS)), "HELM_NAMESPACE": S.NS}
        yield kube


def nemo(kube, *args):
    result = CliRunner().invoke(main, list(args), env=kube.env, catch_exceptions=False)
    return result.exit_code, result.output


def put_running(kube, nodes: int, log: str, *, stale_s: float = 0.0, step_s: float = 1.0):
    js = kube.put(S.jobset(RELEASE, nodes))  # the API server gives it its uid
    kube.put(S.workload(js, [S.condition("QuotaReserved"), S.condition("Admitted")], admitted_by="a3-ultra-cq"))
    for index in range(nodes):
        kube.put(S.pod(RELEASE, index))
    entries = ContainerLog()
    entries.append(log, S.T0, 0)
    start = datetime.now(UTC) - timedelta(seconds=stale_s + step_s * len(entries.entries))
    kube.write_log(S.NS, S.pod(RELEASE, 0)["metadata"]["name"], log, at=start, step_s=step_s)
    return js


@pytest.mark.parametrize(
    "fmt, log", [("nemo2", S.nemo2_log(60, 5000)), ("nemo1", S.nemo1_log(45, 5000)), ("dllogger", S.dllogger_log(30))]
)
def test_running_healthy(cluster, values_file, tmp_path, fmt, log):
    put_running(cluster, 4, log)
    code, out = nemo(cluster, "status", "--values", str(values_file))
    found = progress(log, run_inputs(str(values_file)))
    assert code == 0, out
    first = out.splitlines()[0]
    assert first.startswith(
        f"{RELEASE} ({S.NS}): Running {found.steps_done}/5000 steps, "
        f"{found.step_time_s:.3g} s/step, {found.tflops_per_gpu:.0f} TFLOPS/GPU, "
        f"MFU {found.mfu * 100:.1f} %"
    ), out
    assert "ETA " in first and "Kueue: admitted by a3-ultra-cq" in out and "pods: 4 Running; 4 ready" in out
    assert f"{fmt} log" in out and "STALLED" not in out
    data = json.loads(nemo(cluster, "status", "--values", str(values_file), "-o", "json")[1])
    p = data["releases"][0]["progress"]
    assert (p["step_time_s"], p["mfu"], p["steps_done"]) == (found.step_time_s, found.mfu, found.steps_done)
    assert data["exit_code"] == 0 and data["releases"][0]["state"] == "Running"


def test_stalled(cluster, values_file):
    put_running(cluster, 2, S.nemo2_log(40, 5000), stale_s=3600)
    code, out = nemo(cluster, "status", "--values", str(values_file))
    assert code == 1, out
    assert out.splitlines()[0].startswith(
        f"{RELEASE} ({S.NS}): Stalled: no training step for 1 h 00 m (limit 5 m 00 s), last step 40/5000 at "
    )


@pytest.mark.parametrize(
    "why, message",
    [
        (
            "quota",
            "couldn't assign flavors to pod set workload: insufficient unused quota for nvidia.com/gpu in flavor "
            "a3-ultra, 16 more needed",
        ),
        (
            "topology",
            "couldn't assign flavors to pod set workload: topology \"gke-default\" doesn't allow to fit any of "
            '54 pod(s). Total nodes: 60; excluded: resource "nvidia.com/gpu": 8',
        ),
    ],
)
def test_pending_in_kueue(cluster, values_file, why, message):
    js = cluster.put(
        S.jobset(
            RELEASE,
            54,
            suspend=True,
            conditions=[S.condition("Suspended", reason="WaitForAdmission")],
            ready=0,
            active=0,
        )
    )
    cluster.put(S.workload(js, [S.condition("QuotaReserved", "False", "Pending", message)]))
    code, out = nemo(cluster, "status", "--values", str(values_file))
    assert code == 0, out
    assert out.splitlines()[0] == f"{RELEASE} ({S.NS}): Queued: pending on {why}: {message.split(': ', 1)[1]}"


# rank 0's NCCL watchdog, as NeMo's bionemo run printed it (tests/logs/real/public/nemo-8441-…)
WATCHDOG = real_log("nemo-8441-bionemo-ddp-allreduce-timeout").splitlines()[2]


def test_one_pod_oom_killed(cluster, values_file):
    oom_at = S.T0 + timedelta(hours=2, minutes=4)
    js = S.jobset(
        RELEASE,
        4,
        conditions=[
            S.condition(
                "Failed",
                reason="FailedJobs",
                message="jobset failed due to one or more job failures",
                at=oom_at + timedelta(minutes=10),
            )
        ],
        ready=0,
        active=0,
        failed=1,
    )  # its one job failed
    cluster.put(js)
    cluster.put(S.pod(RELEASE, 3, phase="Failed", statuses=[S.terminated("OOMKilled", 137, oom_at)]))
    cluster.write_log(S.NS, S.pod(RELEASE, 3)["metadata"]["name"], S.nemo2_log(5, 5000), at=S.T0)
    for index in (0, 1, 2):  # the others time out in NCCL ten minutes later
        cluster.put(
            S.pod(RELEASE, index, phase="Failed", statuses=[S.terminated("Error", 1, oom_at + timedelta(minutes=10))])
        )
        cluster.write_log(
            S.NS,
            S.pod(RELEASE, index)["metadata"]["name"],
            S.nemo2_log(5, 5000) + WATCHDOG + "\n",
            at=oom_at + timedelta(minutes=10),
        )
    code, out = nemo(cluster, "status", "--values", str(values_file))
    assert code == 1, out
    first = out.splitlines()[0]
    assert first == (
        f"{RELEASE} ({S.NS}): Failed: pod {RELEASE}-workload-0-3-abcde (rank 3) host-oom at 12:04: "
        "OOMKilled: out of memory (OOMKilled), exit code 137 (SIGKILL)"
    ), out
    assert "STALLED" not in out and "ETA" not in out  # the run is over
    assert "JobSet llama-test: Failed (FailedJobs)" in out and "Error llama-test-workload-0-0-abcde and 2 more" in out
    assert "nccl-timeout (nccl-watchdog-timeout)" in out  # the others' timeouts: what followed


def test_image_pull_failure(cluster, values_file):
    js = S.jobset(RELEASE, 2, ready=0)
    cluster.put(js)
    pulling = {
        "name": "workload",
        "ready": False,
        "restartCount": 0,
        "state": {
            "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nvcr.io/nvidia/nemo:25.13"'}
        },
    }
    for index in range(2):
        cluster.put(S.pod(RELEASE, index, phase="Pending", statuses=[pulling]))
    cluster.put(
        S.event(
            "Pod",
            S.pod(RELEASE, 0)["metadata"]["name"],
            "Failed",
            'Failed to pull image "nvcr.io/nvidia/nemo:25.13": manifest unknown',
            S.T0,
            count=7,
        )
    )
    code, out = nemo(cluster, "status", "--values", str(values_file))
    assert code == 1, out
    assert out.splitlines()[0] == (
        f"{RELEASE} ({S.NS}): Failed: pod {RELEASE}-workload-0-0-abcde (+1 more) "
        "ImagePullBackOff (cannot pull the image: Back-off pulling image "
        '"nvcr.io/nvidia/nemo:25.13") at 10:00'
    )
    assert 'Failed: Failed to pull image "nvcr.io/nvidia/nemo:25.13": manifest unknown (x7)' in out


def test_pods_not_scheduled(cluster, values_file):
    cluster.put(S.jobset(RELEASE, 3, ready=0))
    message = (
        "0/54 nodes are available: 51 node(s) didn't match Pod's node affinity/selector, 3 Insufficient nvidia.com/gpu."
    )
    cluster.put(S.pod(RELEASE, 0))
    for index in (1, 2):
        cluster.put(
            S.pod(
                RELEASE,
                index,
                phase="Pending",
                statuses=[],
                node=False,
                conditions=[S.condition("PodScheduled", "False", "Unschedulable", message)],
            )
        )
    code, out = nemo(cluster, "status", "--values", str(values_file))
    assert code == 0, out
    assert out.splitlines()[0] == (
        f"{RELEASE} ({S.NS}): Pending: 2/3 pods not scheduled: 0/54 nodes available: "
        "51 didn't match node affinity/selector, 3 Insufficient nvidia.com/gpu"
    )


def test_completed_and_not_found(cluster, values_file):
    code, out = nemo(cluster, "status", "--values", str(values_file))
    assert (code, out.strip()) == (3, f"{RELEASE} ({S.NS}): not found in namespace {S.NS}")
    js = S.jobset(
        RELEASE,
        2,
        conditions=[S.condition("Completed", reason="AllJobsCompleted", at=S.T0 + timedelta(hours=9))],
        ready=0,
        active=0,
        succeeded=1,
    )
    cluster.put(js)
    for index in range(2):
        cluster.put(S.pod(RELEASE, index, phase="Succeeded", statuses=[S.terminated("Completed", 0, S.T0)]))
    cluster.write_log(S.NS, S.pod(RELEASE, 0)["metadata"]["name"], S.nemo2_log(100, 100), at=S.T0)
    code, out = nemo(cluster, "status", RELEASE)
    assert code == 0, out
    assert out.splitlines()[0] == f"{RELEASE} ({S.NS}): Completed at 19:00: 100 steps"


def test_watch_lists_each_kind_once_per_refresh(cluster, values_file):
    from helm_nemo.actions import status as action
    from helm_nemo.kube import connect

    put_running(cluster, 8, S.nemo2_log(50, 5000))
    client = connect([], env=cluster.env)
    screens = []
    before = len(cluster.requests)
    code = action.status([RELEASE], client, watch=True, interval=0.01, out=screens.append, tty=True, max_refreshes=3)
    assert code == 0 and len(screens) == 3
    assert all(screen.startswith(action.CLEAR + "helm nemo status") and "progress: [" in screen for screen in screens)
    lines = []
    action.status([RELEASE], client, watch=True, interval=0.01, out=lines.append, output="json", max_refreshes=2)
    assert [json.loads(line)["releases"][0]["state"] for line in lines] == ["Running", "Running"]  # JSON Lines
    paths = [r.path for r in cluster.requests[before : before + 21]]  # the three text refreshes
    per_refresh = {p: paths.count(p) for p in set(paths)}
    assert per_refresh == {
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{S.NS}/jobsets": 3,
        f"/apis/batch/v1/namespaces/{S.NS}/jobs": 3,
        f"/api/v1/namespaces/{S.NS}/pods": 3,
        f"/api/v1/namespaces/{S.NS}/persistentvolumeclaims": 3,
        f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{S.NS}/workloads": 3,
        f"/api/v1/namespaces/{S.NS}/events": 3,
        f"/api/v1/namespaces/{S.NS}/pods/{S.pod(RELEASE, 0)['metadata']['name']}/log": 3,
    }
    log_queries = [r.query for r in cluster.requests[before:] if r.path.endswith("/log")]
    assert all(q["tailLines"] == "2000" and q["container"] == "workload" for q in log_queries)


def test_watch_ends_when_the_run_is_over(cluster, values_file):
    cluster.put(S.jobset(RELEASE, 1, conditions=[S.condition("Completed")], ready=0, active=0, succeeded=1))
    code, out = nemo(cluster, "status", RELEASE, "--watch", "--interval", "1")
    assert code == 0 and out.count("helm nemo status") == 1 and ": Completed" in out


def test_suspended_without_kueue_and_releases_without_a_job():
    from helm_nemo.status.cluster import ReleaseStatus
    from helm_nemo.status.verdict import exit_code, verdict

    plain = S.jobset("r", 2, suspend=True)
    del plain["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    suspended = ReleaseStatus("r", S.NS, workload=workloads.workload_state(plain))
    assert (verdict(suspended).state, verdict(suspended).line) == ("Suspended", "Suspended (spec.suspend)")
    no_workload = ReleaseStatus("r", S.NS, workload=workloads.workload_state(S.jobset("r", 2, suspend=True)))
    assert verdict(no_workload).line == (
        "Queued: no Kueue Workload yet for queue a3-ultra (is Kueue running, and the "
        f"LocalQueue a3-ultra in namespace {S.NS}?)"
    )
    restarted = ReleaseStatus(
        "r",
        S.NS,
        workload=workloads.workload_state(S.jobset("r", 1, restarts=2, max_restarts=20)),
        pods=summarize_pods([S.pod("r", 0)]),
    )
    assert verdict(restarted).line == "Running: 1/1 pods, no training step in the log yet (the set restarted 2x)"
    storage = ReleaseStatus("r-storage", S.NS, claims={"r-ckpt": "Bound"})
    assert verdict(storage).line == "Ready: 1 claim(s) bound"
    unbound = ReleaseStatus("r-storage", S.NS, claims={"r-ckpt": "Pending"})
    assert verdict(unbound).line == "Pending: claim(s) r-ckpt not bound"
    supervisor = ReleaseStatus("r-sup", S.NS, pods=summarize_pods([S.pod("r-sup", 0)]))
    assert verdict(supervisor).line == "Ready: 1/1 pods ready"
    starting = ReleaseStatus(
        "r",
        S.NS,
        workload=workloads.workload_state(S.jobset("r", 2)),
        pods=summarize_pods([S.pod("r", 0), S.pod("r", 1, phase="Pending", statuses=[])]),
    )
    assert verdict(starting).line == "Pending: 1/2 pods running (1 Running, 1 Pending)"
    running = ReleaseStatus(
        "r", S.NS, workload=workloads.workload_state(S.jobset("r", 1)), pods=summarize_pods([S.pod("r", 0)])
    )
    assert verdict(running).line == "Running: 1/1 pods, no training step in the log yet"
    assert exit_code([verdict(storage), verdict(ReleaseStatus("x", S.NS))]) == 3
    assert exit_code([verdict(ReleaseStatus("x", S.NS)), verdict(suspended)]) == 3


@pytest.mark.parametrize(
    "waiting, reason, words",
    [
        (
            {"reason": "CreateContainerConfigError", "message": 'secret "hf-token" not found'},
            "CreateContainerConfigError",
            'the container\'s configuration is wrong (a missing Secret or ConfigMap?): secret "hf-token" not found',
        ),
        (
            {"reason": "ErrImagePull", "message": "rpc error: code = NotFound desc = failed to pull and unpack image"},
            "ErrImagePull",
            "cannot pull the image: rpc error: code = NotFound desc = failed to pull and unpack image",
        ),
    ],
)
def test_more_waiting_reasons(waiting, reason, words):
    pod = S.pod(
        RELEASE, 0, phase="Pending", statuses=[{"name": "workload", "ready": False, "state": {"waiting": waiting}}]
    )
    assert (pod_problem(pod).reason, pod_problem(pod).words) == (reason, words)


def test_scheduling_gated_by_kueue_topology():
    pod = S.pod(
        RELEASE,
        0,
        phase="Pending",
        statuses=[],
        node=False,
        conditions=[
            S.condition(
                "PodScheduled", "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"
            )
        ],
    )
    pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
    problem = pod_problem(pod)
    assert (problem.reason, problem.words, problem.fatal) == (
        "SchedulingGated",
        "waiting for scheduling gate(s) kueue.x-k8s.io/topology",
        False,
    )


def test_evicted_pod_fails_the_run(cluster, values_file):
    cluster.put(S.jobset(RELEASE, 2))
    cluster.put(S.pod(RELEASE, 0))
    cluster.put(
        S.pod(
            RELEASE,
            1,
            phase="Failed",
            statuses=[],
            reason="Evicted",
            message="The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi.",
        )
    )
    code, out = nemo(cluster, "status", RELEASE)
    assert code == 1
    assert out.splitlines()[0].startswith(
        f"{RELEASE} ({S.NS}): Failed: pod {RELEASE}-workload-0-1-abcde (rank 1) stopped at 10:00: evicted: The node "
        "was low on resource: memory."
    ), out


def test_crash_loop_reads_the_previous_container(cluster):
    cluster.put(S.jobset(RELEASE, 1))
    cluster.put(S.pod(RELEASE, 0, statuses=[S.terminated("Error", 1, S.T0, restarts=3, state="crash")]))
    name = S.pod(RELEASE, 0)["metadata"]["name"]
    cluster.write_log(S.NS, name, "starting again\n")
    cluster.write_log(S.NS, name, real_log("nemo-14609-merge-cfg-with-attributeerror"), previous=True, at=S.T0)
    code, out = nemo(cluster, "status", RELEASE)
    assert code == 1
    truth = "AttributeError: type object 'MegatronGPTSFTModel' has no attribute 'merge_cfg_with'"
    assert out.splitlines()[0].startswith(f"{RELEASE} ({S.NS}): Failed: pod {name} python-exception at 10:00: "), out
    assert truth in out.splitlines()[0]
    log_queries = [r.query for r in cluster.requests if r.path.endswith("/log")]
    assert {"previous": "true", "container": "workload", "tailLines": "300", "timestamps": "true"} in log_queries


# ---- helm nemo logs


def test_logs_of_a_rank_and_of_a_pod(cluster, values_file):
    put_running(cluster, 3, "rank zero\n")
    cluster.write_log(S.NS, S.pod(RELEASE, 2)["metadata"]["name"], "rank two\nsecond line\n")
    code, out = nemo(cluster, "logs", "--values", str(values_file))
    assert (code, out) == (0, f"==> {RELEASE}-workload-0-0-abcde (workload) <==\nrank zero\n")
    code, out = nemo(cluster, "logs", RELEASE, "--rank", "2", "--tail", "1")
    assert (code, out.splitlines()[-1]) == (0, "second line")
    code, out = nemo(cluster, "logs", RELEASE, "--pod", S.pod(RELEASE, 2)["metadata"]["name"])
    assert out.endswith("rank two\nsecond line\n")
    code, out = nemo(cluster, "logs", RELEASE, "--rank", "7")
    assert (code, out.strip()) == (3, "helm nemo logs: no pod of rank 7 (ranks: 0, 1, 2)")


def test_logs_follow_streams_until_the_container_ends(cluster):
    put_running(cluster, 1, "first\n")
    name = S.pod(RELEASE, 0)["metadata"]["name"]

    def later():
        time.sleep(0.4)
        cluster.write_log(S.NS, name, "second\n", close=True)

    threading.Thread(target=later, daemon=True).start()
    code, out = nemo(cluster, "logs", RELEASE, "-f")
    assert (code, out.splitlines()[1:]) == (0, ["first", "second"])
    assert [r.query.get("follow") for r in cluster.requests if r.path.endswith("/log")] == ["true"]


def test_logs_errors_names_the_first_cause_across_pods(cluster):
    """Pod 2 runs out of GPU memory first (a real OOM excerpt); the others' watchdogs fire later (a real
    watchdog line): the first cause is pod 2's by the kubelet's times, the timeouts what followed."""
    cluster.put(S.jobset(RELEASE, 3))
    oom = real_log("gpt2-chinese-215-cuda-oom")
    for index in range(3):
        cluster.put(S.pod(RELEASE, index))
        failure = oom if index == 2 else WATCHDOG + "\n"
        cluster.write_log(
            S.NS,
            S.pod(RELEASE, index)["metadata"]["name"],
            S.nemo2_log(3, 10) + failure,
            at=S.T0 + timedelta(minutes=1 if index == 2 else 30),
        )
    code, out = nemo(cluster, "logs", RELEASE, "--errors")
    assert code == 1, out
    assert out.splitlines()[0] == "FAILED: cuda-oom: CUDA out of memory (the GPU's memory is full)", out
    assert out.splitlines()[1].startswith(f"  first: {RELEASE}-workload-0-2-abcde line ")
    assert "nccl-timeout (nccl-watchdog-timeout) llama-test-workload-0-0-abcde" in out
    data = json.loads(nemo(cluster, "logs", RELEASE, "--errors", "-o", "json")[1])
    assert (data["cause"]["signature"], data["cause"]["pod"]) == ("cuda-oom", f"{RELEASE}-workload-0-2-abcde")
    assert {c["pod"] for c in data["consequences"] if c["signature"] == "nccl-timeout"} == {
        f"{RELEASE}-workload-0-0-abcde",
        f"{RELEASE}-workload-0-1-abcde",
    }
    assert data["pods_scanned"] == 3
    healthy_code, healthy = nemo(cluster, "logs", "other-release", "--errors")
    assert healthy_code == 3


# ---- bad input: exit 2, one screen, no traceback


def test_bad_input(cluster, tmp_path):
    code, out = nemo(cluster, "status")
    assert code == 2 and "name a release or give --values FILE" in out and "Traceback" not in out
    code, out = nemo(cluster, "logs", "-f", "values.yaml")
    assert code == 2 and "-f means --follow" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("release: Not_A_Name\n")
    code, out = nemo(cluster, "status", "--values", str(bad))
    assert code == 2 and f"{bad}:1:1: $.release: release name 'Not_A_Name'" in out and "Traceback" not in out
    code, out = nemo(cluster, "status", RELEASE, "--kube-context", "nowhere")
    assert code == 2 and "context 'nowhere' not found" in out


def test_slurm_status_reads_progress_from_the_job_log(tmp_path):
    from helm_nemo.targets import slurm_jobs

    log = tmp_path / "log-gpt3_126m_7.out"
    log.write_text("x" * (slurm_jobs.LOG_TAIL_BYTES + 10) + "\n" + S.nemo2_log(30, 100))
    lines = []
    slurm_jobs._progress_line(str(log), lines.append)
    found = progress(S.nemo2_log(30, 100))
    assert lines == [
        f"  training: step 30/100, {found.step_time_s:.4g} s/step (steps 10–29), "
        f"ETA {int(round(70 * found.step_time_s)) // 60} m {int(round(70 * found.step_time_s)) % 60:02d} s (nemo2 log)"
    ]
    slurm_jobs._progress_line(str(tmp_path / "missing.out"), lines.append)
    assert len(lines) == 1


# ---- a recipe installed by the real helm, then its pods: the charts' labels are what status selects by


def test_status_of_an_installed_recipe(helm, kube, tmp_path):
    """`helm nemo install` of seed 001's recipe (real helm) into the emulator; then what the controllers
    would add: Kueue admits and unsuspends the JobSet, its 54 pods run (labels from the rendered template),
    the supervisor's Deployment and DaemonSet have pods. status --values sees the three releases."""
    import subprocess
    import sys

    from conftest import cluster_env

    root = Path(__file__).resolve().parent.parent
    recipe = root / "values/examples/a3ultra-405b.yaml"
    env = {
        **cluster_env(helm.env, kube, tmp_path),
        "HELM_BIN": str(helm.binary),
        "GCS_BUCKET": "bkt-ckpt",
        "KUEUE_NAME": "a3-ultra",
        "PROJECT_ID": "proj-1234",
    }
    installed = subprocess.run(
        [sys.executable, "-m", "helm_nemo", "install", "--values", str(recipe), "-n", S.NS, "--no-preflight"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    jobset = kube.get("JobSet", "llama31-405b", S.NS)
    jobset["spec"]["suspend"] = False  # Kueue admitted it
    jobset = kube.replace(kube.resource("JobSet"), S.NS, "llama31-405b", jobset)
    kube.put(S.workload(jobset, [S.condition("QuotaReserved"), S.condition("Admitted")], admitted_by="a3-ultra-cq"))
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    for index in range(54):
        pod = S.pod("llama31-405b", index, suffix=f"{index:05x}")
        pod["metadata"]["labels"] = {
            **template["metadata"]["labels"],
            **{k: v for k, v in pod["metadata"]["labels"].items() if k.startswith(("jobset", "batch"))},
        }
        pod["spec"] = {**template["spec"], "nodeName": f"gke-a3u-{index:03d}"}
        kube.put(pod)
    rank0 = f"llama31-405b-workload-0-0-{0:05x}"
    log = S.nemo2_log(1234, 5000)
    kube.write_log(S.NS, rank0, log, at=datetime.now(UTC) - timedelta(seconds=log.count("\n")), step_s=1.0)
    for kind in ("Deployment", "DaemonSet"):
        for index, owner in enumerate(kube.objects(kind, S.NS)):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{owner['metadata']['name']}-{index}",
                    "namespace": S.NS,
                    "labels": owner["spec"]["template"]["metadata"]["labels"],
                },
                "spec": owner["spec"]["template"]["spec"],
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": c["name"], "ready": True, "restartCount": 0, "state": {"running": {}}}
                        for c in owner["spec"]["template"]["spec"]["containers"]
                    ],
                },
            }
            kube.put(pod)
    proc = subprocess.run(
        [sys.executable, "-m", "helm_nemo", "status", "--values", str(recipe), "-n", S.NS],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    firsts = [block.splitlines()[0] for block in proc.stdout.strip().split("\n\n")]
    supervisors = len(kube.objects("Deployment", S.NS)) + len(kube.objects("DaemonSet", S.NS))
    assert firsts[0] == f"llama31-405b-supervisor ({S.NS}): Ready: {supervisors}/{supervisors} pods ready"
    assert firsts[1] == f"llama31-405b-storage ({S.NS}): Ready: 1 claim(s) bound"
    found = progress(log, run_inputs(str(recipe)))
    assert found.tokens_per_s is None and found.mfu is None  # the recipe states no global batch size
    assert firsts[2] == f"llama31-405b ({S.NS}): Running 1234/5000 steps, {found.step_time_s:.3g} s/step, ETA 4 h 23 m"
    assert "no TFLOPS/MFU: the global batch size is not known" in proc.stdout  # the recipe's values state none
    print(proc.stdout)


# ---- a data-prep release (docs/data-prep.md): the shards instead of training steps

PILE = "pile"  # the release of tests/golden/data-prep/pile-fsx.yaml: 2 workers, shards 00..05
PILE_GOLDEN = Path(__file__).resolve().parent / "golden/data-prep/pile-fsx.yaml"
CHECKSUM = "helm-nemo data-prep: shard 03 failed: sha256 mismatch (expected ab12cd34ef56..., got 9f3e00112233...)"


def put_pile(kube, pod_retries: int | None = None) -> None:
    """The chart's ConfigMap and Indexed Job (the golden render of the pile example: its labels, selector,
    container name), run by the emulated Job controller: one running pod per index."""
    import yaml

    kube.hold_jobs("helm-nemo.dev/data-prep")
    for doc in yaml.safe_load_all(PILE_GOLDEN.read_text()):
        if not doc:
            continue
        doc["metadata"]["namespace"] = S.NS
        if doc["kind"] == "Job" and pod_retries is not None:
            doc["spec"]["backoffLimitPerIndex"] = pod_retries
        kube.put(doc)


def pile_log(kube, index: int, *lines: str) -> str:
    """Append lines to the log of index `index`'s newest pod; its name."""
    name = kube.job_pods(S.NS, PILE, index)[-1]["metadata"]["name"]
    kube.write_log(S.NS, name, "".join(line + "\n" for line in lines), container="data-prep")
    return name


def shard_line(name: str, what: str = "done (1.2 GiB in 3m10s)") -> str:
    return f"helm-nemo data-prep: shard {name} {what}"


def running_pile(kube) -> None:
    """Worker 0 (shards 00, 02, 04): 00 was complete already, 02 done. Worker 1 (01, 03, 05): its first pod
    did 01, failed 03 (checksum) and 05 (download) and exited 1; the retry pod skips 01 and does 05."""
    put_pile(kube)
    pile_log(
        kube,
        0,
        "helm-nemo data-prep: worker 0/2 shards 3",
        shard_line("00", "skipped (complete)"),
        shard_line("02"),
        shard_line("02"),  # the same shard twice: one shard
        shard_line("01"),  # another worker's shard: not worker 0's count
        "tokenizing 04 ...",
    )
    pile_log(kube, 1, shard_line("01"), CHECKSUM, shard_line("05", "failed: download: HTTP 503 after 6 attempts"))
    kube.finish_index(S.NS, PILE, 1, succeeded=False)  # backoffLimitPerIndex 3: a new pod for index 1
    pile_log(kube, 1, shard_line("01", "skipped (complete)"), shard_line("05"))  # 05 done by the retry


def test_data_prep_running_counts_shards_per_worker(cluster):
    running_pile(cluster)
    before = len(cluster.requests)
    code, out = nemo(cluster, "status", PILE)
    assert code == 0, out
    lines = out.splitlines()
    # worker 1: 01 done by its first pod (its `skipped` in the retry does not make it skipped), 05 by the retry
    assert (
        lines[0]
        == f"{PILE} ({S.NS}): Running: shards 4/6 done (worker 0: 2/3, worker 1: 2/3), 1 skipped, 1 failed so far"
    )
    assert "  shards: 4/6 done, 1 skipped (complete already), 1 failed" in lines
    assert "  Job pile: Active" in lines and "    pods: 2 ready, 2 active, 0 succeeded, 1 failed" in lines
    assert "    worker 0: 2/3, 1 skipped (running)" in lines
    assert "    worker 1: 2/3, 1 failed (running)" in lines
    assert f"    index 1: {CHECKSUM}" in lines
    assert "training:" not in out  # no training step is looked for
    paths = [r.path for r in cluster.requests[before:]]
    assert paths.count(f"/api/v1/namespaces/{S.NS}/configmaps") == 1
    logs = [p for p in paths if p.endswith("/log")]
    assert len(logs) == 3 == len(set(logs))  # each pod's tail once (the failed pod's signatures from the same text)
    queries = [r.query for r in cluster.requests[before:] if r.path.endswith("/log")]
    assert all(q["container"] == "data-prep" and q["tailLines"] == "1000" for q in queries)


def test_data_prep_json_and_library(cluster):
    from helm_nemo.actions import status as action
    from helm_nemo.kube import connect
    from helm_nemo.status import cluster as reads
    from helm_nemo.status.verdict import verdict

    running_pile(cluster)
    data = json.loads(nemo(cluster, "status", PILE, "-o", "json")[1])
    release = data["releases"][0]
    assert (data["exit_code"], release["state"], release["progress"]) == (0, "Running", None)
    shards = release["shards"]
    assert {k: shards[k] for k in ("done", "skipped", "failed", "total", "failed_indexes")} == {
        "done": 4,
        "skipped": 1,
        "failed": 1,
        "total": 6,
        "failed_indexes": [],
    }
    assert shards["failed_shards"] == [{"worker": 1, "shard": "03", "line": CHECKSUM}]
    assert [(w["worker"], w["state"], w["done"], w["skipped"], w["failed"], w["total"]) for w in shards["workers"]] == [
        (0, "running", 2, 1, 0, 3),
        (1, "running", 2, 0, 1, 3),
    ]
    client = connect([], env=cluster.env)
    (found,) = reads.read_statuses(client, S.NS, [PILE])
    assert found.data_prep and found.shards is not None
    assert found.shards.line() == "4/6 shards (worker 0: 2/3, worker 1: 2/3)"  # the recipe wait's words
    assert verdict(found).state == "Running"
    screens: list[str] = []
    assert action.status([PILE], client, watch=True, interval=0.01, out=screens.append, tty=False, max_refreshes=1) == 0
    assert "  progress: [####################----------]  66.7 %  shard 4/6" in screens[0]


def test_data_prep_completed(cluster):
    put_pile(cluster)
    pile_log(cluster, 0, shard_line("00", "skipped (complete)"), shard_line("02"), shard_line("04"))
    pile_log(cluster, 1, shard_line("01"))  # 03 and 05 beyond what was read: completedIndexes says all
    cluster.finish_index(S.NS, PILE, 0)
    cluster.finish_index(S.NS, PILE, 1)
    code, out = nemo(cluster, "status", PILE)
    assert code == 0, out
    first = out.splitlines()[0]
    assert first.startswith(f"{PILE} ({S.NS}): Completed at ") and first.endswith(": 6/6 shards (1 skipped)"), out
    assert "    worker 1: 3/3 (complete)" in out
    code, out = nemo(cluster, "status", PILE, "--watch", "--interval", "1")
    assert code == 0 and out.count("helm nemo status") == 1  # the watch ends: the Job is over


def test_data_prep_failed_names_the_index_and_the_line(cluster):
    put_pile(cluster, pod_retries=0)
    pile_log(cluster, 0, shard_line("00"), shard_line("02"), shard_line("04"))
    cluster.finish_index(S.NS, PILE, 0)
    pile_log(cluster, 1, shard_line("01"), CHECKSUM, shard_line("05"), "helm-nemo data-prep: worker 1/2 finished")
    cluster.finish_index(S.NS, PILE, 1, succeeded=False)  # out of retries: failedIndexes 1, the Job Failed
    code, out = nemo(cluster, "status", PILE)
    assert code == 1, out
    assert out.splitlines()[0] == (
        f"{PILE} ({S.NS}): Failed: index 1: shard 03 failed: sha256 mismatch (expected ab12cd34ef56..., got "
        "9f3e00112233...); 5/6 shards (1 failed)"
    )
    assert "FAILED: data-prep (data-prep-checksum): a download's sha256 does not match" in out, out
    data = json.loads(nemo(cluster, "status", PILE, "-o", "json")[1])
    shards = data["releases"][0]["shards"]
    assert (shards["done"], shards["failed"], shards["failed_indexes"]) == (5, 1, [1])
    assert [w["state"] for w in shards["workers"]] == ["complete", "failed"]
    code, out = nemo(cluster, "logs", PILE, "--errors")
    assert code == 1
    assert "FAILED: data-prep (data-prep-checksum): a download's sha256 does not match" in out
    assert f"  first: {PILE}-1-" in out and f"  line:  {CHECKSUM}" in out


def test_data_prep_index_out_of_retries_while_the_other_runs(cluster):
    put_pile(cluster, pod_retries=0)
    pile_log(cluster, 0, shard_line("00"))
    pile_log(cluster, 1, "helm-nemo data-prep: shard 01 failed: download: HTTP 404")
    cluster.finish_index(S.NS, PILE, 1, succeeded=False)  # failedIndexes 1, index 0 still running
    code, out = nemo(cluster, "status", PILE)
    assert code == 1, out
    assert out.splitlines()[0] == (
        f"{PILE} ({S.NS}): Failed: index 1 out of retries (the Job can no longer complete): shard 01 failed: "
        "download: HTTP 404; 1/6 shards (1 failed)"
    )


def test_logs_errors_of_a_data_prep_release(cluster):
    put_pile(cluster)
    pile_log(cluster, 0, "helm-nemo data-prep: download /fsx/data/bpe/vocab.json failed: HTTP 404")
    pile_log(cluster, 1, shard_line("01"), "Traceback-free tokenizer noise", DATA_PREP_FAILED["data-prep-tokenizer"])
    code, out = nemo(cluster, "logs", PILE, "--errors")
    assert code == 1, out
    data = json.loads(nemo(cluster, "logs", PILE, "--errors", "-o", "json")[1])
    assert sorted((g["signature"], g["count"]) for g in data["signatures"]) == [
        ("data-prep-download", 1),
        ("data-prep-tokenizer", 1),
    ]
    code, out = nemo(cluster, "logs", PILE, "--rank", "1")
    assert out.endswith(DATA_PREP_FAILED["data-prep-tokenizer"] + "\n")  # the data-prep container's log


def test_docs_list_every_class_state_and_reason():
    text = (Path(__file__).resolve().parent.parent / "docs/status.md").read_text()
    for klass in {sig.klass for sig in diagnose_lines.signatures() if sig.klass and sig.klass != "terminated"}:
        assert f"`{klass}`" in text
    for state in ("NotFound", "Completed", "Failed", "Stalled", "Queued", "Suspended", "Pending", "Running", "Ready"):
        assert f"| `{state}` |" in text
    for reason in [*WAITING_FAILURES, "FailedScheduling", "SchedulingGated", "OOMKilled", "Evicted", "Error"]:
        assert f"`{reason}`" in text
