"""The generated nemo-training charts rendered by the real helm binaries: lint, golden renders of the
parity fixtures and the seed examples, rendezvous/namespace, Nsight wiring, data staging, schema."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from conftest import JOB_TIMESTAMP, assert_golden
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "nemo-training"
PARITY = ROOT / "tests" / "fixtures" / "parity"
GKE = ["a3high", "a3mega", "a3ultra", "a4", "a4x"]
GPUS_PER_NODE = {"a3high": 8, "a3mega": 8, "a3ultra": 8, "a4": 8, "a4x": 4}
PLACEHOLDERS = {
    "${GCS_BUCKET}": "test-bucket",
    "${ARTIFACT_REGISTRY}": "us-central1-docker.pkg.dev/test-project/test-registry",
    "${KUEUE_NAME}": "test-queue",
}


def chart(acc: str) -> Path:
    return ROOT / "charts" / acc / "nemo-training"


def docs(text: str) -> list[dict]:
    return [d for d in YAML(typ="safe", pure=True).load_all(text) if d]


def only(text: str, kind: str) -> dict:
    (obj,) = [d for d in docs(text) if d["kind"] == kind]
    return obj


def pod_spec(job: dict) -> dict:
    return job["spec"]["template"]["spec"]


def container(job: dict, name: str = "workload") -> dict:
    (c,) = [c for c in pod_spec(job)["containers"] if c["name"] == name]
    return c


def env_of(c: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def script(job: dict) -> str:
    return container(job)["command"][2]


def launch_words(job: dict) -> list[str]:
    """The torchrun command line of the workload script, as the shell splits it (variables unexpanded),
    with "${HYDRA_ARGS[@]}" replaced by the Hydra arguments the script receives as "$@" (the args)."""
    text = script(job)
    start = text.index("OMP_NUM_THREADS=")
    end = text.index("\n\n", start)
    words = shlex.split(text[start:end].replace("\\\n", " "), posix=True)
    i = words.index("${HYDRA_ARGS[@]}")
    return words[:i] + hydra_args(job) + words[i + 1 :]


def hydra_args(job: dict) -> list[str]:
    args = container(job).get("args") or []
    assert args[:1] == ["workload"], args  # $0 of the script
    return args[1:]


@pytest.fixture(scope="module")
def nemo_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "nemo.yaml"
    path.write_text("trainer:\n  max_steps: 50\nmodel:\n  nsys_profile:\n    enabled: false\n")
    return path


def base(nemo_config: Path) -> list[str]:
    return ["--set-file", f"nemo_config={nemo_config}"]


# --- lint ---


# --- golden renders: the parity fixtures (anchor a3mega/nemo-training-v2) and the two seed examples ---


def parity_case(name: str) -> tuple[Path, list[str]]:
    case = PARITY / "a3mega-nemo-training-llama3-70b" / name
    if not (case / "command.txt").exists():
        pytest.skip(f"parity fixture {case} not available")
    args = (case / "command.txt").read_text().split("\n")
    args = [a for a in args if a]
    assert args[-2:] == ["parity", "CHART"]
    return case, args[:-2]


def example_values(name: str, tmp_path: Path) -> tuple[Path, list[str]]:
    text = (ROOT / "values" / "examples" / f"{name}.yaml").read_text()
    for key, value in PLACEHOLDERS.items():
        text = text.replace(key, value)
    values = tmp_path / f"{name}.yaml"
    values.write_text(text)
    spec = YAML(typ="safe", pure=True).load(text)
    assert "${" not in json.dumps(spec), "a placeholder the test does not know"
    args = ["-f", str(values)]
    for key, rel in spec.get("files", {}).items():
        args += ["--set-file", f"{key}={ROOT / 'values' / 'examples' / rel}"]
    return values, args


# The seed examples are snapshotted through the whole plugin pipeline in tests/golden/examples/.
GOLDEN_CASES = ["parity-default", "parity-overrides"]


def render_golden(helm, case: str, tmp_path: Path) -> str:
    if case.startswith("parity-"):
        cwd, args = parity_case(case.split("-", 1)[1])
        return helm.template(
            "parity", chart("a3mega"), *args, "--set", f"workload.jobTimestamp={JOB_TIMESTAMP}", cwd=cwd
        ).stdout
    _, args = example_values(case, tmp_path)
    return helm.template(case, chart(case.split("-")[0]), *args).stdout


@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_golden(helm, case, tmp_path):
    out = render_golden(helm, case, tmp_path)
    golden = GOLDEN / f"{case}.yaml"
    assert_golden(golden, out, writer=helm.name == "helm3")


def test_parity_objects_match_the_anchor(helm):
    """Same objects as the anchor (ConfigMap, Job, Service, all named after the release), same rendezvous."""
    for name in ("default", "overrides"):
        cwd, args = parity_case(name)
        out = docs(helm.template("parity", chart("a3mega"), *args, cwd=cwd).stdout)
        anchor = docs((cwd / "anchor.yaml").read_text())
        assert sorted((d["kind"], d["metadata"]["name"]) for d in out) == sorted(
            (d["kind"], d["metadata"]["name"]) for d in anchor
        )
        (job,) = [d for d in out if d["kind"] == "Job"]
        (ajob,) = [d for d in anchor if d["kind"] == "Job"]
        for key in ("parallelism", "completions", "completionMode", "ttlSecondsAfterFinished"):
            assert job["spec"][key] == ajob["spec"][key], key
        env, aenv = env_of(container(job)), env_of(ajob["spec"]["template"]["spec"]["containers"][-1])
        for key in (
            "WORLD_SIZE",
            "NNODES",
            "GPUS_PER_NODE",
            "MASTER_PORT",
            "TORCH_DISTRIBUTED_TARGET",
            "EXPERIMENT_NAME",
            "EXPERIMENT_ROOT_DIR",
            "CHECKPOINTS_ROOT_DIR",
            "TOKENIZER_PATH",
            "NEMO_CONFIG_OVERRIDES",
            "GLOO_SOCKET_IFNAME",
            "NCCL_LIB_DIR",
            "NCCL_DEBUG",
            "NVTE_FWD_LAYERNORM_SM_MARGIN",
            "NVTE_BWD_LAYERNORM_SM_MARGIN",
            "MASTER_ADDR",
        ):
            assert env[key] == aenv[key], key
        assert pod_spec(job)["subdomain"] == "parity"
        mounts = {m["mountPath"] for m in container(job)["volumeMounts"]}
        amounts = {m["mountPath"] for m in ajob["spec"]["template"]["spec"]["containers"][-1]["volumeMounts"]}
        assert amounts - mounts == {"/usr/local/nvidia"}  # GKE's device plugin mounts the driver there
        for word in (
            "--config-path=/etc/workload-configuration",
            "--config-name=nemo-configuration.yaml",
            "--node_rank=${JOB_COMPLETION_INDEX}",
            "--master_addr=${MASTER_ADDR}",
            "${NEMO_CONFIG_OVERRIDES}",
        ):
            assert word in launch_words(job), word


# --- rendezvous, names, namespace ---


@pytest.mark.parametrize("acc", GKE)
def test_namespace_follows_the_release_everywhere(helm, acc, nemo_config):
    out = helm.template("train", chart(acc), "-n", "team-a", *base(nemo_config)).stdout
    objects = docs(out)
    assert {o["kind"] for o in objects} >= {"Job", "Service", "ConfigMap"}
    assert all(o["metadata"]["namespace"] == "team-a" for o in objects)
    job = only(out, "Job")
    env = env_of(container(job))
    assert env["MASTER_ADDR"] == "train-0.train.team-a.svc.cluster.local"
    assert env["RANK_0_FQDN"] == env["MASTER_ADDR"]
    assert ".default." not in out


@pytest.mark.parametrize("acc", GKE)
def test_indexed_job_headless_service_and_config_map(helm, acc, nemo_config):
    g = GPUS_PER_NODE[acc]
    out = helm.template("train", chart(acc), *base(nemo_config), "--set", f"workload.gpus={g * 3}").stdout
    job, svc, cm = only(out, "Job"), only(out, "Service"), only(out, "ConfigMap")
    assert job["metadata"]["name"] == svc["metadata"]["name"] == cm["metadata"]["name"] == "train"
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 3
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"batch.kubernetes.io/job-name": "train"}
    assert pod_spec(job)["subdomain"] == "train"
    assert cm["data"]["nemo-configuration.yaml"] == nemo_config.read_text()
    (vol,) = [v for v in pod_spec(job)["volumes"] if v.get("configMap")]
    assert vol["configMap"]["name"] == "train"
    (mount,) = [m for m in container(job)["volumeMounts"] if m["name"] == vol["name"]]
    assert mount["mountPath"] == "/etc/workload-configuration"
    env = env_of(container(job))
    assert (env["NNODES"], env["GPUS_PER_NODE"], env["WORLD_SIZE"]) == ("3", str(g), str(g * 3))
    assert env["JOB_COMPLETION_INDEX"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert container(job)["resources"]["limits"]["nvidia.com/gpu"] == g
    words = launch_words(job)
    assert words[:2] == ["OMP_NUM_THREADS=12", "${NSYS_PROFILE[@]}"]
    assert words[2] == "torchrun"


@pytest.mark.parametrize("acc", GKE)
def test_network_pieces_are_the_jobset_ones(helm, acc, nemo_config):
    """Same profile, same shared macros: plugin installer, daemon sidecar, host paths and NCCL env as the jobset chart."""
    ours = only(helm.template("train", chart(acc), *base(nemo_config)).stdout, "Job")
    js = only(helm.template("train", ROOT / "charts" / acc / "jobset").stdout, "JobSet")
    js_pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (js_wl,) = [c for c in js_pod["containers"] if c["name"] == "workload"]
    assert pod_spec(ours).get("initContainers") == js_pod.get("initContainers")
    network = lambda vols: [v for v in vols if "hostPath" in v or v.get("emptyDir") == {}]  # noqa: E731
    assert network(pod_spec(ours)["volumes"]) == network(js_pod["volumes"])
    ncclish = lambda c: [e for e in c["env"] if e["name"].startswith(("NCCL_", "LD_LIBRARY_PATH"))]  # noqa: E731
    assert ncclish(container(ours)) == ncclish(js_wl)
    assert pod_spec(ours)["tolerations"] == js_pod["tolerations"]
    assert pod_spec(ours)["nodeSelector"] == js_pod["nodeSelector"]
    assert container(ours)["resources"] == js_wl["resources"]
    # The GCS FUSE sidecar limits may differ per chart kind (gcsfuseSidecarLimitsByKind: the A3 Mega recipe charts did).
    same = lambda a: {k: v for k, v in a.items() if not k.endswith("-limit")}  # noqa: E731
    ann = ours["spec"]["template"]["metadata"]["annotations"]
    assert same(ann) == same(js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"])


def test_compute_domain_on_a4x_only(helm, nemo_config):
    out = helm.template("train", chart("a4x"), *base(nemo_config), "--set", "workload.gpus=8").stdout
    assert only(out, "ComputeDomain")["spec"]["numNodes"] == 2
    assert pod_spec(only(out, "Job"))["resourceClaims"] == [
        {"name": "compute-domain-channel", "resourceClaimTemplateName": "train"}
    ]
    assert "ComputeDomain" not in helm.template("train", chart("a4"), *base(nemo_config)).stdout


def test_deterministic_with_the_time_in_values(helm, nemo_config):
    stamped = [*base(nemo_config), "--set", "workload.jobTimestamp=2026-01-02-03-04-05"]
    first = helm.template("train", chart("a3mega"), *stamped).stdout
    assert first == helm.template("train", chart("a3mega"), *stamped).stdout
    env = env_of(container(only(first, "Job")))
    assert env["JOB_IDENTIFIER"] == "train-2026-01-02-03-04-05" and env["JOB_TIMESTAMP"] == "2026-01-02-03-04-05"
    assert env["JOB_UUID"] == {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}
    out = helm.template(
        "train",
        chart("a3mega"),
        *base(nemo_config),
        "--set",
        "workload.jobTimestamp=2026-11-22-10-00-00",
        "--set",
        "workload.jobUUID=2f2fb044-7b04-44f9-8bb1-9d0a56f8d6f0",
        "--set",
        "workload.nameSuffix=r2",
    ).stdout
    job = only(out, "Job")
    env = env_of(container(job))
    assert job["metadata"]["name"] == "train-r2"
    assert env["JOB_IDENTIFIER"] == "train-r2-2026-11-22-10-00-00"
    assert env["JOB_UUID"] == "2f2fb044-7b04-44f9-8bb1-9d0a56f8d6f0"
    assert env["MASTER_ADDR"] == "train-r2-0.train-r2.default.svc.cluster.local"


def test_queue_labels_and_leaves_suspend_to_kueue(helm, nemo_config):
    job = only(helm.template("train", chart("a3ultra"), *base(nemo_config), "--set", "queue=a3-ultra").stdout, "Job")
    # Kueue's webhook creates the queued Job suspended and owns spec.suspend (Helm 4's server-side apply of
    # a chart's suspend: true conflicts with it on upgrade: tests/test_real_cluster.py).
    assert "suspend" not in job["spec"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "a3-ultra"
    ann = job["spec"]["template"]["metadata"]["annotations"]
    assert ann["kueue.x-k8s.io/podset-preferred-topology"] == "kubernetes.io/hostname"


def test_missing_nemo_config_exits_with_a_message(helm):
    job = only(helm.template("train", chart("a4")).stdout, "Job")
    assert "--set-file nemo_config=<file>" in script(job)
    assert "exit 1" in script(job)


# --- Hydra overrides ---


def test_hydra_overrides_appended_in_order(helm, tmp_path, nemo_config):
    values = tmp_path / "v.yaml"
    values.write_text(
        "workload:\n  gpus: 16\n  image: img:1\n"
        "  nemoConfigOverrides: [trainer.val_check_interval=10, model.seed=7]\n"
        "  arguments:\n"
        "  - trainer.max_steps=100\n"
        "  - {name: model.data.data_prefix, value: '[1.0,/ssd/.cache/wikipedia/wiki]'}\n"
        "  - {name: model.optim.betas, value: [0.9, 0.95]}\n"
        "  - {name: +model.extra, value: 3}\n"
        "  - {name: ~model.dropped}\n"
        '  - model.name=say "hi"\n'
    )
    job = only(helm.template("train", chart("a3high"), "-f", str(values), *base(nemo_config)).stdout, "Job")
    words = launch_words(job)
    i = words.index("${NEMO_CONFIG_OVERRIDES}")
    assert words[i + 1 :] == [
        "trainer.max_steps=100",
        "model.data.data_prefix=[1.0,/ssd/.cache/wikipedia/wiki]",
        "model.optim.betas=[0.9,0.95]",
        "+model.extra=3",
        "~model.dropped",
        'model.name=say "hi"',
    ]
    assert words.index("--config-name=nemo-configuration.yaml") < i
    env = env_of(container(job))
    assert env["NEMO_CONFIG_OVERRIDES"] == "trainer.val_check_interval=10 model.seed=7"


def test_seed_003_set_syntax(helm, nemo_config):
    job = only(
        helm.template(
            "train",
            chart("a3mega"),
            *base(nemo_config),
            "--set",
            "workload.gpus=256",
            "--set",
            "workload.gcsBucketForDataCataPath=test-bucket",
            "--set",
            "workload.arguments={trainer.max_steps=100}",
        ).stdout,
        "Job",
    )
    assert launch_words(job)[-1] == "trainer.max_steps=100"
    assert "nsys profile" not in script(job)
    env = env_of(container(job))
    assert env["EXPERIMENT_ROOT_DIR"] == "/gcs" and env["EXPERIMENT_NAME"] == "nemo-experiments"
    (vol,) = [v for v in pod_spec(job)["volumes"] if v["name"] == "gcs-experiments"]
    assert vol["csi"]["volumeAttributes"]["bucketName"] == "test-bucket"
    assert {"name": "gcs-experiments", "mountPath": "/gcs"} in container(job)["volumeMounts"]


# --- Nsight Systems ---

NSYS_RE = re.compile(r"NSYS_PROFILE=\(nsys profile (?P<opts>[^)]*)\)")


def nsys_of(job: dict) -> dict:
    """The nsys command line with the env the chart passes (NSYS_TRACE, NSYS_EXTRA_ARGS) filled in."""
    text = script(job)
    env = env_of(container(job))
    m = NSYS_RE.search(text)
    options = None
    if m:
        options = [w.replace("${NSYS_TRACE}", env["NSYS_TRACE"]) for w in shlex.split(m.group("opts"))]
        extra = [a for a in env["NSYS_EXTRA_ARGS"].split("\n") if a]
        i = options.index("${nsys_extra_args[@]}")
        options = options[:i] + extra + options[i + 1 :]
    words = launch_words(job)
    return {
        "options": options,
        "nodes": env["NSYS_NODES"].split() if "NSYS_NODES" in env else None,
        "overrides": [w for w in words if "nsys_profile" in w],
    }


@pytest.mark.parametrize("acc", GKE)
def test_nsys_from_the_profile_block(helm, acc, nemo_config):
    g = GPUS_PER_NODE[acc]
    job = only(
        helm.template(
            "train",
            chart(acc),
            *base(nemo_config),
            "--set",
            f"workload.gpus={g * 4}",
            "--set",
            "workload.profile.enabled=true",
            "--set",
            "workload.profile.startStep=41",
            "--set",
            "workload.profile.endStep=43",
            "--set",
            f"workload.profile.ranks={{0,{g * 2 + 1}}}",
        ).stdout,
        "Job",
    )
    n = nsys_of(job)
    assert "--capture-range=cudaProfilerApi" in n["options"] and "--capture-range-end=stop" in n["options"]
    assert "--trace=cuda,nvtx" in n["options"]
    assert "--output=${nsys_output_dir}/noderank-${JOB_COMPLETION_INDEX}" in n["options"]
    assert n["nodes"] == ["0", "2"]
    assert n["overrides"] == [
        "++model.nsys_profile.enabled=true",
        "++model.nsys_profile.start_step=41",
        "++model.nsys_profile.end_step=43",
        f"++model.nsys_profile.ranks=[0,{g * 2 + 1}]",
    ]
    assert 'nsys_output_dir="${NSYS_OUTPUT_DIR:-${explicit_log_dir}}"' in script(job)
    assert env_of(container(job))["NSYS_OUTPUT_DIR"] == ""  # the log dir


def test_nsys_from_seed_003_arguments(helm, nemo_config):
    job = only(
        helm.template(
            "train",
            chart("a3mega"),
            *base(nemo_config),
            "--set",
            "workload.gpus=256",
            "--set",
            "workload.arguments={model.nsys_profile.enabled=true,model.nsys_profile.start_step=41,"
            "model.nsys_profile.end_step=43}",
        ).stdout,
        "Job",
    )
    n = nsys_of(job)
    assert n["options"] and "--capture-range=cudaProfilerApi" in n["options"]
    assert n["nodes"] == ["0"]
    # The user's overrides stay as given (last, so they win); the chart only adds what they leave out.
    assert n["overrides"] == [
        "++model.nsys_profile.ranks=[0]",
        "model.nsys_profile.enabled=true",
        "model.nsys_profile.start_step=41",
        "model.nsys_profile.end_step=43",
    ]


def test_nsys_arguments_win_over_the_block(helm, nemo_config):
    args = ["--set", "workload.gpus=16", "--set", "workload.profile.enabled=true"]
    job = only(
        helm.template(
            "train",
            chart("a3ultra"),
            *base(nemo_config),
            *args,
            "--set",
            "workload.arguments={++model.nsys_profile.enabled=false}",
        ).stdout,
        "Job",
    )
    assert nsys_of(job)["options"] is None and "nsys profile" not in script(job)
    job = only(
        helm.template(
            "train",
            chart("a3ultra"),
            *base(nemo_config),
            *args,
            "--set",
            "workload.arguments={+model.nsys_profile.ranks=[8,9]}",
            "--set",
            "workload.profile.outputDir=/logs/nsys",
            "--set",
            "workload.profile.extraArgs={--cuda-memory-usage=true}",
        ).stdout,
        "Job",
    )
    n = nsys_of(job)
    assert n["nodes"] == ["1"]
    assert n["options"][-1] == "--cuda-memory-usage=true"
    assert env_of(container(job))["NSYS_OUTPUT_DIR"] == "/logs/nsys"


def test_nsys_off_by_default_and_bad_window_fails(helm, nemo_config):
    job = only(helm.template("train", chart("a4"), *base(nemo_config)).stdout, "Job")
    assert nsys_of(job) == {"options": None, "nodes": None, "overrides": []}
    bad = helm.template(
        "train",
        chart("a4"),
        *base(nemo_config),
        "--set",
        "workload.profile.enabled=true",
        "--set",
        "workload.profile.startStep=20",
        "--set",
        "workload.profile.endStep=10",
        check=False,
    )
    assert bad.returncode != 0 and "end step 10 is before start step 20" in bad.stderr


# --- data staging and storage ---


@pytest.mark.parametrize("key", ["volumes.gcsDownload", "gcsDownload"])
def test_gcs_download_init_container(helm, key, nemo_config):
    src = "gs://nemo-megatron-demo/training-data/tokenized/bpe2gpt/wikipedia"
    job = only(
        helm.template(
            "train",
            chart("a3high"),
            *base(nemo_config),
            "--set",
            "volumes.ssdMountPath=/ssd",
            "--set",
            f"{key}.source={src}",
            "--set",
            f"{key}.target=/ssd/.cache/",
        ).stdout,
        "Job",
    )
    inits = pod_spec(job)["initContainers"]
    assert inits[0]["name"] == "training-data-downloader"  # before the network pieces and the workload
    dl = inits[0]
    assert env_of(dl) == {"GCS_DATA_SOURCE": src, "GCS_DATA_TARGET": "/ssd/.cache/"}
    assert 'gcloud storage cp --recursive "${GCS_DATA_SOURCE}" "${GCS_DATA_TARGET}"' in dl["command"][2]
    assert dl["volumeMounts"] == [{"name": "local-ssd", "mountPath": "/ssd"}]
    assert "restartPolicy" not in dl  # a real init container: training waits for it
    assert {"name": "local-ssd", "mountPath": "/ssd"} in container(job)["volumeMounts"]
    assert env_of(container(job))["SSD_MOUNT_PATH"] == "/ssd"


def test_nfs_mount(helm, nemo_config):
    job = only(
        helm.template(
            "train",
            chart("a3high"),
            *base(nemo_config),
            "--set",
            "volumes.nfsMountPath=/nfs",
            "--set",
            "volumes.nfsServer=10.1.2.3",
            "--set",
            "volumes.nfsPath=/nfsshare",
        ).stdout,
        "Job",
    )
    (vol,) = [v for v in pod_spec(job)["volumes"] if v["name"] == "nfs"]
    assert vol["nfs"] == {"server": "10.1.2.3", "path": "/nfsshare"}
    assert {"name": "nfs", "mountPath": "/nfs"} in container(job)["volumeMounts"]


TEMPLATE_FAILS = [
    (["--set", "volumes.gcsDownload.source=gs://bkt/data"], "set volumes.ssdMountPath"),
    (
        [
            "--set",
            "volumes.ssdMountPath=/ssd",
            "--set",
            "volumes.gcsDownload.source=gs://bkt/data",
            "--set",
            "volumes.gcsDownload.target=/data",
        ],
        "not under volumes.ssdMountPath",
    ),
    (["--set", "volumes.nfsMountPath=/nfs"], "needs volumes.nfsServer"),
    (["--set", "workload.gpus=16", "--set", "workload.nodes=3"], "workload.nodes=3 disagrees"),
    (["--set", "workload.gcsBucketForDataCataPath=bkt", "--set", "volumes.gcsVolumes=false"], "gcsVolumes=true"),
]


@pytest.mark.parametrize("args, needle", TEMPLATE_FAILS, ids=[t[1] for t in TEMPLATE_FAILS])
def test_template_checks(helm, args, needle, nemo_config):
    result = helm.template("train", chart("a3high"), *base(nemo_config), *args, check=False)
    assert result.returncode != 0 and needle in result.stderr, result.stderr


def test_seed_000_node_count_is_accepted(helm, nemo_config):
    job = only(
        helm.template(
            "train", chart("a3high"), *base(nemo_config), "--set", "workload.gpus=16", "--set", "workload.nodes=2"
        ).stdout,
        "Job",
    )
    assert job["spec"]["parallelism"] == 2


# --- schema: values that must be rejected by plain helm, on both binaries ---

REJECT = [
    ("a3mega", ["--set", "workload.gpus=12"], "gpus"),
    ("a4x", ["--set", "workload.gpus=6"], "gpus"),
    ("a3mega", ["--set", "worklaod.gpus=8"], "worklaod"),
    ("a3mega", ["--set", "workload.experimentName2=x"], "experimentName2"),
    ("a3mega", ["--set", "volumes.ssdMountPath=ssd"], "ssdMountPath"),
    ("a3mega", ["--set", "workload.experimentRootDir=job-logs"], "experimentRootDir"),
    ("a3mega", ["--set", "volumes.gcsDownload.source=/not/a/bucket"], "source"),
    ("a3mega", ["--set", "workload.arguments[0].name=bad name", "--set", "workload.arguments[0].value=1"], "arguments"),
    ("a3mega", ["--set", "workload.profile.ranks={-1}"], "ranks"),
    ("a3mega", ["--set", "workload.profile.extraArgs={rm -rf}"], "extraArgs"),
    ("a3mega", ["--set", "accelerator=a4"], "accelerator"),
    ("a3mega", ["--set", "chart=jobset"], "chart"),
    ("a3mega", ["--set", "network.gibVersion=img:1"], "gibVersion"),
    ("a4", ["--set", "network.pluginVersion=img:1"], "pluginVersion"),
]


@pytest.mark.parametrize("acc, args, needle", REJECT, ids=[f"{r[0]}-{r[2]}-{i}" for i, r in enumerate(REJECT)])
def test_schema_rejects(helm, acc, args, needle):
    result = helm.template("train", chart(acc), *args, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert needle in result.stderr


def test_legacy_literal_keys_are_accepted_and_ignored(helm, tmp_path, nemo_config):
    values = tmp_path / "legacy.yaml"
    # the run's time in values: the two renders may not fall in the same second
    values.write_text(
        "workload:\n  gpus: 16\n  image: img:1\n  jobTimestamp: 2026-01-01-00-00-00\n  nemoConfigOverrides[]:\n"
        "  arguments[]:\nnetwork:\n  subnetworks[]:\n"
    )
    with_legacy = helm.template("train", chart("a3mega"), "-f", str(values), *base(nemo_config)).stdout
    values.write_text("workload:\n  gpus: 16\n  image: img:1\n  jobTimestamp: 2026-01-01-00-00-00\n")
    assert with_legacy == helm.template("train", chart("a3mega"), "-f", str(values), *base(nemo_config)).stdout


def test_chart_files_and_schema(helm):
    for acc in GKE:
        schema = json.loads((chart(acc) / "values.schema.json").read_text())
        assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
        assert schema["additionalProperties"] is False
        assert schema["properties"]["accelerator"]["const"] == acc
        refs = re.findall(r'"\$ref": "([^"]+)"', json.dumps(schema))
        assert all(r.startswith("#/definitions/") and r.split("/")[-1] in schema["definitions"] for r in refs)
        text = (chart(acc) / "Chart.yaml").read_text()
        assert f'name: "nemo-training-{acc}"' in text and 'helm-nemo.dev/chart-kind: "nemo-training"' in text
        for template in (chart(acc) / "templates").iterdir():
            text = template.read_text()
            assert not re.search(r"\b(randAlphaNum|uuidv4|randAlpha|randNumeric)\b", text), template
            # The clock only as the default of workload.jobTimestamp (the run's identity).
            clocks = re.findall(r"^.*\bnow\b.*$", text, re.M)
            assert clocks == (
                []
                if template.name != "_helpers.tpl"
                else [
                    '{{- $timestamp := .Values.workload.jobTimestamp | default (now | date "2006-01-02-15-04-05") -}}'
                ]
            ), template
