"""The nccl-test chart kind: generated for the profiles that describe their NCCL test (profile `ncclTest`),
renders gpu-recipes' NCCL test recipe (tests/test_corpus.py: a3ultra-nccl-tests-1 at parity) and, without a
launcher from the values, runs its own, whose summary lines are checked here on an nccl-tests output recorded on GPUs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "a3ultra" / "nccl-test"


def docs(text: str) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in YAML(typ="safe").load_all(text) if d}


def test_generated_for_every_profile():
    from helm_nemo.generate.profiles import load_profiles

    profiles = load_profiles()
    with_test = sorted(p["id"] for p in profiles.values() if p.get("ncclTest"))
    assert with_test == sorted(profiles)  # every accelerator has its NCCL test
    assert sorted(p.parent.name for p in (ROOT / "charts").glob("*/nccl-test")) == with_test
    assert 'version: "1.3.0"' in (CHART / "Chart.yaml").read_text()
    assert (CHART / "values.schema.json").is_file() and (CHART / "README.md").is_file()


def pod_of(rendered: dict[tuple[str, str], dict]) -> dict:
    for (kind, _), d in rendered.items():
        if kind == "Job":
            return d["spec"]["template"]
        if kind == "JobSet":
            return d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    raise AssertionError("no Job or JobSet")


PLACEMENT = ("nodeSelector", "affinity", "tolerations", "hostNetwork", "hostIPC", "resourceClaims")


@pytest.mark.parametrize("accelerator", sorted(p.parent.name for p in (ROOT / "charts").glob("*/nccl-test")))
def test_pods_are_placed_like_the_recipe_pods(helm, accelerator):
    """Same nodes, networks and claims as the jobset chart's pods (the shared pieces), with the same values."""
    import yaml

    gpn = yaml.safe_load((ROOT / "values/accelerators" / f"{accelerator}.yaml").read_text())["gpusPerNode"]
    sets = ["--set", f"workload.gpus={2 * gpn}", "--set", "targetNodepools={pool-a}", "--set", "avoidNodes={bad-1}"]
    test = pod_of(docs(helm.template("t", ROOT / "charts" / accelerator / "nccl-test", *sets).stdout))
    job = pod_of(
        docs(helm.template("t", ROOT / "charts" / accelerator / "jobset", *sets, "--set", "workload.image=x").stdout)
    )
    for key in PLACEMENT:
        assert test["spec"].get(key) == job["spec"].get(key), key
    for key in ("networking.gke.io/interfaces", "networking.gke.io/default-interface"):
        assert test["metadata"]["annotations"].get(key) == job["metadata"]["annotations"].get(key), key
    work = {c["name"]: c for c in test["spec"]["containers"]}["workload"]
    recipe = {c["name"]: c for c in job["spec"]["containers"]}["workload"]
    assert work["resources"] == recipe["resources"]  # GPUs, EFA devices, hugepages, DRA claims
    assert [c["name"] for c in test["spec"].get("initContainers", [])] == [
        c["name"] for c in job["spec"].get("initContainers", [])
    ]  # the TCPX/TCPXO daemon and plugin installer as the recipe's pods have them


def test_images_without_a_key_get_one_secret_that_every_pod_trusts(helm):
    out = docs(helm.template("t", ROOT / "charts/p5/nccl-test", "--set", "workload.gpus=16").stdout)
    secret = out[("Secret", "t-ssh")]
    import base64

    assert base64.b64decode(secret["data"]["id_rsa"]).startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    pod = out[("Job", "t")]["spec"]["template"]["spec"]
    assert {"name": "ssh-key", "secret": {"secretName": "t-ssh", "defaultMode": 0o400}} in pod["volumes"]
    (w,) = pod["containers"]
    assert w["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32
    launcher = out[("ConfigMap", "t-launcher")]["data"]["launch-workload.sh"]
    assert "ssh-keygen -y -f /root/.ssh/id_rsa > /root/.ssh/authorized_keys" in launcher
    assert "/usr/sbin/sshd -p 2222" in launcher and "/opt/nccl-tests/build/${benchmark}_perf" in launcher
    # Images that carry their own key (the Google NCCL images) get no Secret.
    assert not [k for k in docs(helm.template("t", CHART).stdout) if k[0] == "Secret"]


def test_the_launcher_keeps_the_exit_status_and_logs_the_transport(helm, tmp_path):
    """Run the launcher's rank-0 path with stand-ins for sshd/ssh/mpirun (programs on PATH that record their
    arguments and exit 3): the pod's status is the test's, NCCL logs at INFO, all_reduce forces Ring."""
    launcher = docs(helm.template("t", ROOT / "charts/a4x/nccl-test", "--set", "workload.gpus=12").stdout)[
        ("ConfigMap", "t-launcher")
    ]["data"]["launch-workload.sh"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {
        "service": "exit 0",
        "ssh": "exit 0",
        "mpirun": 'echo "$@" >> "$CALLS"; env | grep -E "^NCCL_(DEBUG|ALGO)" | sort >> "$CALLS"; '
        'case "$*" in *touch*) exit 0 ;; esac; exit 3',
    }.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "CALLS": str(calls),
        "NNODES": "3",
        "GPUS_PER_NODE": "4",
        "HOSTNAME_PREFIX": "t-",
        "DOMAIN_NAME": "t.ns.svc",
        "JOB_IDENTIFIER": "t-1",
        "JOB_COMPLETION_INDEX": "0",
        "LOG_DIR": str(tmp_path / "logs"),
        "NCCL_DEBUG": "VERSION",
        "FI_PROVIDER": "efa",
    }
    script = tmp_path / "launch.sh"
    script.write_text(launcher)
    run = subprocess.run(["bash", str(script), "--benchmark", "all_reduce"], env=env, capture_output=True, text=True)
    assert run.returncode == 3, run.stdout + run.stderr  # nccl-tests' status, through the tee
    recorded = calls.read_text()
    assert "-np 12 --hostfile /tmp/hostfile-gpus" in recorded  # 3 nodes x 4 GPUs
    assert "-x FI_PROVIDER" in recorded and "-x NCCL_DEBUG" in recorded
    assert "NCCL_ALGO=Ring\nNCCL_DEBUG=INFO\nNCCL_DEBUG_SUBSYS=INIT,ENV,NET" in recorded
    assert "nccl-test: exit status 3" in run.stdout


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


def test_a_published_launcher_is_recognised_by_its_digest_and_replaced(helm, tmp_path):
    """gpu-recipes' src/launchers/nccl-test.sh is listed by its sha256 (its text is not copied here: the full
    corpus run checks that digest against the real file). The mechanism, with a stand-in launcher listed the
    same way in a copy of the chart: that text is replaced by the chart's launcher and the notes say so; the
    same text with one byte changed runs as given."""
    import hashlib
    import shutil

    import yaml

    listed = (CHART / "files" / "published-launchers.yaml").read_text()
    (entry,) = yaml.safe_load(listed)
    assert "gpu-recipes/blob/" in entry["source"] and len(entry["fixes"]) == 3
    assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    stand_in = tmp_path / "nccl-test.sh"
    stand_in.write_text("#!/bin/bash\nset -x\nmpirun all_gather_perf | tee log\n")
    digest = hashlib.sha256(stand_in.read_bytes()).hexdigest()
    (chart / "files" / "published-launchers.yaml").write_text(
        listed + f"- sha256: {digest}\n  source: a stand-in\n  fixes: [the exit status]\n"
    )
    own = (CHART / "files" / "nccl-test.sh").read_text()
    out = docs(helm.template("t", chart, "--set-file", f"workload_launcher={stand_in}").stdout)
    assert out[("ConfigMap", "t-launcher")]["data"]["launch-workload.sh"] == own
    notes = _notes(helm, chart, stand_in)
    assert notes is None or f"workload_launcher is the published launcher a stand-in\n(sha256 {digest})" in notes
    assert notes is None or "  - the exit status" in notes
    stand_in.write_text(stand_in.read_text() + " ")
    out = docs(helm.template("t", chart, "--set-file", f"workload_launcher={stand_in}").stdout)
    assert out[("ConfigMap", "t-launcher")]["data"]["launch-workload.sh"].startswith("#!/bin/bash\nset -x\n")
    notes = _notes(helm, chart, stand_in)
    assert notes is None or "published launcher" not in notes


def _notes(helm, chart: Path, launcher: Path) -> str | None:
    """The release notes of an install dry run; Helm 3's dry run needs a cluster (None: not shown)."""
    if helm.name == "helm3":
        return None
    return helm.run("install", "t", str(chart), "--dry-run", "--set-file", f"workload_launcher={launcher}").stdout


@pytest.mark.parametrize("accelerator, ring", [("a3ultra", True), ("a3high", True), ("g4", False), ("p5", False)])
def test_all_reduce_runs_with_the_algorithm_of_the_profile_floors(helm, accelerator, ring):
    """Ring where the profile's all_reduce floors are Ring figures (or it has none: 2 nodes then measure the
    network), NCCL's own choice where they were published for it (G4's single-node gate, AICR's gates)."""
    launcher = docs(helm.template("t", ROOT / "charts" / accelerator / "nccl-test").stdout)[
        ("ConfigMap", "t-launcher")
    ]["data"]["launch-workload.sh"]
    assert ("export NCCL_ALGO=Ring" in launcher) == ring


def test_a_profile_whose_all_reduce_floor_the_launcher_cannot_meet_does_not_load(tmp_path):
    from helm_nemo.generate.profiles import ProfileError, load_profile

    text = (ROOT / "values/accelerators/g4.yaml").read_text().replace("allReduceAlgo: any", "allReduceAlgo: Ring")
    (tmp_path / "g4.yaml").write_text(text)
    with pytest.raises(ProfileError, match=r"floors\[0\]: an all_reduce floor for algo 'any'.*allReduceAlgo 'Ring'"):
        load_profile(tmp_path / "g4.yaml")


# Recorded on two H100s (tests/fixtures/nccl/gpu/README.md): all_reduce 8 B-2 GiB with NCCL's INFO lines among
# the table's, as the chart's launcher logs it.
RECORDED = ROOT / "tests/fixtures/nccl/gpu/all_reduce_nvlink_info.log"


def test_the_launcher_prints_bus_bandwidth_per_message_size(helm):
    launcher = docs(helm.template("t", CHART).stdout)[("ConfigMap", "t-launcher")]["data"]["launch-workload.sh"]
    program = re.search(r"awk '(.*?)' \"\$log\"", launcher, re.S).group(1)
    got = subprocess.run(["awk", program, str(RECORDED)], capture_output=True, text=True, check=True)
    lines = got.stdout.splitlines()
    assert len(lines) == 29 + 1  # 8 B to 2 GiB by factor 2, then the average; no NCCL INFO line among them
    assert lines[0] == "nccl-test: size=8 busbw=0.00 busbw_inplace=0.00"
    assert lines[-3:] == [
        "nccl-test: size=1073741824 busbw=326.01 busbw_inplace=330.14",
        "nccl-test: size=2147483648 busbw=340.11 busbw_inplace=341.58",
        "nccl-test: avg_busbw=94.0476",
    ]
    subprocess.run(["bash", "-n", "-c", launcher], check=True)  # the script parses
