"""The real `helm install / upgrade / uninstall` (Helm 3.17.2 and 4.1.4) against the loopback Kubernetes
API emulator (tests/kube_emulator.py): plain helm, `python -m helm_nemo`, and `helm nemo` as an installed
plugin. Every test gets its own emulator on a free port, stopped at the end even on failure.

The emulator here is an empty API server (no nodes, no Kueue queue, no CSI driver): the recipe could not
run there, so `helm nemo install` would stop at its preflight. These tests are about what helm does, and
pass `--no-preflight` as a user would on such a cluster; install with its preflight (passing and failing,
Helm 3 and 4) is tests/test_preflight.py's."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import JOB_TIMESTAMP, cluster_env
from kube_emulator import KubeEmulator, decode_protobuf, label_selector_matches, strategic_merge_patch

ROOT = Path(__file__).resolve().parent.parent
JOBSET_CHART = ROOT / "charts/a3ultra/jobset"
RECIPE = ROOT / "values/examples/a3ultra-405b.yaml"
RECIPE_RELEASES = ["llama31-405b-supervisor", "llama31-405b-storage", "llama31-405b"]
RECIPE_ENV = {"GCS_BUCKET": "bkt-ckpt", "KUEUE_NAME": "queue-1", "PROJECT_ID": "proj-1234"}
BUCKET_SET = ["--set", "volumes.gcsMounts[0].bucketName=bkt-1", "--set", "volumes.gcsMounts[0].mountPath=/logs"]
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "PersistentVolume"}


def _cluster_env(base: dict[str, str], kube: KubeEmulator, tmp_path: Path) -> dict[str, str]:
    return {**cluster_env(base, kube, tmp_path), **RECIPE_ENV}


@pytest.fixture
def env(helm, kube, tmp_path) -> dict[str, str]:
    """helm's isolated homes + KUBECONFIG of this test's emulator + the recipe's variables + HELM_BIN."""
    return {**_cluster_env(helm.env, kube, tmp_path), "HELM_BIN": str(helm.binary)}


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, check=False)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def nemo(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "helm_nemo", *args], env)


def release_record(secret: dict) -> dict:
    """What helm stores in sh.helm.release.v1.NAME.vN: base64(gzip(JSON)) in data.release."""
    assert secret["metadata"]["labels"]["owner"] == "helm"
    inner = base64.b64decode(base64.b64decode(secret["data"]["release"]))
    return json.loads(gzip.decompress(inner))


def rendered(env: dict[str, str], args: list[str]) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of what `helm nemo template` renders: what an install must create."""
    out = ok(nemo(["template", *args], env)).stdout
    docs = [d for d in yaml.safe_load_all(out) if isinstance(d, dict)]
    return sorted(
        (d["kind"], "" if d["kind"] in CLUSTER_SCOPED else d["metadata"]["namespace"], d["metadata"]["name"])
        for d in docs
    )


def chart_objects(kube: KubeEmulator) -> list[tuple[str, str, str]]:
    """Everything stored except helm's release records and the emulated controller's ReplicaSets."""
    return [
        o
        for o in kube.all_objects()
        if o[0] != "ReplicaSet" and not (o[0] == "Secret" and o[2].startswith("sh.helm.release.v1."))
    ]


def release_secrets(kube: KubeEmulator, namespace: str) -> dict[str, str]:
    return {
        s["metadata"]["name"]: s["metadata"]["labels"]["status"]
        for s in kube.objects("Secret", namespace)
        if s["metadata"]["name"].startswith("sh.helm.release.v1.")
    }


# --------------------------------------------------------------------------------------------------
# The emulator's own pieces (fast, no helm)


def test_protobuf_secret_decoding():
    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    meta = field(1, b"sh.helm.release.v1.r.v1") + field(3, b"ns") + field(11, field(1, b"owner") + field(2, b"helm"))
    secret = (
        field(1, meta) + field(2, field(1, b"release") + field(2, b"\x00\xffdata")) + field(3, b"helm.sh/release.v1")
    )
    body = b"k8s\x00" + field(1, field(1, b"v1") + field(2, b"Secret")) + field(2, secret)
    obj = decode_protobuf(body)
    assert obj == {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "helm.sh/release.v1",
        "metadata": {"name": "sh.helm.release.v1.r.v1", "namespace": "ns", "labels": {"owner": "helm"}},
        "data": {"release": base64.b64encode(b"\x00\xffdata").decode()},
    }
    with pytest.raises(ValueError):
        decode_protobuf(b'{"kind": "Secret"}')


def test_selectors_and_strategic_merge():
    labels = {"name": "r", "owner": "helm", "status": "deployed"}
    assert label_selector_matches("name=r,owner=helm", labels)
    assert not label_selector_matches("name=r,owner!=helm", labels)
    assert label_selector_matches("status in (deployed, superseded),!gone", labels)
    assert not label_selector_matches("status notin (deployed),owner", labels)
    old = {"spec": {"containers": [{"name": "a", "image": "x:1", "args": ["1"]}, {"name": "b", "image": "y:1"}]}}
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "image": "x:2", "args": ["2"]}, {"name": "b", "$patch": "delete"}],
        }
    }
    assert strategic_merge_patch(old, patch) == {"spec": {"containers": [{"name": "a", "image": "x:2", "args": ["2"]}]}}


def test_emulator_crud_watch_and_stop(tmp_path):
    import http.client

    with KubeEmulator() as kube:
        host, port = kube.url[len("http://") :].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)

        def call(method, path, body=None, content_type="application/json"):
            conn.request(
                method,
                path,
                body=json.dumps(body) if body is not None else None,
                headers={"Content-Type": content_type},
            )
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"null")

        assert call("GET", "/api/v1/namespaces/a/configmaps/c")[0] == 404
        status, created = call(
            "POST",
            "/api/v1/namespaces/a/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c", "labels": {"x": "1"}},
                "data": {"k": "v"},
            },
        )
        assert status == 201 and created["metadata"]["uid"] and created["metadata"]["namespace"] == "a"
        assert call("POST", "/api/v1/namespaces/a/configmaps", created)[0] == 409
        status, patched = call(
            "PATCH",
            "/api/v1/namespaces/a/configmaps/c",
            {"data": {"k": None, "n": "1"}},
            "application/merge-patch+json",
        )
        assert status == 200 and patched["data"] == {"n": "1"}
        assert call("GET", "/api/v1/namespaces/a/configmaps?labelSelector=x%3D1")[1]["items"][0]["data"] == {"n": "1"}
        assert call("GET", "/api/v1/namespaces/b/configmaps")[1]["items"] == []
        assert call("GET", "/api/v1/persistentvolumes")[1]["items"] == []
        conn.request("GET", "/api/v1/namespaces/a/configmaps?watch=true&sendInitialEvents=true&timeoutSeconds=0")
        events = [json.loads(line) for line in conn.getresponse().read().splitlines()]
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
        assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert call("DELETE", "/api/v1/namespaces/a/configmaps/c")[0] == 200
        assert kube.objects("ConfigMap") == []
        assert ("PATCH", "/api/v1/namespaces/a/configmaps/c") in kube.calls()
    with pytest.raises(OSError):
        http.client.HTTPConnection(host, int(port), timeout=2).request("GET", "/version")


def test_emulator_fault_injection():
    import http.client

    with KubeEmulator() as kube:
        host, port = kube.url[len("http://") :].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)

        def call(method, path, body=None):
            conn.request(
                method,
                path,
                body=json.dumps(body) if body is not None else None,
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"null"), response.getheader("Retry-After")

        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        with pytest.raises(KeyError):
            kube.fail_next("POST", "ConfigMapz")  # a typo fails the test instead of never firing
        other = kube.fail_next("POST", "ConfigMap", namespace="b")
        fault = kube.fail_next(("POST", "PUT"), "configmaps", status=503, message="etcd leader changed", times=2)
        status, body, retry_after = call("POST", "/api/v1/namespaces/a/configmaps", cm)
        assert (status, retry_after) == (503, None)  # no Retry-After: client-go does not retry
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "etcd leader changed",
            "reason": "ServiceUnavailable",
            "details": {},
            "code": 503,
        }
        assert kube.objects("ConfigMap") == []  # the request was not served
        assert call("GET", "/api/v1/namespaces/a/configmaps/c")[0] == 404  # GET does not match
        assert call("POST", "/api/v1/namespaces/a/configmaps", cm)[0] == 503
        assert call("POST", "/api/v1/namespaces/a/configmaps", cm)[0] == 201  # times=2: spent
        assert [(r.method, r.path) for r in fault.fired] == [("POST", "/api/v1/namespaces/a/configmaps")] * 2
        assert fault.exhausted and other.fired == [] and kube.faults == [other, fault]
        kube.fail_next("DELETE", "ConfigMap", name="c", when=lambda r: r.query.get("dryRun") != "All")
        status, body, _ = call("DELETE", "/api/v1/namespaces/a/configmaps/c")
        assert (status, body["reason"], body["message"]) == (500, "InternalError", "etcdserver: request timed out")
        assert kube.names("ConfigMap", "a") == ["c"]


# --------------------------------------------------------------------------------------------------
# (a) plain helm


def test_plain_helm_install_list_upgrade_uninstall(helm, kube, env):
    binary = str(helm.binary)
    # The run's time pinned: a new JOB_TIMESTAMP (the render's time) changes the pod template, which the
    # JobSet webhook refuses on upgrade (below).
    stamp = ["--set", f"workload.jobTimestamp={JOB_TIMESTAMP}"]
    ok(run([binary, "install", "r", str(JOBSET_CHART), *BUCKET_SET, *stamp, "-n", "team-a"], env))
    assert kube.names("ConfigMap", "team-a") == ["r-config", "r-launcher"]
    assert kube.names("JobSet", "team-a") == ["r"]
    assert kube.objects("JobSet", "default") == [] and kube.objects("ConfigMap", "default") == []
    jobset = kube.get("JobSet", "r", "team-a")
    assert jobset["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert jobset["metadata"]["annotations"]["meta.helm.sh/release-namespace"] == "team-a"
    assert "bkt-1" in json.dumps(jobset["spec"])

    # The release record arrived as protobuf and was stored as a Secret helm can read back.
    assert release_secrets(kube, "team-a") == {"sh.helm.release.v1.r.v1": "deployed"}
    record = release_record(kube.get("Secret", "sh.helm.release.v1.r.v1", "team-a"))
    assert (record["name"], record["namespace"], record["version"]) == ("r", "team-a", 1)
    assert record["info"]["status"] == "deployed"
    secret_writes = [r for r in kube.requests if r.path.endswith("/secrets") and r.method == "POST"]
    assert secret_writes and all(r.content_type == "application/vnd.kubernetes.protobuf" for r in secret_writes)
    # Helm 3 creates the chart's objects with POST; Helm 4 with server-side apply.
    chart_writes = [r for r in kube.requests if "/configmaps" in r.path and r.method in ("POST", "PATCH")]
    expected = "application/apply-patch+yaml" if helm.name == "helm4" else "application/json"
    assert [r.content_type for r in chart_writes] == [expected, expected]
    assert ("GET", "/version") in kube.calls() and ("GET", "/api/v1") in kube.calls()

    listed = ok(run([binary, "list", "-n", "team-a", "-o", "json"], env)).stdout
    assert [(r["name"], r["status"], r["revision"]) for r in json.loads(listed)] == [("r", "deployed", "1")]
    assert json.loads(ok(run([binary, "list", "-n", "team-b", "-o", "json"], env)).stdout) == []

    ok(
        run(
            [
                binary,
                "upgrade",
                "r",
                str(JOBSET_CHART),
                *BUCKET_SET,
                *stamp,
                "--set",
                "workload.annotations.team=a",
                "-n",
                "team-a",
            ],
            env,
        )
    )
    assert kube.get("JobSet", "r", "team-a")["metadata"]["annotations"]["team"] == "a"
    assert release_secrets(kube, "team-a") == {
        "sh.helm.release.v1.r.v1": "superseded",
        "sh.helm.release.v1.r.v2": "deployed",
    }
    # More GPUs change the pod template (NNODES, ...): the JobSet webhook refuses, as on the real control plane.
    proc = run(
        [
            binary,
            "upgrade",
            "r",
            str(JOBSET_CHART),
            *BUCKET_SET,
            *stamp,
            "--set",
            "workload.annotations.team=a",
            "--set",
            "workload.gpus=16",
            "-n",
            "team-a",
        ],
        env,
    )
    assert proc.returncode == 1
    assert (
        'admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "r" is invalid: '
        "spec.replicatedJobs: Invalid value: "
        in proc.stderr
        and "field is immutable" in proc.stderr
    )
    parallelism = kube.get("JobSet", "r", "team-a")["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"]
    assert parallelism == 1
    assert release_secrets(kube, "team-a")["sh.helm.release.v1.r.v3"] == "failed"

    before = len(kube.requests)
    ok(run([binary, "uninstall", "r", "-n", "team-a"], env))
    assert kube.all_objects() == []
    deletes = {path for _, path in kube.calls("DELETE")}
    assert "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets/r" in deletes
    assert all(r.method != "POST" for r in kube.requests[before:])
    assert json.loads(ok(run([binary, "list", "-n", "team-a", "-o", "json"], env)).stdout) == []


def test_install_into_taken_name_fails_and_changes_nothing(helm, kube, env):
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "r-config", "namespace": "team-a"},
            "data": {"mine": "yes"},
        }
    )
    proc = run([str(helm.binary), "install", "r", str(JOBSET_CHART), *BUCKET_SET, "-n", "team-a"], env)
    assert proc.returncode != 0
    assert "r-config" in proc.stderr and "exists" in proc.stderr
    assert kube.get("ConfigMap", "r-config", "team-a")["data"] == {"mine": "yes"}
    assert kube.objects("JobSet") == []


# --------------------------------------------------------------------------------------------------
# (b) the plugin's code path: python -m helm_nemo with HELM_BIN


def test_nemo_install_and_uninstall_recipe(helm, kube, env):
    expected = rendered(env, ["--values", str(RECIPE), "-n", "ml-team"])
    assert kube.requests == []  # rendering needs no cluster
    proc = ok(nemo(["install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team"], env))
    assert [line for line in proc.stderr.splitlines() if line.startswith("[")] == [
        f"[{n}/3] install {name} ({path})"
        for n, (name, path) in enumerate(
            zip(RECIPE_RELEASES, ["charts/supervisor", "charts/gcs-fuse", "charts/a3ultra/jobset"]), start=1
        )
        for path in [str(ROOT / path)]
    ]

    assert chart_objects(kube) == expected
    assert {k for k, _, _ in expected} >= {"JobSet", "Deployment", "DaemonSet", "ClusterRole", "PersistentVolume"}
    assert release_secrets(kube, "ml-team") == {f"sh.helm.release.v1.{r}.v1": "deployed" for r in RECIPE_RELEASES}
    # In order: each release record is created before the next release starts.
    record_posts = [r for r in kube.requests if r.method == "POST" and r.path == "/api/v1/namespaces/ml-team/secrets"]
    assert len(record_posts) == 3
    created = [
        s["metadata"]["name"]
        for s in sorted(kube.objects("Secret", "ml-team"), key=lambda s: int(s["metadata"]["resourceVersion"]))
    ]
    assert created == [f"sh.helm.release.v1.{r}.v1" for r in RECIPE_RELEASES]
    jobset = kube.get("JobSet", "llama31-405b", "ml-team")
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "queue-1"
    record = release_record(kube.get("Secret", "sh.helm.release.v1.llama31-405b.v1", "ml-team"))
    assert record["config"]["queue"] == "queue-1" and "files" not in record["config"]
    assert re.fullmatch(r"\d{4}(-\d\d){5}", record["config"]["workload"]["jobTimestamp"])
    assert "bkt-ckpt" in json.dumps(kube.objects("PersistentVolume"))

    proc = ok(nemo(["uninstall", "--values", str(RECIPE), "-n", "ml-team"], env))
    assert [line for line in proc.stderr.splitlines() if line.startswith("[")] == [
        f"[{n}/3] uninstall {name}" for n, name in enumerate(reversed(RECIPE_RELEASES), start=1)
    ]
    assert kube.all_objects() == []


def test_nemo_schema_error_exits_2_and_sends_nothing(helm, kube, env, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(RECIPE.read_text().replace("gpus: 432", "gpus: 430"))
    shutil.copytree(RECIPE.parent / "launchers", tmp_path / "launchers")
    for verb in ("install", "upgrade"):
        proc = nemo([verb, "--values", str(bad), "-n", "ml-team"], env)
        assert proc.returncode == 2, proc.stderr
        assert re.search(rf"{re.escape(str(bad))}:\d+:\d+: \$\.workload\.gpus: 430 ", proc.stderr)
        assert "Nothing was sent to helm." in proc.stderr
    proc = nemo(["install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team"], {**env, "GCS_BUCKET": "b"})
    assert proc.returncode == 2 and "bucketName" in proc.stderr
    assert kube.requests == []
    # uninstall reads the release names only (issue 16): the schema error is not its business
    proc = nemo(["uninstall", "--values", str(bad), "-n", "ml-team"], env)
    assert proc.returncode == 1 and "no release of" in proc.stderr and "Nothing was sent" not in proc.stderr


def test_nemo_install_failure_stops_and_says_what_is_installed(helm, kube, env):
    # The storage release's PV name is taken: release 1 installs, release 2 fails, release 3 never starts.
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "llama31-405b-storage-llama31-405b-checkpoints-pv"},
            "spec": {},
        }
    )
    proc = nemo(["install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team"], env)
    assert proc.returncode == 1, proc.stderr
    assert "install of llama31-405b-storage failed" in proc.stderr
    assert "Installed by this run: llama31-405b-supervisor." in proc.stderr
    assert kube.objects("JobSet") == []
    # helm checks for existing objects before it writes a release record: none for the storage release.
    assert release_secrets(kube, "ml-team") == {"sh.helm.release.v1.llama31-405b-supervisor.v1": "deployed"}
    assert kube.objects("PersistentVolumeClaim") == []
    assert "exists" in proc.stderr and "llama31-405b-checkpoints-pv" in proc.stderr

    # The suggested clean-up removes what was installed and skips the releases that never were.
    proc = ok(nemo(["uninstall", "--values", str(RECIPE), "-n", "ml-team"], env))
    assert "llama31-405b-storage is not installed; skipped" in proc.stderr
    assert chart_objects(kube) == [("PersistentVolume", "", "llama31-405b-storage-llama31-405b-checkpoints-pv")]
    assert release_secrets(kube, "ml-team") == {}
    # Nothing of the recipe installed (say, the wrong namespace): that is an error.
    proc = nemo(["uninstall", "--values", str(RECIPE), "-n", "ml-team"], env)
    assert proc.returncode == 1 and "no release of" in proc.stderr


# --------------------------------------------------------------------------------------------------
# (c) `helm nemo …` with the plugin installed into an isolated helm home


@pytest.fixture(scope="module")
def plugin_home(helm, tmp_path_factory) -> dict[str, str]:
    home = tmp_path_factory.mktemp(f"emulated-plugin-{helm.name}")
    env = dict(helm.env)
    for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME"):
        env[name] = str(home / name.lower())
    ok(run([str(helm.binary), "plugin", "install", str(ROOT)], env))
    return env


def test_helm_nemo_plugin_install_and_uninstall(helm, kube, plugin_home, tmp_path):
    env = _cluster_env(plugin_home, kube, tmp_path)
    env.pop("HELM_BIN", None)  # helm sets it for the plugin
    binary = str(helm.binary)
    # helm strips -n and passes HELM_NAMESPACE (and KUBECONFIG) down to the plugin and its inner helm.
    ok(run([binary, "nemo", "install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team"], env))
    assert release_secrets(kube, "ml-team") == {f"sh.helm.release.v1.{r}.v1": "deployed" for r in RECIPE_RELEASES}
    assert kube.names("JobSet", "ml-team") == ["llama31-405b"]
    assert kube.objects("JobSet", "default") == []
    listed = json.loads(ok(run([binary, "list", "-n", "ml-team", "-o", "json"], env)).stdout)
    assert sorted(r["name"] for r in listed) == sorted(RECIPE_RELEASES)
    ok(run([binary, "nemo", "uninstall", "--values", str(RECIPE), "-n", "ml-team"], env))
    assert kube.all_objects() == []


# --------------------------------------------------------------------------------------------------
# (d) --atomic: Helm 3 spelling given to the plugin, translated to --rollback-on-failure on Helm 4


def test_nemo_atomic_waits_for_ready_objects(helm, kube, env):
    proc = ok(
        nemo(
            ["install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team", "--atomic", "--timeout", "60s"], env
        )
    )
    assert "deprecated" not in proc.stderr  # Helm 4 got --rollback-on-failure, not --atomic
    assert release_secrets(kube, "ml-team") == {f"sh.helm.release.v1.{r}.v1": "deployed" for r in RECIPE_RELEASES}
    if helm.name == "helm4":  # kstatus watcher: watch-list streams of each kind
        watched = {r.path for r in kube.requests if r.query.get("watch") == "true"}
        assert "/apis/apps/v1/namespaces/ml-team/deployments" in watched
        assert "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml-team/jobsets" in watched
    else:  # polling: a Deployment is ready when its newest ReplicaSet is
        assert any(r.path == "/apis/apps/v1/namespaces/ml-team/replicasets" for r in kube.requests)
    ok(nemo(["uninstall", "--values", str(RECIPE), "-n", "ml-team"], env))
    assert kube.all_objects() == []


def test_nemo_atomic_rolls_back_when_not_ready(helm, kube, env):
    kube.ready = False  # no controller: Deployments never become available
    proc = nemo(
        ["install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team", "--atomic", "--timeout", "1s"], env
    )
    assert proc.returncode == 1, proc.stderr
    assert "install of llama31-405b-supervisor failed" in proc.stderr
    assert "Installed by this run: none." in proc.stderr
    # The objects were created, then the failed release was uninstalled by helm itself; the next
    # releases never started.
    deployments = "/apis/apps/v1/namespaces/ml-team/deployments"
    assert any(r.method in ("POST", "PATCH") and r.path.startswith(deployments) for r in kube.requests)
    assert any(r.method == "DELETE" and r.path.startswith(deployments + "/") for r in kube.requests)
    assert chart_objects(kube) == []
    assert release_secrets(kube, "ml-team") == {}
    assert not any("llama31-405b-storage" in r.path or "jobsets" in r.path for r in kube.requests)


# --------------------------------------------------------------------------------------------------
# (e) a server error in the middle: the emulator answers one request with a Kubernetes Status failure


SUPERVISOR = "llama31-405b-supervisor"
DAEMONSET = "llama31-405b-supervisor-host-daemonset"
ETCD_TIMEOUT = "etcdserver: request timed out"


def _fail_supervisor_daemonset(helm, kube: KubeEmulator):
    """A 500 on creating the supervisor's DaemonSet: Helm 3 creates with POST, Helm 4 with server-side
    apply (PATCH application/apply-patch+yaml to the object's path); both are armed, either fires once."""
    return kube.fail_next(("POST", "PATCH"), "DaemonSet", namespace="ml-team", status=500, message=ETCD_TIMEOUT)


def _assert_create_failed_once(helm, fault) -> None:
    daemonsets = "/apis/apps/v1/namespaces/ml-team/daemonsets"
    if helm.name == "helm4":
        assert [(r.method, r.path, r.content_type) for r in fault.fired] == [
            ("PATCH", f"{daemonsets}/{DAEMONSET}", "application/apply-patch+yaml")
        ]
    else:
        assert [(r.method, r.path) for r in fault.fired] == [("POST", daemonsets)]


def _assert_only_the_supervisor_was_attempted(proc, kube: KubeEmulator) -> None:
    """The storage and JobSet releases never started: no line for them, no request for their objects."""
    assert "[2/3]" not in proc.stderr and "[3/3]" not in proc.stderr
    for request in kube.requests:
        assert "llama31-405b-storage" not in request.path and "jobsets" not in request.path, request
        assert "persistentvolume" not in request.path and "llama31-405b-config" not in request.path, request
    record_posts = [r for r in kube.requests if r.method == "POST" and r.path.endswith("/secrets")]
    assert len(record_posts) == 1  # the supervisor's release record only


def test_nemo_install_server_error_leaves_a_failed_release(helm, kube, env):
    supervisor_objects = [o for o in rendered(env, ["--values", str(RECIPE), "-n", "ml-team"]) if SUPERVISOR in o[2]]
    assert ("DaemonSet", "ml-team", DAEMONSET) in supervisor_objects
    fault = _fail_supervisor_daemonset(helm, kube)
    proc = nemo(["install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team"], env)

    assert proc.returncode == 1, proc.stderr  # helm's exit code, passed through
    _assert_create_failed_once(helm, fault)
    # helm's error carries the server's message (Helm 3 wraps it in a one-item multierror list).
    helm_error = next(line for line in proc.stderr.splitlines() if line.startswith("Error:"))
    assert helm_error.startswith("Error: INSTALLATION FAILED:")
    assert ETCD_TIMEOUT in (helm_error if helm.name == "helm4" else proc.stderr)
    assert (
        f"helm nemo: install of {SUPERVISOR} failed (helm exit 1); stopped. Installed by this run: none." in proc.stderr
    )
    assert (
        f"  to remove {SUPERVISOR}, if helm left it behind as failed: "
        f"helm nemo uninstall --values {RECIPE} -n ml-team" in proc.stderr.splitlines()
    )
    _assert_only_the_supervisor_was_attempted(proc, kube)

    # Without --atomic neither helm cleans up: it goes on creating the kinds after the DaemonSet
    # (Deployments), then marks the release record failed. Everything but the DaemonSet is left.
    assert chart_objects(kube) == [o for o in supervisor_objects if o[0] != "DaemonSet"]
    assert release_secrets(kube, "ml-team") == {f"sh.helm.release.v1.{SUPERVISOR}.v1": "failed"}
    record = release_record(kube.get("Secret", f"sh.helm.release.v1.{SUPERVISOR}.v1", "ml-team"))
    assert record["info"]["status"] == "failed" and ETCD_TIMEOUT in record["info"]["description"]

    # The name is taken now: the hint's uninstall removes the failed release and skips the others.
    proc = ok(nemo(["uninstall", "--values", str(RECIPE), "-n", "ml-team"], env))
    assert "llama31-405b-storage is not installed; skipped" in proc.stderr
    assert kube.all_objects() == []


def test_nemo_atomic_install_server_error_uninstalls_the_release(helm, kube, env):
    fault = _fail_supervisor_daemonset(helm, kube)
    proc = nemo(
        ["install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team", "--atomic", "--timeout", "5s"], env
    )

    assert proc.returncode == 1, proc.stderr
    _assert_create_failed_once(helm, fault)
    assert "deprecated" not in proc.stderr  # Helm 4 got --rollback-on-failure, not --atomic
    flag = "rollback-on-failure" if helm.name == "helm4" else "atomic"
    assert (
        f"Error: INSTALLATION FAILED: release {SUPERVISOR} failed, and has been uninstalled due to {flag} "
        "being set" in proc.stderr
    )
    assert ETCD_TIMEOUT in proc.stderr
    assert (
        f"helm nemo: install of {SUPERVISOR} failed (helm exit 1); stopped. Installed by this run: none." in proc.stderr
    )
    assert "to remove" not in proc.stderr  # helm removed it; nothing was installed before it
    _assert_only_the_supervisor_was_attempted(proc, kube)

    # Both helms "roll back" a failed first install by uninstalling it: a DELETE for every object of
    # the manifest (the DaemonSet that was never created too: its 404 is ignored), then the release
    # record goes. Nothing is left, not even a record (a plain uninstall keeps no history).
    failed_at = next(i for i, r in enumerate(kube.requests) if r is fault.fired[0])
    after = kube.requests[failed_at + 1 :]
    deletes = [r.path for r in after if r.method == "DELETE"]
    assert f"/apis/apps/v1/namespaces/ml-team/daemonsets/{DAEMONSET}" in deletes
    assert deletes[-1] == f"/api/v1/namespaces/ml-team/secrets/sh.helm.release.v1.{SUPERVISOR}.v1"
    assert kube.all_objects() == []
    watches = {r.path for r in after if r.query.get("watch") == "true"}
    if helm.name == "helm4":
        # Helm 4's rollback uninstall waits until the objects are gone (the kstatus watcher: a
        # watch-list stream per kind) before it deletes the record.
        assert "/apis/apps/v1/namespaces/ml-team/daemonsets" in watches
        last_watch = max(i for i, r in enumerate(after) if r.query.get("watch") == "true")
        assert after[last_watch + 1 :] and any(
            r.method == "DELETE" and "/secrets/" in r.path for r in after[last_watch + 1 :]
        )
    else:
        # Helm 3's atomic uninstall does not wait for the deletions (and the create failed before
        # any --wait started): no watch, no readiness polling.
        assert watches == set()


def test_nemo_uninstall_server_error_goes_on_and_names_the_release(helm, kube, env):
    ok(nemo(["install", "--no-preflight", "--values", str(RECIPE), "-n", "ml-team"], env))
    unavailable = "the server is currently unable to handle the request"
    fault = kube.fail_next(
        "DELETE", "JobSet", name="llama31-405b", namespace="ml-team", status=503, message=unavailable
    )
    proc = nemo(["uninstall", "--values", str(RECIPE), "-n", "ml-team"], env)

    assert proc.returncode == 1, proc.stderr
    assert [(r.method, r.path) for r in fault.fired] == [
        ("DELETE", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml-team/jobsets/llama31-405b")
    ]
    lines = proc.stderr.splitlines()
    assert [line for line in lines if line.startswith("[")] == [
        f"[{n}/3] uninstall {name}" for n, name in enumerate(reversed(RECIPE_RELEASES), start=1)
    ]
    # Both helms say only which release; the server's message is in their --debug log, not the error.
    assert "Error: failed to delete release: llama31-405b" in lines
    assert unavailable not in proc.stderr
    assert lines[-1] == "helm nemo: could not uninstall: llama31-405b"
    # The plugin went on: the storage and supervisor releases are gone.
    assert 'release "llama31-405b-storage" uninstalled' in proc.stdout
    assert f'release "{SUPERVISOR}" uninstalled' in proc.stdout
    # helm itself went on past the failed object (the ConfigMaps are deleted), then stopped before
    # deleting the release record: it stays, status "uninstalling", with the JobSet it still owns.
    assert kube.all_objects() == [
        ("JobSet", "ml-team", "llama31-405b"),
        ("Secret", "ml-team", "sh.helm.release.v1.llama31-405b.v1"),
    ]
    assert release_secrets(kube, "ml-team") == {"sh.helm.release.v1.llama31-405b.v1": "uninstalling"}

    # Running it again (the fault fired once) finishes the job.
    proc = ok(nemo(["uninstall", "--values", str(RECIPE), "-n", "ml-team"], env))
    assert "llama31-405b-storage is not installed; skipped" in proc.stderr
    assert kube.all_objects() == []


def test_upgrade_patches_give_what_a_fresh_install_gives(helm, kube, env):
    """Helm 3 upgrades core kinds with strategic merge patches computed against the stored objects,
    Helm 4 with server-side apply: either way the result must equal a fresh install of the new values."""
    binary, chart = str(helm.binary), str(ROOT / "charts/supervisor")
    v1 = ["--set", "project=proj-1234"]
    v2 = v1 + [
        "--set",
        "actuator.port=60090",
        "--set",
        "sensor.image=example.com/sensor:2",
        "--set",
        "watchdogs={ecc}",
        "--set",
        "nodeSelector.pool=gpu",
        "--set",
        "heartbeat_timeout_s=45",
        "--set",
        "serviceAccount.create=false",
        "--set",
        "serviceAccount.name=existing-sa",
        "--set-json",
        'tolerations=[{"key":"gpu","operator":"Exists"}]',
    ]
    ok(run([binary, "install", "s", chart, *v1, "-n", "ns-upgraded"], env))
    first = kube.get("Deployment", "s-actuator-deployment", "ns-upgraded")
    ok(run([binary, "upgrade", "s", chart, *v2, "-n", "ns-upgraded"], env))
    ok(run([binary, "install", "s", chart, *v2, "-n", "ns-fresh"], env))
    patches = [r for r in kube.requests if r.method == "PATCH" and "/namespaces/ns-upgraded/" in r.path]
    assert patches, "the upgrade patched nothing"
    if helm.name == "helm3":
        assert {r.content_type for r in patches} == {"application/strategic-merge-patch+json"}

    def content(namespace: str) -> dict:
        out = {}
        for kind, ns, name in kube.all_objects():
            if ns == namespace and kind not in ("Secret", "ReplicaSet"):
                obj = kube.get(kind, name, ns)
                kept = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
                kept["labels"] = obj["metadata"].get("labels")
                for allocated in ("clusterIP", "clusterIPs"):  # the emulator's per-object address
                    kept.get("spec", {}).pop(allocated, None)
                out[(kind, name)] = json.loads(json.dumps(kept).replace(namespace, "NS"))  # JOB_NAMESPACE etc.
        return out

    upgraded, fresh = content("ns-upgraded"), content("ns-fresh")
    assert ("ServiceAccount", "s-supervisor") not in upgraded  # removed by the upgrade
    assert upgraded.keys() == fresh.keys()
    for key in fresh:
        assert upgraded[key] == fresh[key], key
    actuator = upgraded[("Deployment", "s-actuator-deployment")]["spec"]["template"]["spec"]
    assert actuator != json.loads(json.dumps(first["spec"]["template"]["spec"]).replace("ns-upgraded", "NS"))
    assert actuator["nodeSelector"] == {"pool": "gpu"} and actuator["serviceAccountName"] == "existing-sa"
