"""A recipe's stages (docs/data-prep.md, "Recipe keys"): `after:` / `dataFrom:` checked with file:line:col,
the training's data argument derived from the data-prep release's shards, and `helm nemo install` waiting for
the data-prep Job between the releases, against the loopback emulator with Helm 3 and 4.

The recipes use the shipped data-prep chart (charts/data-prep: ConfigMap R-data-prep and an Indexed Job R
labelled helm-nemo.dev/data-prep=R); the emulator runs its Job's indexes as a test says."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import cluster_env

ROOT = Path(__file__).resolve().parent.parent
NS = "ml"
PREFIXES = ",".join(f"1.0,/fsx/data/pile/0{n}_text_document" for n in range(6))

FSX = """\
  - release: fsx
    chart: fsx-lustre
    values:
      fileSystems:
        - name: fsx
          fileSystemId: fs-0123456789abcdef0
          dnsName: fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com
          mountName: abcdefgh
          capacity: 1200Gi
"""
PILE = """\
  - release: pile
    chart: data-prep
    after: fsx
    values:
      workers: 2
      volumes:
        pvcMounts:
          - claimName: fsx-pvc
            mountPath: /fsx
      retries: {podRetries: 0}
      shards:
        urlPattern: https://example.com/train/{index}.jsonl.zst
        numbers: "0-5"
      output:
        path: /fsx/data/pile
"""
TRAINING = """\
  - release: gpt3-5b
    chart: nemo-training
    accelerator: p4de
    dataFrom: pile
    values:
      files:
        nemo_config: configs/gpt-5b.yaml
      volumes:
        pvcMounts:
          - claimName: fsx-pvc
            mountPath: /fsx
      workload:
        gpus: 16
        image: nvcr.io/nvidia/nemo:24.01.framework
        torchDistributedTarget: /opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py
        experimentRootDir: /fsx/results
        experimentName: gpt3-5b
        arguments:
          - trainer.max_steps=100
"""


def recipe(folder: Path, text: str = FSX + PILE + TRAINING) -> Path:
    """A recipe in `folder`, beside the example's NeMo config."""
    if not (folder / "configs").exists():
        shutil.copytree(ROOT / "values/examples/configs", folder / "configs")
    path = folder / "recipe.yaml"
    path.write_text("recipe: pile-then-train\nreleases:\n" + text)
    return path


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


# --------------------------------------------------------------------------------------------------
# The keys (no helm)


def plans_of(path: Path):
    from helm_nemo.values.plan import build_plans

    return build_plans(path)


def problems_of(path: Path) -> list[str]:
    from helm_nemo.user_errors import UserError

    with pytest.raises(UserError) as caught:
        plans_of(path)
    return [problem.format() for problem in caught.value.problems]


def test_data_from_appends_the_prefix_argument(tmp_path):
    plans = plans_of(recipe(tmp_path))
    assert [(p.release, p.after, p.data_from) for p in plans] == [
        ("fsx", [], None),
        ("pile", ["fsx"], None),
        ("gpt3-5b", ["pile"], "pile"),
    ]
    assert plans[2].values["workload"]["arguments"] == [
        "trainer.max_steps=100",
        f"model.data.data_prefix=[{PREFIXES}]",
    ]
    assert "arguments" not in plans[1].values.get("workload", {})


def test_after_list_and_data_from_together(tmp_path):
    text = FSX + PILE + TRAINING.replace("    dataFrom: pile\n", "    dataFrom: pile\n    after: [fsx, pile]\n")
    plans = plans_of(recipe(tmp_path, text))
    assert plans[2].after == ["fsx", "pile"] and plans[2].data_from == "pile"


@pytest.mark.parametrize(
    ("change", "needle", "message"),
    [
        (("    after: fsx\n", "    after: nope\n"), "after: nope", "no release 'nope' in this recipe"),
        (("    after: fsx\n", "    after: [fsx, gpt3-5b]\n"), "after: [fsx", "release 'gpt3-5b' comes later"),
        (("    after: fsx\n", "    after: pile\n"), "after: pile", "release 'pile' cannot wait for itself"),
        (("    after: fsx\n", "    after: []\n"), "after: []", "`after` is an empty list"),
        (("    after: fsx\n", "    after: [3]\n"), "after: [3]", "is not a release name"),
        (("    dataFrom: pile\n", "    dataFrom: fsx\n"), "dataFrom: fsx", "is a fsx-lustre release, not a data-prep"),
    ],
)
def test_bad_stage_keys_say_where(tmp_path, change, needle, message):
    path = recipe(tmp_path, (FSX + PILE + TRAINING).replace(*change))
    found = problems_of(path)
    assert len(found) == 1, found
    assert found[0].startswith(f"{path}:{line_of(path, needle)}:"), found
    assert message in found[0]


def test_data_from_on_another_kind_is_refused_with_a_hint(tmp_path):
    text = FSX + PILE + PILE.replace("release: pile", "release: pile2").replace("after: fsx", "dataFrom: pile")
    path = recipe(tmp_path, text)
    (found,) = problems_of(path)
    assert found.startswith(f"{path}:{line_of(path, 'dataFrom: pile')}:")
    assert "only a nemo-training release's data argument (model.data.data_prefix) is known" in found
    assert "hint: write `after: pile`" in found


@pytest.mark.parametrize(
    "argument",
    ['- model.data.data_prefix="[1.0,/x]"', "- name: model.data.data_prefix\n            value: '[1.0,/x]'"],
)
def test_a_data_prefix_of_the_values_and_data_from_conflict(tmp_path, argument):
    text = FSX + PILE + TRAINING.replace("- trainer.max_steps=100", argument)
    path = recipe(tmp_path, text)
    (found,) = problems_of(path)
    assert found.startswith(f"{path}:{line_of(path, 'model.data.data_prefix')}:")
    assert "set here and by `dataFrom: pile`" in found
    assert f"also at {path}:{line_of(path, 'dataFrom: pile')}" in found


def test_stage_keys_in_a_plain_values_file(tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text("chart: fsx-lustre\nrelease: a\nafter: b\n")
    (found,) = problems_of(path)
    assert found.startswith(f"{path}:3:1: $.after: `after` is a key of a recipe's release")


def test_bad_shards_of_the_data_prep_release_are_said_there(tmp_path):
    path = recipe(tmp_path, FSX + PILE.replace('numbers: "0-5"', 'numbers: "5-0"') + TRAINING)
    found = problems_of(path)
    assert any(f.startswith(f"{path}:{line_of(path, 'numbers:')}:") and "runs backwards" in f for f in found), found


# --------------------------------------------------------------------------------------------------
# install against the emulator (Helm 3 and 4)


@pytest.fixture
def env(helm, kube, tmp_path) -> dict[str, str]:
    return {**cluster_env(helm.env, kube, tmp_path), "HELM_BIN": str(helm.binary)}


def start(path: Path, env: dict[str, str], *extra: str) -> subprocess.Popen:
    args = ["install", "--no-preflight", "--recipe-poll-interval", "0.1", "-f", str(path), "-n", NS, *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "helm_nemo", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Script:
    """What happens on the emulator before the n-th read of the data-prep Jobs (1-based)."""

    def __init__(self, kube, steps):
        self.kube, self.steps, self.polls, self.seen = kube, steps, 0, []
        kube.before_serve.append(self)

    def __call__(self, request) -> None:
        if (
            request.method == "GET"
            and request.path.endswith("/jobs")
            and "data-prep" in request.query.get("labelSelector", "")
        ):
            self.polls += 1
            self.seen.append(self.kube.get("Secret", "sh.helm.release.v1.gpt3-5b.v1", NS) is not None)
            step = self.steps.get(self.polls)
            if step is not None:
                step(self.kube)


def pod(kube, index: int) -> str:
    return kube.job_pods(NS, "pile", index)[-1]["metadata"]["name"]


def log(kube, index: int, *lines: str) -> None:
    kube.write_log(NS, pod(kube, index), "".join(line + "\n" for line in lines), container="data-prep")


def shard(name: str, what: str = "done (1.2 GiB in 3m10s)") -> str:
    return f"helm-nemo data-prep: shard {name} {what}"


def test_install_waits_for_the_data_prep_job(helm, kube, env, tmp_path):
    kube.hold_jobs("helm-nemo.dev/data-prep")
    path = recipe(tmp_path)
    script = Script(
        kube,
        {
            2: lambda k: (
                log(k, 0, "helm-nemo data-prep: worker 0/2 shards 3", shard("00"), "tokenizing 02 ..."),
                log(k, 1, shard("01", "skipped (complete)")),
            ),
            4: lambda k: (log(k, 0, shard("02"), shard("04")), k.finish_index(NS, "pile", 0)),
            5: lambda k: k.finish_index(NS, "pile", 1),  # no line read: completedIndexes says index 1 is done
        },
    )
    proc = start(path, env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    progress = [line for line in err.splitlines() if line.startswith("pile:")]
    assert progress == [
        "pile: 0/6 shards (worker 0: 0/3, worker 1: 0/3)",
        "pile: 2/6 shards (worker 0: 1/3, worker 1: 1/3)",
        "pile: 4/6 shards (worker 0: 3/3, worker 1: 1/3)",
        "pile: 6/6 shards (worker 0: 3/3, worker 1: 3/3)",
        "pile: complete",
    ]
    order = [line for line in err.splitlines() if line.startswith(("[", "waiting", "fsx:"))]
    assert order[:5] == [
        f"[1/3] install fsx ({ROOT / 'charts/fsx-lustre'})",
        "waiting for fsx's Job to complete before pile (Ctrl-C stops the wait)",
        "fsx: no Job to wait for",  # `after: fsx`: storage runs no Job
        f"[2/3] install pile ({ROOT / 'charts' / 'data-prep'})",
        "waiting for pile's Job to complete before gpt3-5b (Ctrl-C stops the wait)",
    ]
    assert order[5].startswith("[3/3] install gpt3-5b")
    assert script.polls == 5 and script.seen == [False] * 5  # training was not installed while it ran
    job = kube.get("Job", "pile", NS)
    training = kube.get("Secret", "sh.helm.release.v1.gpt3-5b.v1", NS)
    assert int(training["metadata"]["resourceVersion"]) > int(job["metadata"]["resourceVersion"])
    assert [c["type"] for c in job["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert job["status"]["completedIndexes"] == "0-1"
    # the derived argument reached the cluster
    record = yaml.safe_dump(kube.objects("Job", NS)) + yaml.safe_dump(kube.objects("JobSet", NS))
    assert f"model.data.data_prefix=[{PREFIXES}]" in record


def test_a_failed_data_prep_stops_before_training(helm, kube, env, tmp_path):
    kube.hold_jobs("helm-nemo.dev/data-prep")
    path = recipe(tmp_path)
    bad = shard("03", "failed: sha256 mismatch (expected ab12..., got 9f3e...)")
    Script(
        kube,
        {
            2: lambda k: (log(k, 0, shard("00"), shard("02"), shard("04")), k.finish_index(NS, "pile", 0)),
            3: lambda k: (log(k, 1, shard("01"), bad, shard("05")), k.finish_index(NS, "pile", 1, succeeded=False)),
        },
    )
    proc = start(path, env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "pile: Job pile failed (index 1; FailedIndexes: Job has failed indexes)" in err
    assert f"  index 1: {bad}" in err
    assert "stopped before gpt3-5b. Installed by this run: fsx, pile. Not started: gpt3-5b." in err
    assert f"to remove them: helm nemo uninstall --values {path} -n {NS}" in err
    assert "install gpt3-5b" not in err
    assert kube.get("Secret", "sh.helm.release.v1.gpt3-5b.v1", NS) is None
    assert "gpt3-5b" not in str(kube.all_objects())


def test_a_failed_pod_without_a_failed_line_shows_its_last_lines(helm, kube, env, tmp_path):
    kube.hold_jobs("helm-nemo.dev/data-prep")
    path = recipe(tmp_path)
    Script(
        kube,
        {2: lambda k: (log(k, 0, "curl: (6) Could not resolve host"), k.finish_index(NS, "pile", 0, succeeded=False))},
    )
    proc = start(path, env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    # index 0 is out of retries (failedIndexes) while index 1 still runs: the Job can no longer complete
    assert "pile: Job pile failed (index 0; an index ran out of retries: the other indexes keep running)" in err
    assert "index 0: the last lines of pod pile-0-" in err and "    curl: (6) Could not resolve host" in err


def test_interrupt_during_the_wait(helm, kube, env, tmp_path):
    kube.hold_jobs("helm-nemo.dev/data-prep")
    path = recipe(tmp_path)
    script = Script(kube, {})
    proc = start(path, env)
    deadline = time.monotonic() + 60
    while script.polls < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "helm nemo: SIGINT received while waiting for pile; stopped." in err
    assert "Installed by this run: fsx, pile." in err
    assert f"The Job of pile keeps running (helm nemo status pile -n {NS} shows it)." in err
    assert "Not started: gpt3-5b." in err
    assert f"to go on: helm nemo upgrade --install --values {path} -n {NS}" in err
    assert kube.get("Job", "pile", NS) is not None and kube.get("Secret", "sh.helm.release.v1.gpt3-5b.v1", NS) is None
    # the command it suggests goes on: it waits for the Job again, then installs the training
    kube.finish_index(NS, "pile", 0)
    kube.finish_index(NS, "pile", 1)
    args = ["upgrade", "--install", "--no-preflight", "--recipe-poll-interval", "0.1", "--values", str(path), "-n", NS]
    proc = subprocess.run(
        [sys.executable, "-m", "helm_nemo", *args], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "pile: 6/6 shards (worker 0: 3/3, worker 1: 3/3)\npile: complete\n" in proc.stderr
    assert kube.get("Secret", "sh.helm.release.v1.gpt3-5b.v1", NS) is not None


def stamp(seconds_ago: float = 0.0) -> str:
    from datetime import datetime, timedelta, UTC

    return (datetime.now(UTC) - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def unschedulable(message: str, since: str) -> dict:
    """A pod's status while the scheduler finds no node for it."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return {"phase": "Pending", "conditions": [{**condition, "lastTransitionTime": since}]}


def cannot_pull(reason: str, message: str) -> dict:
    """A pod's status while the kubelet cannot pull its image."""
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp()}],
        "containerStatuses": [
            {
                "name": "data-prep",
                "ready": False,
                "restartCount": 0,
                "image": "example.com/nemo:nope",
                "state": {"waiting": {"reason": reason, "message": message}},
            }
        ],
    }


NO_CPU = (  # as the scheduler of Kubernetes 1.32+ writes it (tests/real_cluster.py)
    "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. no new claims to deallocate, "
    "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
)
TAINTED = (
    "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {nvidia.com/gpu: present}. "
    "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not "
    "helpful for scheduling."
)


def test_unscheduled_workers_are_said_once_per_change(helm, kube, env, tmp_path):
    """The data-prep pods cannot be scheduled: the scheduler's words once (not every poll), again when they
    change, then `running` and the shard count once they run; the wait itself goes on."""
    kube.hold_jobs("helm-nemo.dev/data-prep")
    path = recipe(tmp_path)
    running: dict[int, dict] = {}
    since = stamp(125)

    def unscheduled(k, message):
        for index in (0, 1):
            before = k.set_pod_status(NS, pod(k, index), unschedulable(message, since))
            running.setdefault(index, before)

    def scheduled(k):
        for index in (0, 1):
            k.set_pod_status(NS, pod(k, index), running[index])
        log(k, 0, shard("00"))

    script = Script(
        kube,
        {
            1: lambda k: unscheduled(k, NO_CPU),
            4: lambda k: unscheduled(k, TAINTED),
            7: scheduled,
            9: lambda k: (k.finish_index(NS, "pile", 0), k.finish_index(NS, "pile", 1)),
        },
    )
    proc = start(path, env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    said = [line for line in err.splitlines() if line.startswith("pile:")]
    said = [re.sub(r" for 2 m 0[5-9] s: ", " for 2 m 05 s: ", line) for line in said]  # 125 s ago, read later
    assert said == [
        "pile: 0/6 shards (worker 0: 0/3, worker 1: 0/3)",
        "pile: 2 worker pod(s) not scheduled for 2 m 05 s: 0/1 nodes available: 1 Insufficient cpu, "
        "1 Insufficient memory",
        "pile: the wait goes on while Kubernetes retries (--recipe-wait-timeout bounds it; Ctrl-C stops it)",
        "pile: 2 worker pod(s) not scheduled for 2 m 05 s: 0/3 nodes available: 2 untolerated taint "
        "{nvidia.com/gpu: present}, 1 Insufficient cpu",
        "pile: 1/6 shards (worker 0: 1/3, worker 1: 0/3)",
        "pile: 2 worker pod(s) running",
        "pile: 6/6 shards (worker 0: 3/3, worker 1: 3/3)",
        "pile: complete",
    ]
    assert script.polls == 9 and script.seen == [False] * 9
    assert kube.get("Secret", "sh.helm.release.v1.gpt3-5b.v1", NS) is not None


def test_an_image_that_cannot_be_pulled_is_said_and_the_timeout_repeats_it(helm, kube, env, tmp_path):
    """ErrImagePull and ImagePullBackOff alternate while the kubelet retries: one state, said once with the
    registry's answer; the wait goes on to --recipe-wait-timeout, whose message says it again."""
    kube.hold_jobs("helm-nemo.dev/data-prep")
    path = recipe(tmp_path)
    pull = 'rpc error: code = NotFound desc = failed to pull and unpack image "example.com/nemo:nope": not found'
    back_off = 'Back-off pulling image "example.com/nemo:nope"'

    def kubelet(k, first: str, second: str) -> None:
        for index, reason in ((0, first), (1, second)):
            k.set_pod_status(NS, pod(k, index), cannot_pull(reason, pull if reason == "ErrImagePull" else back_off))

    Script(
        kube,
        {
            1: lambda k: kubelet(k, "ErrImagePull", "ImagePullBackOff"),
            3: lambda k: kubelet(k, "ImagePullBackOff", "ImagePullBackOff"),
            5: lambda k: kubelet(k, "ImagePullBackOff", "ErrImagePull"),
        },
    )
    proc = start(path, env, "--recipe-wait-timeout", "2s")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    line = f"pile: 2 worker pod(s) cannot start: ErrImagePull (cannot pull the image: {pull})"
    said = [line for line in err.splitlines() if line.startswith("pile:")]
    assert said == [
        "pile: 0/6 shards (worker 0: 0/3, worker 1: 0/3)",
        line,
        "pile: the wait goes on while Kubernetes retries (up to --recipe-wait-timeout 2s; Ctrl-C stops it)",
        "pile: not complete after --recipe-wait-timeout 2s (0/6 shards)",
    ]
    assert f"pile: not complete after --recipe-wait-timeout 2s (0/6 shards)\n  {line}\n" in err
    assert kube.get("Secret", "sh.helm.release.v1.gpt3-5b.v1", NS) is None


class Cluster:
    """What StageWait reads (KubeClient's list/get_or_none/text), from a dict of objects."""

    def __init__(self, job: dict, pods: list[dict], claims: dict[str, dict | None], events: list[dict] = ()):
        self.job, self.pods, self.claims, self.events, self.reads = job, pods, claims, list(events), []

    def list(self, path: str, query: dict) -> list[dict]:
        if path.endswith("/events"):
            self.reads.append(f"{path}?{query['fieldSelector']}")
            return self.events
        return [self.job] if path.endswith("/jobs") else self.pods

    def get_or_none(self, path: str) -> dict | None:
        self.reads.append(path)
        return self.claims.get(path.rsplit("/", 1)[1])

    def text(self, path: str, query: dict) -> str:
        return ""


def stage_of(cluster: Cluster, said: list[str], **options):
    from types import SimpleNamespace

    from helm_nemo.dataprep.wait import StageWait

    plan = SimpleNamespace(release="pile")  # what StageWait reads of a ReleasePlan
    values = {"workers": 2, "shards": {"urlPattern": "https://example.com/{index}.jsonl.zst", "numbers": "0-5"}}
    return StageWait(cluster, NS, plan, values, said.append, **options)


def worker_pod(index: int, status: dict, claim: str = "fsx-pvc") -> dict:
    return {
        "metadata": {
            "name": f"pile-{index}-abcde",
            "resourceVersion": "1",
            "labels": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {
            "containers": [{"name": "data-prep"}],
            "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": claim}}],
        },
        "status": status,
    }


JOB = {"metadata": {"name": "pile"}, "spec": {"selector": {"matchLabels": {"job-name": "pile"}}}, "status": {}}


def test_a_missing_secret_key_is_said_with_the_kubelets_words():
    status = cannot_pull("CreateContainerConfigError", "couldn't find key token in Secret ml/hf")
    cluster, said = Cluster(JOB, [worker_pod(0, status), worker_pod(1, status)], {}), []
    stage = stage_of(cluster, said)
    assert stage.poll() is False and stage.poll() is False
    assert said == [
        "pile: 0/6 shards (worker 0: 0/3, worker 1: 0/3)",
        "pile: 2 worker pod(s) cannot start: CreateContainerConfigError (the container's configuration is wrong "
        "(a missing Secret or ConfigMap?): couldn't find key token in Secret ml/hf)",
        "pile: the wait goes on while Kubernetes retries (--recipe-wait-timeout bounds it; Ctrl-C stops it)",
    ]


def test_unbound_claims_the_workers_mount_are_named():
    message = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes"
    status = unschedulable(message, "")
    pods = [worker_pod(0, status), worker_pod(1, status, claim="scratch")]
    cluster, said = Cluster(JOB, pods, {"fsx-pvc": {"status": {"phase": "Pending"}}, "scratch": None}), []
    stage_of(cluster, said).poll()
    assert said[1] == (
        "pile: 2 worker pod(s) not scheduled: 0/1 nodes available: pod has unbound immediate "
        "PersistentVolumeClaims (claim fsx-pvc: Pending, claim scratch: not found)"
    )
    assert cluster.reads[-2:] == [f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{n}" for n in ("fsx-pvc", "scratch")]
    # the claims are read only when the scheduler names them
    other = Cluster(JOB, [worker_pod(0, unschedulable(NO_CPU, ""))], {})
    stage_of(other, said).poll()
    assert other.reads == []


def test_the_timeouts_repeat_counts_the_time_to_now():
    """A state said once at 5 s is repeated by the timeout's message as it is then (`for 1 m 05 s`), with the
    claims as read when it was said (the repeat reads nothing)."""
    from datetime import datetime, timedelta, UTC

    since = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)
    clock = [since + timedelta(seconds=5)]
    message = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes"
    status = unschedulable(message, since.strftime("%Y-%m-%dT%H:%M:%SZ"))
    cluster, said = Cluster(JOB, [worker_pod(0, status), worker_pod(1, status)], {"fsx-pvc": None}), []
    stage = stage_of(cluster, said, now=lambda: clock[0])
    stage.poll()
    words = "0/1 nodes available: pod has unbound immediate PersistentVolumeClaims (claim fsx-pvc: not found)"
    assert said[1] == f"pile: 2 worker pod(s) not scheduled for 5 s: {words}"
    reads = list(cluster.reads)
    clock[0] = since + timedelta(seconds=65)
    assert stage.blocked_lines == [f"pile: 2 worker pod(s) not scheduled for 1 m 05 s: {words}"]
    assert cluster.reads == reads


MOUNT_FAILED = (
    'MountVolume.SetUp failed for volume "fsx-pv" : rpc error: code = Internal desc = Could not mount '
    '"fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com@tcp:/abcdefgh" at "/var/lib/kubelet/pods/x/mount": '
    "mount failed: exit status 19"
)


def placed(since: str) -> dict:
    """A pod's status on its node before its containers start (ContainerCreating, as the kubelet says it)."""
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": since}],
        "containerStatuses": [
            {
                "name": "data-prep",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ],
    }


def warning(pod: str, reason: str, message: str, at: str, kind: str = "Pod") -> dict:
    """A core/v1 Warning event about `pod`, as the kubelet or a controller posts it."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.{reason.lower()}", "namespace": NS},
        "involvedObject": {"kind": kind, "name": pod, "namespace": NS},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }


def test_placed_workers_that_do_not_start_are_said_with_their_newest_warning_event():
    """A pod on its node whose volume cannot be mounted says only ContainerCreating: the wait reads the
    namespace's Warning events of pods and says each pod's newest one since it was placed, the scheduler's
    older words left out; nothing is read while no pod waits on its node."""
    from datetime import datetime, timedelta, UTC

    at = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)

    def time_of(seconds: int) -> str:
        return (at + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

    clock = [at + timedelta(seconds=40)]
    pods = [worker_pod(0, placed(time_of(0))), worker_pod(1, placed(time_of(2)))]
    events = [
        warning("pile-0-abcde", "FailedScheduling", NO_CPU, time_of(-5)),  # before it was placed
        warning("pile-0-abcde", "FailedAttachVolume", "AttachVolume.Attach failed: timed out", time_of(10)),
        warning("pile-0-abcde", "FailedMount", MOUNT_FAILED, time_of(30)),
        warning("pile-1-abcde", "FailedMount", MOUNT_FAILED, time_of(31)),
        warning("pile", "BackoffLimitExceeded", "a Job's, not a pod's", time_of(31), kind="Job"),
    ]
    cluster, said = Cluster(JOB, pods, {}, events), []
    stage = stage_of(cluster, said, now=lambda: clock[0])
    assert stage.poll() is False and stage.poll() is False  # said once
    line = f"pile: 2 worker pod(s) not started for 40 s: FailedMount ({MOUNT_FAILED})"
    assert said[1:] == [
        line,
        "pile: the wait goes on while Kubernetes retries (--recipe-wait-timeout bounds it; Ctrl-C stops it)",
    ]
    assert cluster.reads == [f"/api/v1/namespaces/{NS}/events?type=Warning,involvedObject.kind=Pod"] * 2
    clock[0] = at + timedelta(seconds=100)
    assert stage.blocked_lines == [line.replace("for 40 s", "for 1 m 40 s")]
    # the mount succeeds: both run; events are no longer read
    for pod in pods:
        pod["status"] = {"phase": "Running", "conditions": pod["status"]["conditions"]}
        pod["metadata"]["resourceVersion"] = "2"
    stage.poll()
    assert said[-1] == "pile: 2 worker pod(s) running" and len(cluster.reads) == 2
    assert stage.blocked_lines == []


def test_a_mount_failure_is_said_by_the_install(helm, kube, env, tmp_path):
    """The same through the emulator's events list and its field selector, and repeated by the timeout."""
    kube.hold_jobs("helm-nemo.dev/data-prep")
    path = recipe(tmp_path)
    since = stamp(65)

    def mount_fails(k):
        for index in (0, 1):
            name = pod(k, index)
            k.set_pod_status(NS, name, placed(since))
            k.put(warning(name, "FailedMount", MOUNT_FAILED, stamp(1)))

    Script(kube, {1: mount_fails})
    proc = start(path, env, "--recipe-wait-timeout", "2s")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    said = [re.sub(r" for 1 m 0[5-9] s: ", " for 1 m 05 s: ", line) for line in err.splitlines()]
    line = f"pile: 2 worker pod(s) not started for 1 m 05 s: FailedMount ({MOUNT_FAILED})"
    assert said.count(line) == 1, err
    end = said.index("pile: not complete after --recipe-wait-timeout 2s (0/6 shards)")
    assert said[end + 1] == f"  {line}", err


def test_wait_timeout(helm, kube, env, tmp_path):
    kube.hold_jobs("helm-nemo.dev/data-prep")
    proc = start(recipe(tmp_path), env, "--recipe-wait-timeout", "1s")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "pile: not complete after --recipe-wait-timeout 1s (0/6 shards)" in err
    assert "the Job keeps running; to go on once it completes: helm nemo upgrade --install" in err


def test_bad_wait_option_is_a_usage_error(tmp_path):
    path = recipe(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "helm_nemo", "install", "--recipe-wait-timeout", "soon", "-f", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "'soon' is not a duration" in proc.stderr


def test_template_shows_the_derived_argument(helm, tmp_path):
    path = recipe(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "helm_nemo", "template", "-f", str(path)],
        env={**helm.env, "HELM_BIN": str(helm.binary)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"- model.data.data_prefix=[{PREFIXES}]" in proc.stdout


# --------------------------------------------------------------------------------------------------
# Where the training sees the outputs (helm_nemo/dataprep/storage.py)


def test_prefixes_follow_the_trainings_own_mount_path(tmp_path):
    """The training mounts the same claim at /data: the prefixes are the output folder in its view."""
    plans = plans_of(recipe(tmp_path, FSX + PILE + TRAINING.replace("mountPath: /fsx", "mountPath: /data")))
    argument = plans[2].values["workload"]["arguments"][-1]
    assert argument == "model.data.data_prefix=[" + PREFIXES.replace("/fsx/", "/data/") + "]"


def test_a_training_that_does_not_mount_the_output_storage_is_refused(tmp_path):
    path = recipe(tmp_path, FSX + PILE + TRAINING.replace("claimName: fsx-pvc", "claimName: scratch-pvc"))
    problems = problems_of(path)
    assert len(problems) == 1, problems
    line = line_of(path, "dataFrom: pile")
    assert problems[0].startswith(f"{path}:{line}:")
    assert "would not see the outputs of 'pile'" in problems[0] and "claim 'fsx-pvc'" in problems[0]


@pytest.mark.parametrize(
    ("training_storage", "expected"),
    [
        ("workload:\n  gcsBucketForDataCataPath: corpus-bucket", "/gcs/data/pile"),  # the chart mounts it at /gcs
        ("volumes:\n  gcsMounts: [{bucketName: corpus-bucket, mountPath: /bucket}]", "/bucket/data/pile"),
        ("volumes:\n  gcsMounts: [{bucketName: other-bucket, mountPath: /gcs}]", None),
    ],
)
def test_bucket_outputs_map_through_the_trainings_bucket_mounts(training_storage, expected):
    from helm_nemo.dataprep.storage import training_root

    data_prep = {
        "output": {"path": "/gcs/data/pile"},
        "volumes": {"gcsMounts": [{"bucketName": "corpus-bucket", "mountPath": "/gcs"}]},
    }
    root, unseen = training_root(data_prep, yaml.safe_load(training_storage))
    assert root == expected
    assert (unseen is None) == (expected is not None)
    if expected is None:
        assert "bucket 'corpus-bucket'" in unseen


def test_the_deepest_data_prep_mount_decides(tmp_path):
    from helm_nemo.dataprep.storage import training_root

    data_prep = {
        "output": {"path": "/fsx/scratch/pile"},
        "volumes": {
            "pvcMounts": [
                {"claimName": "fsx-pvc", "mountPath": "/fsx"},
                {"claimName": "scratch-pvc", "mountPath": "/fsx/scratch"},
            ]
        },
    }
    assert training_root(data_prep, {"volumes": {"pvcMounts": [{"claimName": "fsx-pvc", "mountPath": "/fsx"}]}})[1]
    training = {"volumes": {"pvcMounts": [{"claimName": "scratch-pvc", "mountPath": "/scratch"}]}}
    assert training_root(data_prep, training) == ("/scratch/pile", None)
