"""Per-run identity (issue 15, item 3): JOB_IDENTIFIER - from which launchers derive log, checkpoint and
experiment directories, NeMo's experiment version, MaxText's run_name and Nsight report paths - is new on
every install, with a plain `helm install` and with `helm nemo install`, on every accelerator; a render is
deterministic exactly when the values set the time (goldens do) or the identifier (to resume a run).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, UTC
from pathlib import Path

import pytest
import yaml

from conftest import JOB_TIMESTAMP, cluster_env

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD_CHARTS = sorted(
    p.parent for kind in ("jobset", "nemo-training") for p in (ROOT / "charts").glob(f"*/{kind}/Chart.yaml")
)
IDS = [str(c.relative_to(ROOT / "charts")) for c in WORKLOAD_CHARTS]
STAMP = re.compile(r"\d{4}(-\d\d){5}")


def workload_env(text: str) -> dict:
    for doc in yaml.safe_load_all(text):
        if not doc or doc["kind"] not in ("JobSet", "Job"):
            continue
        spec = doc["spec"]
        pod = (
            spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            if doc["kind"] == "JobSet"
            else spec["template"]["spec"]
        )
        (workload,) = [c for c in pod["containers"] if c["name"] == "workload"]
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in workload["env"]}
        env["_script"] = workload["command"][2]
        env["_init"] = {
            c["name"]: {e["name"]: e.get("value") for e in c.get("env", [])} for c in pod.get("initContainers") or []
        }
        return env
    raise AssertionError("no workload")


def args_for(chart: Path) -> list[str]:
    if chart.name == "nemo-training":
        return ["--set", "nemo_config=x: 1"]
    return []


def test_plain_helm_gives_every_render_its_own_identity(helm3):
    """Rendered twice, more than a second apart (helm install renders at install time): every chart of
    every accelerator names a new run, <release>-<time>, in JOB_IDENTIFIER and JOB_TIMESTAMP alike."""
    first = {c: workload_env(helm3.template("run", c, *args_for(c)).stdout) for c in WORKLOAD_CHARTS}
    time.sleep(1.1)
    second = {c: workload_env(helm3.template("run", c, *args_for(c)).stdout) for c in WORKLOAD_CHARTS}
    for chart in WORKLOAD_CHARTS:
        for env in (first[chart], second[chart]):
            assert STAMP.fullmatch(env["JOB_TIMESTAMP"]), chart
            assert env["JOB_IDENTIFIER"] == f"run-{env['JOB_TIMESTAMP']}", chart
        assert first[chart]["JOB_IDENTIFIER"] != second[chart]["JOB_IDENTIFIER"], chart


@pytest.mark.parametrize("chart", WORKLOAD_CHARTS, ids=IDS)
def test_the_values_make_a_render_reproducible(helm, chart):
    stamped = [*args_for(chart), "--set", f"workload.jobTimestamp={JOB_TIMESTAMP}"]
    out = helm.template("run", chart, *stamped).stdout
    assert out == helm.template("run", chart, *stamped).stdout
    env = workload_env(out)
    assert (env["JOB_TIMESTAMP"], env["JOB_IDENTIFIER"]) == (JOB_TIMESTAMP, f"run-{JOB_TIMESTAMP}")
    # An earlier run's identifier resumes its directories; the time stays this install's.
    env = workload_env(
        helm.template("run", chart, *stamped, "--set", "workload.jobIdentifier=run-2025-12-31-23-59-59").stdout
    )
    assert (env["JOB_TIMESTAMP"], env["JOB_IDENTIFIER"]) == (JOB_TIMESTAMP, "run-2025-12-31-23-59-59")


def test_what_the_charts_derive_from_the_identity(helm3):
    """nemo-training builds the experiment's log dir, NeMo's exp_manager.version, the rendezvous id and the
    Nsight report folder from $JOB_IDENTIFIER; the checkpoint cleaners get the same identifier."""
    env = workload_env(
        helm3.template(
            "run",
            ROOT / "charts/a4/nemo-training",
            "--set",
            "nemo_config=x: 1",
            "--set",
            "workload.profile.enabled=true",
        ).stdout
    )
    script = env["_script"]
    assert 'explicit_log_dir="${EXPERIMENT_ROOT_DIR}/${EXPERIMENT_NAME}/${JOB_IDENTIFIER}"' in script
    assert '++exp_manager.version="$JOB_IDENTIFIER"' in script and '--rdzv_id="${JOB_IDENTIFIER}"' in script
    assert 'nsys_output_dir="${NSYS_OUTPUT_DIR:-${explicit_log_dir}}"' in script
    for extra in (
        ["--set", "workload.enable_local_ckpt=true", "--set", "volumes.ssdMountPath=/ssd"],
        ["--set", "workload.enable_ckpt_cleaner=true", "--set", "workload.local_ckpt_dir=/ssd/ckpt"],
    ):
        env = workload_env(helm3.template("run", ROOT / "charts/a3ultra/jobset", *extra).stdout)
        assert env["_init"]["ckpt-cleaner"]["JOB_IDENTIFIER"] == env["JOB_IDENTIFIER"]


def test_helm_nemo_stamps_install_and_template_with_the_time(monkeypatch):
    """`helm nemo install` (and template, which shows what install would send) stamps the time into
    workload.jobTimestamp of every workload chart; SOURCE_DATE_EPOCH fixes the clock."""
    from helm_nemo.actions.releases import render_time, stamp_job_time
    from helm_nemo.values.plan import build_plans

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    before = datetime.now(UTC).replace(microsecond=0)
    assert before <= render_time()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert render_time() == datetime(2026, 1, 1, tzinfo=UTC)
    for chart in WORKLOAD_CHARTS:
        values = {"workload": {"gpus": 1, "image": "i:1"}}
        path = Path(f"/tmp/identity-{chart.parent.name}-{chart.name}.yaml")
        path.write_text(yaml.safe_dump(values))
        (plan,) = build_plans(path, {}, release="run", chart=str(chart))
        stamp_job_time(plan, datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))
        assert plan.values["workload"]["jobTimestamp"] == "2026-03-04-05-06-07", chart
        plan.values["workload"]["jobTimestamp"] = "2026-01-01-00-00-00"
        stamp_job_time(plan)  # a time the user set is kept
        assert plan.values["workload"]["jobTimestamp"] == "2026-01-01-00-00-00"


def test_helm_nemo_install_twice_is_two_runs(helm, kube, tmp_path):
    """The real plugin path against the API emulator: install, uninstall, install the same release again -
    the second run has its own JOB_IDENTIFIER (it neither writes into nor resumes from the first's)."""
    import subprocess
    import sys

    values = tmp_path / "v.yaml"
    values.write_text("accelerator: a4\nchart: jobset\nworkload: {gpus: 8, image: 'nvcr.io/nvidia/nemo:25.07'}\n")
    env = {**cluster_env(helm.env, kube, tmp_path, drop=("SOURCE_DATE_EPOCH",)), "HELM_BIN": str(helm.binary)}
    identities = []
    for attempt in range(2):
        if attempt:
            time.sleep(1.1)
        for verb in (["install", "--no-preflight"], ["uninstall"]):  # no nodes here: the checks would fail
            proc = subprocess.run(
                [sys.executable, "-m", "helm_nemo", *verb, "run", "--values", str(values), "-n", "t"],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr
            if verb[0] == "install":
                jobset = kube.get("JobSet", "run", "t")
                pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
                env_ = {e["name"]: e.get("value") for e in pod["containers"][-1]["env"]}
                identities.append((env_["JOB_IDENTIFIER"], env_["JOB_TIMESTAMP"]))
    (first, t1), (second, t2) = identities
    assert first == f"run-{t1}" and second == f"run-{t2}" and first != second
