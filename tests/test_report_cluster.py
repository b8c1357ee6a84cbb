"""`helm nemo report RELEASE` on the real control plane (tests/real_cluster.py), opened in headless Chromium.

The real 2-node hang of tests/logs/real/gpu/hang is installed through the jobset chart (`helm nemo install`), its two
pods run by kwok on A3 High nodes, each pod's own real log served by kwok (the kubelet's times kept), and each pod
ended as the case's `exit_codes` and `jobset` timeline say (as tests/test_real_cluster_diagnosis.py does for six
cases). The page must name node 0's pod and nccl-timeout as the first cause, mark the 90 s stall, hold both pods on
its timeline with their exit codes and Kueue's admission, and pass every check of tests/test_report_browser.py at
both sizes.
"""

from __future__ import annotations

import os

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
from test_real_cluster_diagnosis import GPU_CASES, INDEX, RELEASE, finished_at, stamps
from test_report_browser import SIZES, Browser, artifacts, browser_binary, check_page

pytestmark = pytest.mark.cluster
CASE = "hang"


@pytest.fixture(scope="module")
def hang_run(real_cluster, tmp_path_factory):
    cluster = real_cluster
    tmp = tmp_path_factory.mktemp("report-cluster")
    ensure_nodes(cluster, "a3high", 2)
    namespace = new_namespace(cluster, "report-hang")
    kueue_queue(cluster, namespace, gpus=16)
    helm = sorted(HELMS)[-1]
    nemo = Nemo(helm, cluster, tmp)
    keep = overlay(tmp, "keep-running", {"workload": {"labels": {KEEP_RUNNING_LABEL: "true"}}})
    ok(nemo("install", RELEASE, "--values", str(JOBSET_EXAMPLE), "--values", str(keep), "-n", namespace))
    meta = yaml.safe_load((GPU_CASES / CASE / "case.yaml").read_text())
    texts = {log: (GPU_CASES / CASE / log).read_text() for log in meta["exit_codes"]}

    def running() -> dict[int, str]:
        pods = pods_of(cluster, namespace, RELEASE)
        if len(pods) != 2 or any(p["status"].get("phase") != "Running" for p in pods):
            return {}
        return {int(p["metadata"]["annotations"][INDEX]): p["metadata"]["name"] for p in pods}

    by_index = cluster.wait_for("both pods Running", running, 120, 1)
    names = {f"node-{index}.log": name for index, name in by_index.items()}
    for log, text in texts.items():
        served = tmp / f"{log}.cri"
        served.write_text(cri_log(text))
        cluster.serve_pod_log(namespace, names[log], served, container="workload")
    for log, text in texts.items():
        path = f"/api/v1/namespaces/{namespace}/pods/{names[log]}/log?container=workload&tailLines=1"
        last = text.splitlines()[-1].partition(" ")[2]
        cluster.wait_for(f"kwok serves {log}", lambda p=path, w=last: cluster.api("GET", p) == w + "\n")
    with cluster.paused("kube-controller-manager"):
        for at, log in sorted((finished_at(meta, log, text), log) for log, text in texts.items()):
            started = stamps(texts[log])[0][:19] + "Z"
            cluster.end_pod(namespace, names[log], meta["exit_codes"][log], at, started_at=started)
    jobset = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{RELEASE}"
    cluster.wait_for(
        "the JobSet Failed", lambda: (condition(cluster.get(jobset), "Failed") or {}).get("status") == "True", 90, 1
    )
    yield nemo, namespace, names, meta
    ok(nemo("uninstall", RELEASE, "--values", str(JOBSET_EXAMPLE), "-n", namespace))
    cluster.api("DELETE", f"/api/v1/namespaces/{namespace}")


def test_report_of_a_failed_release_on_the_real_control_plane(hang_run, tmp_path):
    nemo, namespace, names, meta = hang_run
    out = tmp_path / "report.html"
    proc = nemo("report", RELEASE, "-n", namespace, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    first = names[meta["truth"]["file"]]
    assert f"FAILED: nccl-timeout in {first}" in proc.stderr, proc.stderr
    page = out.read_text()
    assert "Kueue admitted" in page and f'data-pod="{names["node-1.log"]}"' in page
    assert "exit 137" in page and "exit 1" in page  # node 1 SIGKILLed by the set's teardown, node 0 exit 1

    from helm_nemo.kube import connect
    from helm_nemo.report.gather import from_cluster

    env = dict(os.environ)
    os.environ["KUBECONFIG"] = nemo.env["KUBECONFIG"]
    try:
        report = from_cluster(connect([], namespace=namespace), RELEASE)
    finally:
        os.environ.clear()
        os.environ.update(env)
    assert [(s.step, s.after, round(s.seconds)) for s in report.stalls] == [(29, 30, 90)]
    binary = browser_binary()
    if binary is None:
        pytest.skip("no chromium: the page was made and checked as text; the browser checks need Debian's chromium")
    chrome = Browser(binary)
    try:
        for size in sorted(SIZES):
            check_page(chrome, out, report, size, artifacts(tmp_path), "cluster-hang")
    finally:
        chrome.close()
