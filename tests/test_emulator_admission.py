"""The emulator refuses updates of Jobs and JobSets as the real cluster does (issue 26), over HTTP, with the
real answer's shape: 422, reason Invalid, `<Kind>.<group> "<name>" is invalid: <field>: Invalid value: …: field is
immutable`, the JobSet's wrapped as its webhook's denial; and what the real cluster takes, it takes. The
product's own rules (helm_nemo/diff/admission.py, written separately) must decide every case the same way."""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request

import pytest

from helm_nemo.diff.admission import refusals

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


def jobset(image="img:1", parallelism=2, labels=None, suspend=None, node_selector=None):
    pod = {
        "metadata": {"labels": labels or {"app": "x"}},
        "spec": {"nodeSelector": node_selector or {"pool": "a"}, "containers": [{"name": "w", "image": image}]},
    }
    spec = {
        "replicatedJobs": [
            {
                "name": "workload",
                "replicas": 1,
                "template": {
                    "spec": {
                        "parallelism": parallelism,
                        "completions": parallelism,
                        "completionMode": "Indexed",
                        "template": pod,
                    }
                },
            }
        ]
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": spec,
    }


def job(image="img:1", completions=1, parallelism=1, mode=None, suspend=None, node_selector=None):
    spec = {
        "completions": completions,
        "parallelism": parallelism,
        "template": {
            "spec": {
                "nodeSelector": node_selector or {"pool": "a"},
                "containers": [{"name": "w", "image": image}],
                "restartPolicy": "Never",
            }
        },
    }
    if mode:
        spec["completionMode"] = mode
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"}, "spec": spec}


def put(kube, path: str, obj: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        kube.url + path,
        data=json.dumps(obj).encode(),
        method="PUT",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {kube.token}"},
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# (case id, old, new, refused field or None). `old` is also the live object (its status is not set: never started)
CASES = [
    ("jobset-image", jobset(), jobset(image="img:2"), "spec.replicatedJobs"),
    ("jobset-node-count", jobset(), jobset(parallelism=3), "spec.replicatedJobs"),
    ("jobset-pod-labels-running", jobset(), jobset(labels={"app": "y"}), "spec.replicatedJobs"),
    ("jobset-pod-labels-suspended", jobset(suspend=True), jobset(suspend=True, labels={"app": "y"}), None),
    ("jobset-node-selector-suspended", jobset(suspend=True), jobset(suspend=True, node_selector={"pool": "b"}), None),
    ("jobset-image-suspended", jobset(suspend=True), jobset(suspend=True, image="img:2"), "spec.replicatedJobs"),
    ("jobset-suspend-only", jobset(), jobset(suspend=True), None),
    ("job-image", job(), job(image="img:2"), "spec.template"),
    ("job-parallelism", job(), job(parallelism=3), None),
    ("job-completions", job(), job(completions=3), "spec.completions"),
    ("job-indexed-tandem", job(mode="Indexed"), job(mode="Indexed", completions=3, parallelism=3), None),
    ("job-node-selector-never-started", job(suspend=True), job(suspend=True, node_selector={"pool": "b"}), None),
    ("job-image-never-started", job(suspend=True), job(suspend=True, image="img:2"), "spec.template"),
]


@pytest.mark.parametrize("case, old, new, refused", CASES, ids=[c[0] for c in CASES])
def test_the_emulator_answers_updates_as_the_real_cluster(kube, case, old, new, refused):
    kube.put(copy.deepcopy(old))
    kind_path = JOBSETS if old["kind"] == "JobSet" else JOBS
    name = old["metadata"]["name"]
    stored = kube.get(old["kind"], name, "default")
    code, answer = put(kube, f"{kind_path}/{name}", new)
    if refused is None:
        assert code == 200, answer
        return
    assert (code, answer["kind"], answer["status"], answer["reason"], answer["code"]) == (
        422,
        "Status",
        "Failure",
        "Invalid",
        422,
    )
    if old["kind"] == "JobSet":
        prefix = 'admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "r" is invalid: '
    else:
        prefix = 'Job.batch "j" is invalid: '
    assert answer["message"].startswith(prefix + f"{refused}: Invalid value: "), answer["message"]
    assert answer["message"].endswith("field is immutable") or "in tandem" in answer["message"]
    assert [c["field"] for c in answer["details"]["causes"]] == [refused]
    assert kube.get(old["kind"], name, "default") == stored  # refused: nothing changed


@pytest.mark.parametrize("case, old, new, refused", CASES, ids=[c[0] for c in CASES])
def test_helm_nemo_decides_every_case_as_the_emulator(case, old, new, refused):
    """Given the live object (here: the old one, never started), the product's rules name the same field."""
    assert [r.path for r in refusals(old, new, live=old)] == ([refused] if refused else [])


@pytest.mark.parametrize(
    "kind, name, labels, field",
    [
        ("ConfigMap", "Bad_Name", {}, "metadata.name"),
        ("ConfigMap", "a" * 254, {}, "metadata.name"),
        ("Service", "a" * 64, {}, "metadata.name"),
        ("Service", "a.b", {}, "metadata.name"),
        ("ConfigMap", "ok", {"team": "x" * 64}, "metadata.labels"),
        ("ConfigMap", "ok", {"team": "-x"}, "metadata.labels"),
        ("ConfigMap", "ok", {"k" * 64: "v"}, "metadata.labels"),
    ],
    ids=["underscore", "254-chars", "service-64", "service-dot", "label-value-64", "label-value-dash", "label-key-64"],
)
def test_the_emulator_refuses_bad_names_and_labels_as_the_api_server(kube, kind, name, labels, field):
    api = {"ConfigMap": "configmaps", "Service": "services"}[kind]
    body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "labels": labels}}
    request = urllib.request.Request(
        f"{kube.url}/api/v1/namespaces/default/{api}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {kube.token}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    answer = json.loads(refused.value.read())
    assert (refused.value.code, answer["reason"]) == (422, "Invalid")
    assert answer["message"].startswith(f'{kind} "{name}" is invalid: {field}: Invalid value: ')
    assert kube.objects(kind, "default") == []


def test_good_names_and_labels_are_taken(kube):
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "a.b-c",
                "namespace": "default",
                "labels": {"app.kubernetes.io/name": "x_y.z", "empty": ""},
            },
        }
    )
    assert kube.names("ConfigMap", "default") == ["a.b-c"]
