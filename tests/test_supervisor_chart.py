"""The resiliency supervisor chart on Helm 3 and 4: RBAC inside the chart, profile-driven host monitor, no empty config."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import assert_golden, render_fixture
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "supervisor"
RECIPE_VALUES = ROOT / "tests/fixtures/parity/a3ultra-resiliency-llama31-405b/supervisor/values-supervisor.yaml"
# The verbs docs/compatibility.md justifies, per resource.
DOCUMENTED_VERBS = {
    "pods": {"get", "list", "watch", "delete", "deletecollection"},
    "nodes": {"get", "list", "watch", "patch"},
    "jobsets": {"get", "list", "watch", "patch", "update", "create", "delete"},
}


def objects(text: str) -> dict:
    return {(d["kind"], d["metadata"]["name"]): d for d in YAML(typ="safe", pure=True).load_all(text) if d}


def host_monitor(out: dict) -> dict:
    (ds,) = [o for (kind, _), o in out.items() if kind == "DaemonSet"]
    return ds["spec"]["template"]["spec"]


def test_recipe_values_render_everything_with_no_empty_config(helm):
    out = objects(
        helm.template("sup", CHART, "-n", "ml", "-f", str(RECIPE_VALUES), "--set", "project=my-project").stdout
    )
    kinds = sorted(kind for kind, _ in out)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
        "Deployment",
        "Deployment",
        "Deployment",
        "Service",
        "Service",
        "Service",
        "ServiceAccount",
    ]
    data = out[("ConfigMap", "endpoint-config-sup")]["data"]
    assert all(value != "" for value in data.values()), data
    assert data["JOB_NAMESPACE"] == "default"  # the recipe file sets it; the default is the release namespace
    assert data["PROJECT"] == "my-project" and data["SENSOR_ADDRESS"] == "sup-sensor-service:60081"
    for (kind, name), obj in out.items():
        if kind not in ("ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == "ml", name


def test_rbac_is_least_privilege_and_bound_to_the_release_account(helm):
    out = objects(helm.template("sup", CHART, "-n", "ml").stdout)
    role = out[("ClusterRole", "ml-sup-supervisor")]
    granted: dict[str, set] = {}
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        for resource in rule["resources"]:
            granted.setdefault(resource, set()).update(rule["verbs"])
    assert granted == DOCUMENTED_VERBS
    binding = out[("ClusterRoleBinding", "ml-sup-supervisor")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sup-supervisor", "namespace": "ml"}]
    assert binding["roleRef"]["name"] == "ml-sup-supervisor"
    for (kind, _), obj in out.items():
        if kind in ("Deployment", "DaemonSet"):
            assert obj["spec"]["template"]["spec"]["serviceAccountName"] == "sup-supervisor"


def test_rbac_creation_optional(helm):
    out = objects(
        helm.template(
            "sup",
            CHART,
            "--set",
            "rbac.create=false",
            "--set",
            "serviceAccount.create=false",
            "--set",
            "serviceAccount.name=supervisor-sa",
        ).stdout
    )
    assert not [k for k, _ in out if k in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    assert host_monitor(out)["serviceAccountName"] == "supervisor-sa"


@pytest.mark.parametrize(
    "acc, workers, selector, extra_toleration",
    [
        ("a3high", 8, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, True),
        ("a3ultra", 8, {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}, False),
        ("a4x", 4, {"cloud.google.com/gke-accelerator": "nvidia-gb200"}, False),
    ],
)
def test_host_monitor_follows_the_accelerator_profile(helm, acc, workers, selector, extra_toleration):
    out = objects(helm.template("sup", CHART, "--set", f"accelerator={acc}").stdout)
    spec = host_monitor(out)
    assert spec["nodeSelector"] == selector
    assert f"--workers_per_host={workers}" in spec["containers"][0]["command"]
    assert ({"key": "aiinfra/gpu-healthcheck", "operator": "Exists"} in spec["tolerations"]) is extra_toleration
    assert out[("ConfigMap", "endpoint-config-sup")]["data"]["WORKERS_PER_HOST"] == str(workers)


def test_without_accelerator_the_anchor_defaults_apply(helm):
    spec = host_monitor(objects(helm.template("sup", CHART, "--set", "useA3high=yes").stdout))
    assert spec["nodeSelector"] == {"cloud.google.com/gke-gpu": "true"}
    assert "--workers_per_host=8" in spec["containers"][0]["command"]
    assert {"key": "aiinfra/gpu-healthcheck", "operator": "Exists"} in spec["tolerations"]
    assert not any(arg.startswith("--project") for arg in spec["containers"][0]["command"])


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--set", "useA3high=true"], True),  # a boolean means the same as the recipes' "yes"
        (["--set-string", "useA3high=yes", "--set", "accelerator=a3ultra"], True),
        (["--set-string", "useA3high=no", "--set", "accelerator=a3high"], False),  # explicit legacy value wins
        (["--set", "useA3high=false", "--set", "accelerator=a3high"], False),
        (["--set-string", "useA3high=", "--set", "accelerator=a3high"], True),  # empty: the profile decides
        (["--set", "accelerator=a3high"], True),
        (["--set", "accelerator=a4"], False),
    ],
)
def test_explicit_use_a3high_wins_over_the_profile(helm, args, expected):
    spec = host_monitor(objects(helm.template("sup", CHART, *args).stdout))
    healthcheck = [t for t in spec["tolerations"] if t["key"] == "aiinfra/gpu-healthcheck"]
    assert healthcheck == ([{"key": "aiinfra/gpu-healthcheck", "operator": "Exists"}] if expected else [])
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in spec["tolerations"]


def test_explicit_workers_per_host_wins(helm):
    spec = host_monitor(
        objects(helm.template("sup", CHART, "--set", "accelerator=a4x", "--set", "workers_per_host=2").stdout)
    )
    assert "--workers_per_host=2" in spec["containers"][0]["command"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--set", "accelerator=p5"], "accelerator"),
        (["--set", "accelerator=tpu"], "accelerator"),
        (
            [
                "--set",
                "rbac.extraRules[0].apiGroups={}",
                "--set",
                "rbac.extraRules[0].resources={secrets}",
                "--set",
                "rbac.extraRules[0].verbs={*}",
            ],
            "verbs",
        ),
        (["--set", "watchdogs={ecc,smart}"], "watchdogs"),
        (["--set", "actuator.port=0"], "port"),
        (["--set", "supervisor.image=x"], "supervisor"),
        (["--set-string", "useA3high=maybe"], "useA3high"),
    ],
)
def test_schema_rejects(helm, args, needle):
    result = helm.template("sup", CHART, *args, check=False)
    assert result.returncode != 0 and needle in result.stderr


# Golden snapshots: the parity fixture's own command (values-supervisor.yaml, --set project=...) and two
# variants, rendered by both helms (identical bytes) and compared with tests/golden/supervisor/<case>.yaml.
# To accept a change: UPDATE_GOLDEN=1 pytest tests/test_supervisor_chart.py, then review git diff tests/golden.
GOLDEN = ROOT / "tests" / "golden" / "supervisor"
PARITY_CASE = RECIPE_VALUES.parent
GOLDEN_CASES = {
    "parity-a3ultra-resiliency": [],
    "parity-a3ultra-resiliency-with-accelerator": ["--set", "accelerator=a3ultra"],
    "a3high-external-rbac": [
        "-n",
        "ml",
        "--set",
        "accelerator=a3high",
        "--set",
        "rbac.create=false",
        "--set",
        "serviceAccount.create=false",
        "--set",
        "serviceAccount.name=supervisor-sa",
    ],
}


def render_golden(helm, case: str) -> str:
    return render_fixture(helm, PARITY_CASE, CHART, *GOLDEN_CASES[case])


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden(helm, case):
    out = render_golden(helm, case)
    golden = GOLDEN / f"{case}.yaml"
    assert_golden(golden, out, writer=helm.name == "helm3")
