"""`helm nemo diff` and `upgrade --diff`: the real Helm 3.17.2 and 4.1.4 against the loopback API emulator
(tests/kube_emulator.py), plus the comparison and its display without helm. The emulator is an empty API
server the recipe could not run on, so installs and upgrades here pass --no-preflight (test_preflight.py
covers the checks)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helm_nemo.actions.diff import template_flags
from helm_nemo.actions.installed import global_flags
from helm_nemo.diff.objects import ObjectId, diff_manifests
from helm_nemo.diff.report import MASK, Masker, ReleaseDiff, render_json, render_text
from conftest import cluster_env
from kube_emulator import KubeEmulator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "values" / "examples"
RECIPE = EXAMPLES / "a3ultra-405b.yaml"
RECIPE_RELEASES = ["llama31-405b-supervisor", "llama31-405b-storage", "llama31-405b"]
RECIPE_ENV = {"GCS_BUCKET": "bkt-ckpt", "KUEUE_NAME": "queue-1", "PROJECT_ID": "proj-1234"}
NS = ["-n", "ml-team"]
ANSI = re.compile(r"\x1b\[")


@pytest.fixture
def env(helm, kube, tmp_path) -> dict[str, str]:
    """helm's isolated homes + KUBECONFIG of this test's emulator + the recipe's variables + HELM_BIN."""
    return {**cluster_env(helm.env, kube, tmp_path, drop=("NO_COLOR",)), **RECIPE_ENV, "HELM_BIN": str(helm.binary)}


def nemo(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helm_nemo", *args], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def diff_json(values: Path, env: dict[str, str], *extra: str) -> tuple[int, dict]:
    proc = nemo(["diff", "--values", str(values), *NS, "-o", "json", *extra], env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def copy_examples(tmp_path: Path) -> Path:
    target = tmp_path / "examples"
    shutil.copytree(EXAMPLES, target)
    return target


# ---- against the emulator, both helms -----------------------------------------------------------------


def test_release_not_installed_is_all_added(helm, kube, env):
    proc = nemo(["diff", "--values", str(RECIPE), *NS], env)
    assert proc.returncode == 1, proc.stderr
    blocks = [line for line in proc.stdout.splitlines() if line.startswith("release ")]
    assert [line.split()[1] for line in blocks] == RECIPE_RELEASES
    assert all("not installed" in line for line in blocks)
    assert not ANSI.search(proc.stdout)  # no terminal: no colours
    code, report = diff_json(RECIPE, env)
    assert code == 1 and report["changed"]
    rendered = [d for d in yaml.safe_load_all(ok(nemo(["template", "--values", str(RECIPE), *NS], env)).stdout) if d]
    objects = [o for r in report["releases"] for o in r["objects"]]
    assert {o["change"] for o in objects} == {"added"} and len(objects) == len(rendered)
    assert sorted((o["kind"], o["name"]) for o in objects) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in rendered
    )
    assert [r["installed"] for r in report["releases"]] == [False, False, False]
    assert not [r for r in kube.requests if r.method not in ("GET",)]  # diff only reads


def test_unchanged_recipe_is_exit_0_and_silent(helm, kube, env):
    ok(nemo(["install", "--no-preflight", "--values", str(RECIPE), *NS], env))
    writes = len([r for r in kube.requests if r.method != "GET"])
    proc = nemo(["diff", "--values", str(RECIPE), *NS], env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    code, report = diff_json(RECIPE, env)
    assert code == 0 and not report["changed"] and [r["installed"] for r in report["releases"]] == [True] * 3
    assert len([r for r in kube.requests if r.method != "GET"]) == writes


def test_a_changed_value_is_exactly_that_field(helm, kube, env, tmp_path):
    ok(nemo(["install", "--no-preflight", "--values", str(RECIPE), *NS], env))
    code, report = diff_json(RECIPE, {**env, "KUEUE_NAME": "queue-2"})
    changed = [(r["release"], o) for r in report["releases"] for o in r["objects"]]
    assert code == 1 and len(changed) == 1
    release, obj = changed[0]
    assert (release, obj["kind"], obj["namespace"], obj["name"], obj["change"]) == (
        "llama31-405b",
        "JobSet",
        "ml-team",
        "llama31-405b",
        "changed",
    )
    assert obj["fields"] == [
        {
            "path": '.metadata.labels["kueue.x-k8s.io/queue-name"]',
            "change": "changed",
            "old": "queue-1",
            "new": "queue-2",
        }
    ]
    assert obj["needsNewWorkload"] == []  # the JobSet's own labels change in place

    # A value in the file: NCCL_DEBUG WARN -> INFO is one env entry of the workload container.
    examples = copy_examples(tmp_path)
    recipe = examples / RECIPE.name
    recipe.write_text(recipe.read_text().replace("value: WARN", "value: INFO"))
    proc = nemo(["diff", "--values", str(recipe), *NS, "--no-color"], env)
    assert proc.returncode == 1, proc.stderr
    path = ".spec.replicatedJobs[workload].template.spec.template.spec.containers[workload].env[NCCL_DEBUG].value"
    assert proc.stdout.splitlines() == [
        "release llama31-405b in ml-team (charts/a3ultra/jobset): 1 changed",
        "~ jobset.x-k8s.io/v1alpha2 JobSet ml-team/llama31-405b",
        "    needs a new workload: JobSet.spec.replicatedJobs is immutable while it is not suspended: the JobSet "
        "admission webhook and CRD rules (helm nemo upgrade --recreate or --new-run)",
        f'    {path}: "WARN" → "INFO"',
    ]
    readme = (ROOT / "README.md").read_text().split("```console\n$ helm nemo diff ", 1)[1].split("```", 1)[0]
    assert readme.split("\n", 1)[1] == proc.stdout  # the README's example is this output


def test_a_changed_launcher_script_is_a_unified_diff(helm, kube, env, tmp_path):
    ok(nemo(["install", "--no-preflight", "--values", str(RECIPE), *NS], env))
    examples = copy_examples(tmp_path)
    launcher = examples / "launchers" / "nemo2-pretrain.sh"
    launcher.write_text(launcher.read_text().replace("set -euo pipefail", "set -euxo pipefail"))
    proc = nemo(["diff", "--values", str(examples / RECIPE.name), *NS], env)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert "~ v1 ConfigMap ml-team/llama31-405b-launcher" in lines
    assert '    .data["launch-workload.sh"]:' in lines
    assert "        --- installed" in lines and "        +++ to be sent" in lines
    assert "        -set -euo pipefail" in lines and "        +set -euxo pipefail" in lines
    code, report = diff_json(examples / RECIPE.name, env)
    (field,) = [f for r in report["releases"] for o in r["objects"] for f in o.get("fields", [])]
    assert field["path"] == '.data["launch-workload.sh"]' and "+set -euxo pipefail" in field["unified"]


def test_secrets_from_the_environment_are_masked(helm, kube, env, tmp_path):
    values = tmp_path / "train.yaml"
    values.write_text(
        (EXAMPLES / "a4-llama31-405b.yaml")
        .read_text()
        .replace(
            "      valueFrom:\n        secretKeyRef:\n          name: hf-token\n          key: token\n",
            "      value: ${HUGGING_FACE_TOKEN}\n",
        )
    )
    shutil.copytree(EXAMPLES / "launchers", tmp_path / "launchers")
    first, second = "hf_FIRSTsecretVALUE123", "hf_SECONDsecretVALUE456"
    ok(nemo(["install", "--no-preflight", "--values", str(values), *NS], {**env, "HUGGING_FACE_TOKEN": first}))
    for args in ([], ["-o", "json"]):
        proc = nemo(["diff", "--values", str(values), *NS, *args], {**env, "HUGGING_FACE_TOKEN": second})
        assert proc.returncode == 1, proc.stderr
        assert first not in proc.stdout + proc.stderr and second not in proc.stdout + proc.stderr
        assert MASK in proc.stdout
    proc = nemo(
        ["diff", "--values", str(values), *NS, "-o", "json", "--show-secrets"], {**env, "HUGGING_FACE_TOKEN": second}
    )
    (field,) = [f for r in json.loads(proc.stdout)["releases"] for o in r["objects"] for f in o["fields"]]
    assert (field["old"], field["new"]) == (first, second)
    assert field["path"].endswith(".env[HF_TOKEN].value")


def test_a_failing_cluster_call_is_exit_2_with_one_message(helm, kube, env):
    ok(nemo(["install", "--no-preflight", "--values", str(RECIPE), *NS], env))
    fault = kube.fail_next(
        "GET", "Secret", namespace="ml-team", status=500, message="etcdserver: request timed out", times=5
    )
    proc = nemo(["diff", "--values", str(RECIPE), *NS], env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "helm nemo diff: cannot read release llama31-405b-supervisor from the cluster (helm get "
        "manifest, exit 1): query: failed to query with labels: etcdserver: request timed out\n"
    )
    assert fault.fired
    kube.stop()
    proc = nemo(["diff", "--values", str(RECIPE), *NS, "-o", "json"], env)
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1
    assert re.match(
        r"helm nemo diff: cannot read release llama31-405b-supervisor .*: [Kk]ubernetes cluster unreachable",
        proc.stderr,
    )


def test_upgrade_diff_prints_the_diff_then_upgrades_keeping_the_job_timestamp(helm, kube, env):
    ok(nemo(["install", "--no-preflight", "--values", str(RECIPE), *NS], env))
    stamp = _job_timestamp(kube)
    proc = ok(
        nemo(["upgrade", "--no-preflight", "--values", str(RECIPE), *NS, "--diff"], {**env, "KUEUE_NAME": "queue-2"})
    )
    assert proc.stdout.startswith("release llama31-405b in ml-team")
    assert '"queue-1" → "queue-2"' in proc.stdout.split("\n\n")[0]
    assert "[3/3] upgrade llama31-405b" in proc.stderr
    assert kube.get("JobSet", "llama31-405b", "ml-team")["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "queue-2"
    assert _job_timestamp(kube) == stamp  # the run keeps its name
    proc = nemo(["diff", "--values", str(RECIPE), *NS], {**env, "KUEUE_NAME": "queue-2"})
    assert (proc.returncode, proc.stdout) == (0, "")


def _job_timestamp(kube: KubeEmulator) -> str:
    jobset = kube.get("JobSet", "llama31-405b", "ml-team")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (value,) = [e["value"] for c in pod["containers"] for e in c.get("env", []) if e["name"] == "JOB_TIMESTAMP"]
    return value


def test_bad_values_are_exit_2_before_any_cluster_call(helm, kube, env, tmp_path):
    examples = copy_examples(tmp_path)
    recipe = examples / RECIPE.name
    recipe.write_text(recipe.read_text().replace("gpus: 432", "gpus: 430"))
    proc = nemo(["diff", "--values", str(recipe), *NS], env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert re.search(rf"{re.escape(str(recipe))}:\d+:\d+: \$\.workload\.gpus: 430 ", proc.stderr)
    proc = nemo(["upgrade", "--no-preflight", "--values", str(recipe), *NS, "--diff"], env)
    assert proc.returncode == 2
    assert kube.requests == []


# ---- the comparison and its display (no helm) -------------------------------------------------------------


def _doc(kind="ConfigMap", name="c", api="v1", namespace="ns", **rest) -> dict:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace}, **rest}


def _dump(*docs) -> str:
    return yaml.safe_dump_all(list(docs), sort_keys=False)


def test_identity_is_api_version_kind_namespace_name():
    old = _dump(_doc("Deployment", "d", "apps/v1beta1"), _doc(namespace="a"))
    new = _dump(_doc("Deployment", "d", "apps/v1"), _doc(namespace="b"))
    changes = [(str(d.id), d.change) for d in diff_manifests(old, new)]
    assert changes == [
        ("apps/v1 Deployment ns/d", "added"),
        ("v1 ConfigMap b/c", "added"),
        ("apps/v1beta1 Deployment ns/d", "removed"),
        ("v1 ConfigMap a/c", "removed"),
    ]


def test_hooks_and_empty_manifests():
    hook = _doc(name="h")
    hook["metadata"]["annotations"] = {"helm.sh/hook": "pre-install"}
    assert diff_manifests("", _dump(hook)) == []
    assert diff_manifests("", "") == []
    assert [d.change for d in diff_manifests(_dump(_doc()), "")] == ["removed"]


def test_field_paths_and_values():
    old = _doc(
        data={"a.b/c": "1", "plain": "x", "gone": "y"},
        spec={"containers": [{"name": "w", "image": "i:1", "env": [{"name": "E", "value": "1"}]}]},
    )
    new = _doc(
        data={"a.b/c": "2", "plain": "x", "new": {"k": [1, 2]}},
        spec={
            "containers": [
                {"name": "w", "image": "i:2", "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]}
            ]
        },
    )
    (obj,) = diff_manifests(_dump(old), _dump(new))
    assert [(f.path, f.change) for f in obj.fields] == [
        ('.data["a.b/c"]', "changed"),
        (".data.gone", "removed"),
        (".data.new", "added"),
        (".spec.containers[w].image", "changed"),
        (".spec.containers[w].env[F]", "added"),
    ]
    text = render_text([ReleaseDiff("r", "chart", "ns", True, [obj])], Masker())
    assert text.splitlines() == [
        "release r in ns (chart): 1 changed",
        "~ v1 ConfigMap ns/c",
        '    .data["a.b/c"]: "1" → "2"',
        '    .data.gone: removed "y"',
        '    .data.new: added {"k": [1, 2]}',
        '    .spec.containers[w].image: "i:1" → "i:2"',
        '    .spec.containers[w].env[F]: added {"name": "F", "value": "2"}',
    ]


def test_colours_only_when_asked():
    (obj,) = diff_manifests(_dump(_doc(data={"k": "1"})), _dump(_doc(data={"k": "2"})))
    releases = [ReleaseDiff("r", "chart", None, True, [obj])]
    assert not ANSI.search(render_text(releases, Masker(), color=False))
    coloured = render_text(releases, Masker(), color=True)
    assert ANSI.search(coloured) and ANSI.sub("", re.sub(r"\x1b\[[0-9;]*m", "", coloured)) == render_text(
        releases, Masker(), color=False
    )


def test_masking_values_base64_and_rotated_secrets():
    masker = Masker(["s3cr3t-token", "1"])
    assert masker.text("Bearer s3cr3t-token here") == f"Bearer {MASK} here"
    assert masker.text("czNjcjN0LXRva2Vu") == MASK  # base64 of it, as a Secret's data holds it
    assert masker.text("1") == MASK and masker.text("10") == "10"  # a short secret only as a whole value
    old = _doc(data={"script": "#!/bin/sh\nexport HF_TOKEN=old-token-value\necho hi\n", "t": "old-token-value"})
    new = _doc(data={"script": "#!/bin/sh\nexport HF_TOKEN=s3cr3t-token\necho hi\n", "t": "s3cr3t-token"})
    (obj,) = diff_manifests(_dump(old), _dump(new))
    releases = [ReleaseDiff("r", "chart", None, True, [obj])]
    for shown in (render_text(releases, masker), render_json(releases, masker)):
        assert "old-token-value" not in shown and "s3cr3t-token" not in shown
    fields = json.loads(render_json(releases, masker))["releases"][0]["objects"][0]["fields"]
    assert fields[1] == {"path": ".data.t", "change": "changed", "old": MASK, "new": MASK}
    assert f"-export HF_TOKEN={MASK}" in fields[0]["unified"] and "+export HF_TOKEN=***" in fields[0]["unified"]
    assert "old-token-value" in render_json(releases, Masker(["s3cr3t-token"], enabled=False))


def test_flags_for_helm_get_and_for_the_render():
    extra = [
        "--namespace",
        "ns",
        "--wait",
        "--kube-context=c",
        "--timeout",
        "5m",
        "--kubeconfig",
        "/k",
        "--debug",
        "--set",
        "a=b",
        "--history-max",
        "3",
        "--reuse-values",
        "--atomic",
    ]
    assert global_flags(extra) == ["--namespace", "ns", "--kube-context=c", "--kubeconfig", "/k", "--debug"]
    assert template_flags(extra) == [
        "--namespace",
        "ns",
        "--wait",
        "--kube-context=c",
        "--timeout",
        "5m",
        "--kubeconfig",
        "/k",
        "--debug",
        "--set",
        "a=b",
        "--atomic",
    ]


def test_object_id_text():
    assert str(ObjectId("v1", "PersistentVolume", "", "pv")) == "v1 PersistentVolume pv"


def test_diff_is_in_the_help():
    from click.testing import CliRunner

    from helm_nemo.cli import main

    out = CliRunner().invoke(main, ["--help"]).stdout
    assert "diff" in out and "metrics" in out
    assert "--diff" in CliRunner().invoke(main, ["upgrade", "--help"]).stdout
    assert os.environ.get("HELM_NEMO_DEBUG") != "1"


def test_a_schema_error_does_not_print_a_secret(tmp_path, monkeypatch):
    values = tmp_path / "train.yaml"
    values.write_text(
        'accelerator: a4\nchart: jobset\nrelease: r\nworkload:\n  gpus: 8\n  image: "${REGISTRY_TOKEN} x"\n'
    )
    monkeypatch.setenv("REGISTRY_TOKEN", "tok-EXAMPLE-1234")
    from click.testing import CliRunner

    from helm_nemo.cli import main

    result = CliRunner().invoke(main, ["diff", "--values", str(values)])
    assert result.exit_code == 2 and "$.workload.image: '*** x' does not match" in result.stderr
    assert "tok-EXAMPLE-1234" not in result.stderr
