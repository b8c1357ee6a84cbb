"""Why did it fail, on the real control plane (issue 34 item 6): the multi-pod GPU runs of tests/logs/real/gpu/,
each installed through the jobset chart (`helm nemo install`), its pods run by kwok on A3 High nodes, each pod's
own real log served by kwok (one `Logs` object per pod, the file's kubelet times kept), and each pod ended as the
case's `exit_codes` and `jobset` timeline say (the kubelet's report: `RealCluster.end_pod`). `helm nemo status`
must name the pod that failed first and the right cause, with Helm 3 and Helm 4.

One install per case (half of them with each helm), all cases at once, then every status with both helms: the
set-up waits on states (pods Running, logs served, the JobSet Failed), never on a fixed time.

What each case holds (case.yaml): segfault, cuda-oom, rank-exit, sigkill — rank 1 fails, rank 0's NCCL sees its
peer gone *earlier* by the kubelet's clock than node 1's torchrun summary, and node 0 is SIGKILLed (exit 137) ten
seconds later by the set's teardown; hang — rank 1 hangs, rank 0's watchdog fires and node 0 exits 1 while node 1,
hung, is killed (137) last; node-missing-c10d — node 1 never comes: rank 0's rendezvous times out (node 1's pod
has no log and is deleted by the Job controller when the Job fails, as on a cluster).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from conftest import HELMS
from real_cluster import KEEP_RUNNING_LABEL, cri_log
from test_real_cluster import (
    JOBSET_EXAMPLE,
    Nemo,
    condition,
    ensure_nodes,
    kueue_queue,
    new_namespace,
    ok,
    overlay,
    pods_of,
)

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent
GPU_CASES = ROOT / "tests/logs/real/gpu"
CASES = ["segfault", "hang", "node-missing-c10d", "cuda-oom", "rank-exit", "sigkill"]
RELEASE = "run"
INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass
class Run:
    case: str
    namespace: str
    truth: dict
    pods: dict[str, str] = field(default_factory=dict)  # log file name (node-N.log) -> pod name
    texts: dict[str, str] = field(default_factory=dict)  # log file name -> its text (kubectl --timestamps)


def stamps(text: str) -> list[str]:
    return [line.partition(" ")[0] for line in text.splitlines()]


def finished_at(case: dict, log: str, text: str) -> str:
    """When node N's container ended: the SIGKILL of the set's teardown when it got one, else when the script saw
    it fail, else its last line (the kubelet's times, to the second as the API keeps them)."""
    node = log.removesuffix(".log").replace("-", " ")  # "node 1"
    for entry in case.get("jobset") or []:
        if entry["what"].startswith(f"SIGKILL {node.replace(' ', '-')}"):
            return entry["at"][:19] + "Z"
    for entry in case.get("jobset") or []:
        if entry["what"].startswith(f"{node} failed"):
            return entry["at"][:19] + "Z"
    return stamps(text)[-1][:19] + "Z"


def _install(cluster, tmp: Path, helm: str, case: str) -> Run:
    namespace = new_namespace(cluster, f"why-{case}")
    kueue_queue(cluster, namespace, gpus=16)
    nemo = Nemo(helm, cluster, tmp / case)
    keep = overlay(tmp / case, "keep-running", {"workload": {"labels": {KEEP_RUNNING_LABEL: "true"}}})
    ok(nemo("install", RELEASE, "--values", str(JOBSET_EXAMPLE), "--values", str(keep), "-n", namespace))
    meta = yaml.safe_load((GPU_CASES / case / "case.yaml").read_text())
    texts = {log: (GPU_CASES / case / log).read_text() for log in meta["exit_codes"]}
    return Run(case, namespace, meta, texts=texts)


@pytest.fixture(scope="module")
def failed_runs(real_cluster, tmp_path_factory) -> dict[str, Run]:
    cluster = real_cluster
    tmp = tmp_path_factory.mktemp("why")
    ensure_nodes(cluster, "a3high", 2 * len(CASES))
    helms = sorted(HELMS)
    for case in CASES:
        (tmp / case).mkdir()
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = list(pool.map(lambda item: _install(cluster, tmp, helms[item[0] % 2], item[1]), enumerate(CASES)))

    def running(run: Run) -> dict[int, str]:
        pods = pods_of(cluster, run.namespace, RELEASE)
        if len(pods) != 2 or any(p["status"].get("phase") != "Running" for p in pods):
            return {}
        return {int(p["metadata"]["annotations"][INDEX]): p["metadata"]["name"] for p in pods}

    for run in runs:
        by_index = cluster.wait_for(f"{run.case}: both pods Running", lambda run=run: running(run), 120, 1)
        run.pods = {f"node-{index}.log": name for index, name in by_index.items()}
        for log, text in run.texts.items():
            served = tmp / run.case / f"{log}.cri"
            served.write_text(cri_log(text))
            cluster.serve_pod_log(run.namespace, run.pods[log], served, container="workload")
    for run in runs:  # kwok reads its Logs objects through a watch: served once the last line comes back
        for log, text in run.texts.items():
            path = f"/api/v1/namespaces/{run.namespace}/pods/{run.pods[log]}/log?container=workload&tailLines=1"
            last = text.splitlines()[-1].partition(" ")[2]
            cluster.wait_for(f"{run.case}: kwok serves {log}", lambda p=path, w=last: cluster.api("GET", p) == w + "\n")
    # The pods end as the case says, in the order they ended there, while the controller-manager is paused: the
    # Job controller then sees a case's pods ended together, as on the GPU machine (a pod still running is
    # deleted by the Job's failure, as node 1 of node-missing is).
    with cluster.paused("kube-controller-manager"):
        for run in runs:
            ends = sorted((finished_at(run.truth, log, text), log) for log, text in run.texts.items())
            for at, log in ends:
                started = stamps(run.texts[log])[0][:19] + "Z"
                cluster.end_pod(run.namespace, run.pods[log], run.truth["exit_codes"][log], at, started_at=started)
    for run in runs:
        jobset = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{run.namespace}/jobsets/{RELEASE}"
        cluster.wait_for(
            f"{run.case}: the JobSet Failed",
            lambda j=jobset: (condition(cluster.get(j), "Failed") or {}).get("status") == "True",
            90,
            1,
        )
        ended = set(run.pods[log] for log in run.texts)
        cluster.wait_for(
            f"{run.case}: only the ended pods left",
            lambda run=run, ended=ended: (
                {p["metadata"]["name"] for p in pods_of(cluster, run.namespace, RELEASE)} == ended
            ),
            90,
            1,
        )
        for pod in pods_of(cluster, run.namespace, RELEASE):
            log = next(log for log, name in run.pods.items() if name == pod["metadata"]["name"])
            state = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "workload")["state"]
            assert pod["status"]["phase"] == "Failed", (run.case, pod["status"])
            assert state["terminated"]["exitCode"] == run.truth["exit_codes"][log], (run.case, state)
    yield {run.case: run for run in runs}
    for index, run in enumerate(runs):
        nemo = Nemo(helms[index % 2], cluster, tmp / run.case)
        ok(nemo("uninstall", RELEASE, "--values", str(JOBSET_EXAMPLE), "-n", run.namespace))
        cluster.api("DELETE", f"/api/v1/namespaces/{run.namespace}")


@pytest.mark.parametrize("case", CASES)
def test_kwok_serves_each_pods_own_log_with_the_kubelets_times(real_cluster, failed_runs, case):
    """`timestamps=true` through the API server: each line with the instant the file gave it (kwok, as the
    kubelet, writes the time with 9 digits), not kwok's clock."""
    run = failed_runs[case]
    for log, text in run.texts.items():
        path = f"/api/v1/namespaces/{run.namespace}/pods/{run.pods[log]}/log?container=workload&timestamps=true"
        served = real_cluster.api("GET", path).splitlines()
        assert [line.partition(" ")[2] for line in served] == [line.partition(" ")[2] for line in text.splitlines()]
        assert [nine(at) for at in stamps("\n".join(served))] == [nine(at) for at in stamps(text)]


def nine(at: str) -> str:
    """An RFC 3339 UTC time with 9 fraction digits (the kubelet's fixed width)."""
    whole, _, fraction = at.rstrip("Z").partition(".")
    return f"{whole}.{fraction:0<9}Z"


@pytest.mark.parametrize("helm", sorted(HELMS))
@pytest.mark.parametrize("case", CASES)
def test_status_names_the_first_failing_pod_and_its_cause(real_cluster, failed_runs, tmp_path, case, helm):
    run = failed_runs[case]
    truth = run.truth["truth"]
    nemo = Nemo(helm, real_cluster, tmp_path)
    proc = nemo("status", RELEASE, "-n", run.namespace, "-o", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    release = json.loads(proc.stdout)["releases"][0]
    assert release["state"] == "Failed", release
    cause = release["diagnosis"]["cause"]
    first = run.pods[truth["file"]]
    assert (cause["pod"], cause["signature"]) == (first, truth["class"]), json.dumps(release["diagnosis"], indent=1)
    assert truth["line"] in cause["text"], cause
    # the time is the kubelet's stamp of that very line in the file (the real run's clock), not kwok's
    line = run.texts[truth["file"]].splitlines()[cause["line"] - 1]
    assert line.endswith(cause["text"]) or cause["text"] in line, (line, cause)
    assert nine(line.partition(" ")[0]).startswith(cause["at"]), (line, cause["at"])

    text = nemo("status", RELEASE, "-n", run.namespace)
    assert text.returncode == 1, text.stdout + text.stderr
    verdict = text.stdout.splitlines()[0]
    print(f"{case} ({helm}): {verdict}")
    assert verdict.startswith(f"{RELEASE} ({run.namespace}): Failed"), text.stdout
    assert f"pod {first}" in verdict and truth["class"] in verdict, text.stdout
