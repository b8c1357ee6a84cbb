"""`helm nemo upgrade` as a real cluster takes it (issue 26): a running training workload cannot change its pods
(tests/kube_emulator.py refuses what the API server and the JobSet webhook refuse), so the upgrade decides per
release before the first helm call: in place, or a new workload (stop and say why; --recreate as the same run;
--new-run). Real Helm 3 and 4 against the emulator."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from test_install_emulated import RECIPE, RECIPE_RELEASES, _cluster_env, ok, run
from helm_nemo.diff.admission import refusals

ROOT = Path(__file__).resolve().parent.parent
NS = ["-n", "ml-team"]
WORKLOAD = "llama31-405b"
EPOCH_INSTALL, EPOCH_LATER = "1767225600", "1767312000"  # 2026-01-01 and 2026-01-02, 00:00 UTC
WRITES = ("POST", "PUT", "PATCH", "DELETE")


@pytest.fixture
def env(helm, kube, tmp_path) -> dict[str, str]:
    """helm's isolated homes + KUBECONFIG of this test's emulator + the recipe's variables + HELM_BIN."""
    return {**_cluster_env(helm.env, kube, tmp_path), "HELM_BIN": str(helm.binary)}


def nemo(args: list[str], env: dict[str, str], epoch: str = EPOCH_INSTALL):
    """python -m helm_nemo; install and upgrade with --no-preflight: the emulator here is an empty API server (no
    nodes, no queue) the recipe could not run on, and these tests are about what the upgrade sends (the checks
    are tests/test_preflight.py's)."""
    if args[:1] in (["install"], ["upgrade"]):
        args = [args[0], "--no-preflight", *args[1:]]
    return run([sys.executable, "-m", "helm_nemo", *args], {**env, "SOURCE_DATE_EPOCH": epoch})


def recipe_with(tmp_path: Path, old: str, new: str) -> Path:
    """The seed-001 recipe (copied with the examples it reads files from) with `old` replaced by `new`."""
    examples = tmp_path / "examples"
    if not examples.exists():
        shutil.copytree(RECIPE.parent, examples)
    changed = examples / RECIPE.name
    text = changed.read_text()
    assert old in text, old
    changed.write_text(text.replace(old, new))
    return changed


def image_of(kube) -> str:
    jobset = kube.get("JobSet", WORKLOAD, "ml-team")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return next(c["image"] for c in pod["containers"] if c["name"] == "workload" or "nemo" in c["image"])


def job_timestamp(kube) -> str:
    jobset = kube.get("JobSet", WORKLOAD, "ml-team")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (value,) = [e["value"] for c in pod["containers"] for e in c.get("env", []) if e["name"] == "JOB_TIMESTAMP"]
    return value


def history(env, release: str, helm) -> list[tuple[int, str]]:
    proc = ok(run([str(helm.binary), "history", release, *NS, "-o", "json"], env))
    return [(entry["revision"], entry["status"]) for entry in json.loads(proc.stdout)]


@pytest.fixture
def installed(helm, kube, env):
    ok(nemo(["install", "--values", str(RECIPE), *NS], env))
    return job_timestamp(kube)


def _image_line() -> str:
    line = next(line for line in RECIPE.read_text().splitlines() if re.match(r"\s+image:", line))
    return line


def test_a_new_image_stops_before_anything_is_sent_and_says_why(helm, kube, env, installed, tmp_path):
    line = _image_line()
    changed = recipe_with(tmp_path, line, line.rstrip() + "-new")
    before = len(kube.requests)
    proc = nemo(["upgrade", "--values", str(changed), *NS], env, EPOCH_LATER)
    assert proc.returncode == 2, proc.stderr
    assert [r for r in kube.requests[before:] if r.method in WRITES] == []
    err = proc.stderr
    assert f"helm nemo: the upgrade needs a new workload for {WORKLOAD}; nothing was changed." in err
    assert (
        f"  {WORKLOAD}: JobSet {WORKLOAD}: JobSet.spec.replicatedJobs is immutable while it is not suspended: "
        "the JobSet admission webhook and CRD rules"
    ) in err
    assert re.search(
        r"\.spec\.replicatedJobs\[workload\]\.template\.spec\.template\.spec\.containers\[[^]]+\]\.image: "
        r"changed '.*' -> '.*-new'",
        err,
    ), err
    assert f"--recreate   uninstall and install again as the same run ({installed}:" in err
    assert "--new-run    the same, as a new run" in err
    assert f"  {RECIPE_RELEASES[0]}, {RECIPE_RELEASES[1]}: upgraded in place either way" in err
    assert "Traceback" not in err
    assert image_of(kube) == line.split("image:")[1].strip().strip("'\"")


def test_recreate_installs_the_same_run_again_and_upgrades_the_rest_in_place(helm, kube, env, installed, tmp_path):
    line = _image_line()
    changed = recipe_with(tmp_path, line, line.rstrip() + "-new")
    proc = ok(nemo(["upgrade", "--values", str(changed), *NS, "--recreate"], env, EPOCH_LATER))
    assert (
        f"[3/3] recreate {WORKLOAD} (" in proc.stderr and f"as run {installed}: uninstall, then install" in proc.stderr
    )
    assert image_of(kube).endswith("-new")
    assert job_timestamp(kube) == installed  # same run: JOB_IDENTIFIER and directories unchanged
    assert history(env, WORKLOAD, helm) == [(1, "superseded"), (2, "deployed")]  # uninstalled, then installed
    for release in RECIPE_RELEASES[:2]:
        assert history(env, release, helm) == [(1, "superseded"), (2, "deployed")]
    uninstall = [r for r in kube.requests if r.method == "DELETE" and r.path.endswith(f"/jobsets/{WORKLOAD}")]
    assert len(uninstall) == 1
    assert (RECIPE_RELEASES[0], RECIPE_RELEASES[1]) and not [
        r for r in kube.requests if r.method == "DELETE" and "supervisor" in r.path.split("/")[-1]
    ]


class Lingering:
    """The JobSet is still there after helm's uninstall has returned (its release recorded uninstalled: the PUT
    of the release Secret after the DELETE) for the next `reads` GETs of it, then gone: what Helm 4's
    `uninstall --wait --cascade foreground` once left on the real control plane."""

    PATH = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml-team/jobsets/{WORKLOAD}"

    def __init__(self, kube, reads: float):
        self.kube, self.limit, self.reads, self.copy, self.armed = kube, reads, 0, None, False
        kube.before_serve.append(self)

    def __call__(self, request) -> None:
        if request.method == "DELETE" and request.path == self.PATH:
            self.copy = self.kube.get("JobSet", WORKLOAD, "ml-team")
        elif self.copy and request.method == "PUT" and f"/secrets/sh.helm.release.v1.{WORKLOAD}." in request.path:
            self.armed = True
        elif self.armed and request.method == "GET" and request.path == self.PATH:
            self.reads += 1
            if self.reads == 1:
                self.kube.put(
                    {**self.copy, "metadata": {**self.copy["metadata"], "deletionTimestamp": "2026-01-02T00:00:00Z"}}
                )
            elif self.reads == self.limit + 1:
                self.kube.delete(self.kube.resource("JobSet"), "ml-team", WORKLOAD)


def test_recreate_installs_only_once_the_old_jobset_is_gone(helm, kube, env, installed, tmp_path):
    line = _image_line()
    changed = recipe_with(tmp_path, line, line.rstrip() + "-new")
    lingering = Lingering(kube, reads=3)
    proc = ok(nemo(["upgrade", "--values", str(changed), *NS, "--recreate"], env, EPOCH_LATER))
    assert lingering.reads >= 4, proc.stderr  # read until gone
    assert proc.stderr.count(f"  waiting for JobSet {WORKLOAD} to be deleted before the install\n") == 1
    assert image_of(kube).endswith("-new") and job_timestamp(kube) == installed


def test_recreate_stops_when_the_old_jobset_is_not_deleted(helm, kube, env, installed, tmp_path):
    line = _image_line()
    changed = recipe_with(tmp_path, line, line.rstrip() + "-new")
    Lingering(kube, reads=float("inf"))
    proc = nemo(["upgrade", "--values", str(changed), *NS, "--recreate", "--timeout", "2s"], env, EPOCH_LATER)
    assert proc.returncode == 1, proc.stderr
    assert (
        f"helm nemo: {WORKLOAD} is uninstalled (its history keeps run {installed}) but JobSet {WORKLOAD} still "
        "exists 2s after the uninstall (being deleted?); stopped."
    ) in proc.stderr
    assert "--recreate again (a release left uninstalled is installed again as its run)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert image_of(kube) == line.split("image:")[1].strip().strip("'\"")  # the old one, never replaced


def test_new_run_gets_a_new_timestamp(helm, kube, env, installed, tmp_path):
    line = _image_line()
    changed = recipe_with(tmp_path, line, line.rstrip() + "-new")
    ok(nemo(["upgrade", "--values", str(changed), *NS, "--new-run"], env, EPOCH_LATER))
    assert job_timestamp(kube) == "2026-01-02-00-00-00" != installed
    assert image_of(kube).endswith("-new")


def test_a_change_the_cluster_takes_in_place_is_an_ordinary_upgrade(helm, kube, env, installed):
    proc = ok(nemo(["upgrade", "--values", str(RECIPE), *NS], {**env, "KUEUE_NAME": "queue-2"}, EPOCH_LATER))
    assert f"[3/3] upgrade {WORKLOAD} (" in proc.stderr and "in place" in proc.stderr
    assert not [r for r in kube.requests if r.method == "DELETE"]
    assert kube.get("JobSet", WORKLOAD, "ml-team")["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "queue-2"
    assert job_timestamp(kube) == installed


def test_a_suspended_jobset_changes_its_pods_scheduling_fields_in_place(helm, kube, env, installed, tmp_path):
    """The live JobSet decides (Kueue suspends a queued or preempted JobSet): suspended, a new nodeSelector is
    taken in place by the JobSet webhook, so the upgrade is in place; a new image still needs a new workload."""
    jobset = kube.get("JobSet", WORKLOAD, "ml-team")
    jobset["spec"]["suspend"] = True  # what Kueue does to a JobSet it holds
    kube.replace(kube.resource("JobSet"), "ml-team", WORKLOAD, jobset)
    changed = recipe_with(
        tmp_path,
        "      terminationGracePeriodSeconds: 3\n",
        "      terminationGracePeriodSeconds: 3\n      nodeSelector: {team: a}\n",
    )
    proc = ok(nemo(["upgrade", "--values", str(changed), *NS], env, EPOCH_LATER))
    assert f"[3/3] upgrade {WORKLOAD} (" in proc.stderr and "in place" in proc.stderr
    pod = kube.get("JobSet", WORKLOAD, "ml-team")["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["team"] == "a"
    line = _image_line()
    newer = recipe_with(tmp_path, line, line.rstrip() + "-new")
    proc = nemo(["upgrade", "--values", str(newer), *NS], env, EPOCH_LATER)
    assert proc.returncode == 2 and "even while suspended only its pods' labels" in proc.stderr, proc.stderr


def test_a_running_jobset_refuses_the_same_nodeselector_change(helm, kube, env, installed, tmp_path):
    changed = recipe_with(
        tmp_path,
        "      terminationGracePeriodSeconds: 3\n",
        "      terminationGracePeriodSeconds: 3\n      nodeSelector: {team: a}\n",
    )
    proc = nemo(["upgrade", "--values", str(changed), *NS], env, EPOCH_LATER)
    assert proc.returncode == 2 and "immutable while it is not suspended" in proc.stderr, proc.stderr


def test_a_node_count_change_needs_a_new_workload(helm, kube, env, installed, tmp_path):
    changed = recipe_with(tmp_path, "gpus: 432", "gpus: 424")
    proc = nemo(["upgrade", "--values", str(changed), *NS], env, EPOCH_LATER)
    assert proc.returncode == 2, proc.stderr
    assert re.search(
        r"\.spec\.replicatedJobs\[workload\]\.template\.spec\.parallelism: changed 54 -> 53", proc.stderr
    ), proc.stderr


def test_a_failure_during_the_recreate_says_what_is_installed_and_a_rerun_finishes(
    helm, kube, env, installed, tmp_path
):
    line = _image_line()
    changed = recipe_with(tmp_path, line, line.rstrip() + "-new")
    # Helm 3 creates with POST, Helm 4 with server-side apply (PATCH)
    fault = kube.fail_next(
        ("POST", "PATCH"), "JobSet", namespace="ml-team", status=500, message="etcdserver: request timed out"
    )
    proc = nemo(["upgrade", "--values", str(changed), *NS, "--recreate"], env, EPOCH_LATER)
    assert proc.returncode == 1 and fault.fired, proc.stderr
    assert (
        f"helm nemo: {WORKLOAD} is uninstalled (its history keeps run {installed}) and installing it again "
        "failed (helm exit 1); stopped."
    ) in proc.stderr
    assert f"  done by this run: {RECIPE_RELEASES[0]} upgraded, {RECIPE_RELEASES[1]} upgraded." in proc.stderr
    assert "--recreate again (a release left uninstalled is installed again as its run)" in proc.stderr
    assert kube.get("JobSet", WORKLOAD, "ml-team") is None
    proc = ok(nemo(["upgrade", "--values", str(changed), *NS, "--recreate"], env, EPOCH_LATER))
    assert f"[3/3] recreate {WORKLOAD} (" in proc.stderr and f"as run {installed}:" in proc.stderr
    assert job_timestamp(kube) == installed and image_of(kube).endswith("-new")


def test_recreate_and_new_run_exclude_each_other(helm, kube, env):
    proc = nemo(["upgrade", "--values", str(RECIPE), *NS, "--recreate", "--new-run"], env)
    assert proc.returncode == 2
    assert proc.stderr.startswith("helm nemo: --recreate and --new-run exclude each other\n    hint: ")
    assert [r for r in kube.requests if r.method in WRITES] == []


# ---- the rules themselves (no helm) ---------------------------------------------------------------------


def _jobset(image="a", suspend=None, labels=None):
    spec = {
        "replicatedJobs": [
            {
                "name": "workload",
                "replicas": 1,
                "template": {
                    "spec": {
                        "parallelism": 2,
                        "completions": 2,
                        "completionMode": "Indexed",
                        "template": {
                            "metadata": {"labels": labels or {}},
                            "spec": {"containers": [{"name": "w", "image": image}]},
                        },
                    }
                },
            }
        ]
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "r"}, "spec": spec}


def test_a_suspended_jobset_may_change_its_pods_scheduling_fields_only():
    old, relabelled = _jobset(labels={"a": "1"}), _jobset(labels={"a": "2"})
    assert refusals(old, relabelled)  # running (or unknown): refused
    assert refusals(old, relabelled, live=_jobset(suspend=True, labels={"a": "1"})) == []
    assert refusals(old, _jobset(image="b"), live=_jobset(suspend=True))  # the image: never
    assert refusals(old, _jobset(suspend=True, labels={"a": "2"})) == []  # this upgrade suspends it


def test_job_rules_follow_the_api_server():
    def job(image="a", completions=1, parallelism=1, mode=None, suspend=None):
        spec = {
            "completions": completions,
            "parallelism": parallelism,
            "template": {"spec": {"containers": [{"name": "w", "image": image}]}},
        }
        if mode:
            spec["completionMode"] = mode
        if suspend is not None:
            spec["suspend"] = suspend
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec}

    assert [r.path for r in refusals(job(), job(image="b"))] == ["spec.template"]
    assert refusals(job(), job(parallelism=3)) == []  # parallelism may change
    assert [r.path for r in refusals(job(), job(completions=3, parallelism=3))] == ["spec.completions"]
    assert refusals(job(mode="Indexed"), job(mode="Indexed", completions=3, parallelism=3)) == []  # in tandem
    assert [r.path for r in refusals(job(mode="Indexed"), job(mode="Indexed", completions=3))] == ["spec.completions"]
    never_started = job(suspend=True)
    assert [r.path for r in refusals(job(), job(image="b"), live=never_started)] == ["spec.template"]
    started = {**job(suspend=True), "status": {"startTime": "2026-01-01T00:00:00Z"}}
    assert refusals(job(), job(image="b"), live=started)


def test_a_release_left_uninstalled_by_a_stopped_recreate_is_installed_again_as_its_run(
    helm, kube, env, installed, tmp_path
):
    """The state a recreate leaves when it is stopped between its uninstall and its install."""
    ok(run([str(helm.binary), "uninstall", WORKLOAD, *NS, "--keep-history", "--wait"], env))
    assert kube.get("JobSet", WORKLOAD, "ml-team") is None
    line = _image_line()
    changed = recipe_with(tmp_path, line, line.rstrip() + "-new")
    proc = ok(nemo(["upgrade", "--values", str(changed), *NS], env, EPOCH_LATER))
    assert (
        f"[3/3] install {WORKLOAD} ({ROOT}/charts/a3ultra/jobset) again as run {installed} (its uninstall "
        "finished in an earlier run)"
    ) in proc.stderr
    assert job_timestamp(kube) == installed and image_of(kube).endswith("-new")
    assert history(env, WORKLOAD, helm) == [(1, "superseded"), (2, "deployed")]


# ---- nemo-training: an Indexed Job, refused by the API server itself -------------------------------------

NEMO_TRAINING = RECIPE.parent / "a3high-gpt-5b.yaml"


def _nemo_training_copy(tmp_path: Path, old: str | None = None, new: str | None = None) -> Path:
    examples = tmp_path / "examples"
    if not examples.exists():
        shutil.copytree(RECIPE.parent, examples)
    path = examples / NEMO_TRAINING.name
    if old is not None and new is not None:
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new))
    return path


def _job_identifier(kube) -> str:
    pod = kube.get("Job", "gpt-5b", "ml-team")["spec"]["template"]["spec"]
    return next(e["value"] for c in pod["containers"] for e in c.get("env", []) if e["name"] == "JOB_IDENTIFIER")


def test_nemo_training_job_image_change_is_refused_then_recreated_as_the_same_run(helm, kube, env, tmp_path):
    env = {**env, "ARTIFACT_REGISTRY": "us-central1-docker.pkg.dev/p/r"}
    values = _nemo_training_copy(tmp_path)
    ok(nemo(["install", "--values", str(values), *NS], env))
    run_id = _job_identifier(kube)
    # A new image: the Job's pod template is immutable (the API server's Job validation).
    newer = _nemo_training_copy(tmp_path, "nemofw-training:23.05-py3", "nemofw-training:24.01-py3")
    proc = nemo(["upgrade", "--values", str(newer), *NS], env, EPOCH_LATER)
    assert proc.returncode == 2, proc.stderr
    assert (
        "gpt-5b: Job gpt-5b: Job.spec.template is immutable while it is not suspended: the API server (Job validation)"
        in proc.stderr
    )
    assert [r for r in kube.requests if r.method == "DELETE"] == []
    proc = ok(nemo(["upgrade", "--values", str(newer), *NS, "--recreate"], env, EPOCH_LATER))
    job = kube.get("Job", "gpt-5b", "ml-team")
    assert [c["image"] for c in job["spec"]["template"]["spec"]["containers"]][0].endswith("nemofw-training:24.01-py3")
    assert _job_identifier(kube) == run_id  # the same run: NeMo's explicit_log_dir and version are unchanged
