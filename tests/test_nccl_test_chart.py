"""The nccl-test chart kind: generated for the profiles that describe their NCCL test (profile `ncclTest`),
renders gpu-recipes' NCCL test recipe (tests/test_corpus.py: a3ultra-nccl-tests-1 at parity) and, without a
launcher from the values, runs its own, whose summary lines are checked here on an nccl-tests output."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "a3ultra" / "nccl-test"


def docs(text: str) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in YAML(typ="safe").load_all(text) if d}


def test_generated_only_for_profiles_with_an_nccl_test():
    from helm_nemo.generate.profiles import load_profiles

    with_test = sorted(p["id"] for p in load_profiles().values() if p.get("ncclTest"))
    assert with_test == ["a3ultra"]
    assert sorted(p.parent.name for p in (ROOT / "charts").glob("*/nccl-test")) == with_test
    assert 'version: "1.0.0"' in (CHART / "Chart.yaml").read_text()
    assert (CHART / "values.schema.json").is_file() and (CHART / "README.md").is_file()


def test_indexed_job_with_the_profile_network_and_own_launcher(helm):
    out = docs(helm.template("t", CHART, "--set", "workload.gpus=16").stdout)
    job = out[("Job", "t")]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["parallelism"] == 2
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == "t" and out[("Service", "t")]["spec"]["selector"] == {"job-name": "t"}
    (w,) = pod["containers"]
    assert w["image"].startswith("us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:")
    assert w["resources"]["limits"]["nvidia.com/gpu"] == 8
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert "rdma-7" in annotations["networking.gke.io/interfaces"]  # the A3 Ultra RDMA NICs, from the profile
    launcher = out[("ConfigMap", "t-launcher")]["data"]["launch-workload.sh"]
    assert "/third_party/nccl-tests/build/${benchmark}_perf" in launcher and '-p "$port"' in launcher
    # A launcher from the values (the recipe's --set-file) replaces it.
    own = docs(helm.template("t", CHART, "--set", "workload_launcher=echo mine").stdout)
    assert own[("ConfigMap", "t-launcher")]["data"]["launch-workload.sh"].strip() == "echo mine"


NCCL_TESTS_OUTPUT = """\
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    101.2   10.36   19.42      0    100.9   10.39   19.48      0
     2097152        524288     float     sum      -1    150.0   13.98   26.21      0    149.1   14.07   26.38      0
     4194304       1048576     float     sum      -1    240.5   17.44   32.70      0    239.8   17.49   32.79      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 26.163
"""


def test_the_launcher_prints_bus_bandwidth_per_message_size(helm, tmp_path):
    launcher = docs(helm.template("t", CHART).stdout)[("ConfigMap", "t-launcher")]["data"]["launch-workload.sh"]
    program = re.search(r"awk '(.*?)' \"\$log\"", launcher, re.S).group(1)
    log = tmp_path / "nccl.log"
    log.write_text(NCCL_TESTS_OUTPUT)
    got = subprocess.run(["awk", program, str(log)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert got == [
        "nccl-test: size=1048576 busbw=19.42 busbw_inplace=19.48",
        "nccl-test: size=2097152 busbw=26.21 busbw_inplace=26.38",
        "nccl-test: size=4194304 busbw=32.70 busbw_inplace=32.79",
        "nccl-test: avg_busbw=26.163",
    ]
    subprocess.run(["bash", "-n", "-c", launcher], check=True)  # the script parses
