"""validate_manifests never crashes on an object with a part of the wrong type (issue: robust checks).

A user's own chart folder (`chart: ./mychart`) or hostile values can render `metadata: "x"`, `spec: []`,
containers that are a string, a label value that is a list, ... The schema check reports the wrong type
(with its JSON path); every other check skips the part it cannot read: no crash (the CLI would print
`helm nemo: 'list' object has no attribute 'get'`, exit 1, no file, no path) and no second, confusing
message (a volume with a broken name does not make every mount "name no volume").

The fuzz: every golden render's documents, at seeded random positions a value replaced by one of a few
values of another type. Before the fix, 290 of 3,604 such documents (seed 0, 40 per document) crashed.
"""

from __future__ import annotations

import copy
import random
import traceback

import pytest

from helm_nemo import validate as mv
from helm_nemo.validate import ManifestProblem, format_problems, validate_manifests
from helm_nemo.validate.compiled import validator_for
from helm_nemo.validate.documents import json_path

from test_manifest_validation import GOLDEN, GOLDENS, _nodes, _set, doc_of, golden_docs

REPLACEMENTS = ["x", 7, [], [1, 2], None, {"x": 1}, True]
# what the schema check (or the document check, for apiVersion/kind/metadata.name) reports
FIRST_HAND = {"schema", "document", "unknown-kind"}
KUBE_132, KUBE_134 = mv.resolve_kube_version("1.32"), mv.resolve_kube_version("1.34")


def _type(value) -> str:
    if isinstance(value, list):
        return "list of " + (type(value[0]).__name__ if value else "nothing")
    return type(value).__name__


def _kube(doc: dict) -> str:
    # resource.k8s.io/v1 (A4X Max's ResourceClaimTemplate) is a core kind from Kubernetes 1.34
    return "1.32" if validator_for(doc["apiVersion"], doc["kind"], KUBE_132) else "1.34"


def _schema_rejects(doc: dict, kube: str) -> bool:
    """jsonschema's verdict (the reference, not the fast path); a broken apiVersion/kind counts as rejected."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not (isinstance(api_version, str) and isinstance(kind, str)):
        return True
    validator = validator_for(api_version, kind, mv.resolve_kube_version(kube))
    return validator is None or not validator.slow.is_valid(doc)


def _mutations(seed: int, per_doc: int):
    """(kube version, path, new value, mutated document) for documents whose value at path changed type."""
    rnd = random.Random(seed)
    for golden in GOLDENS:
        for doc in golden_docs(str(golden.relative_to(GOLDEN))):
            kube = _kube(doc)
            nodes = list(_nodes(doc))[1:]
            for _ in range(per_doc):
                path, old = rnd.choice(nodes)
                new = rnd.choice(REPLACEMENTS)
                if _type(new) == _type(old):
                    continue
                mutated = copy.deepcopy(doc)
                _set(mutated, path, copy.deepcopy(new))
                yield kube, path, new, mutated


@pytest.mark.parametrize("seed", [0, 1])
def test_a_value_of_the_wrong_type_never_crashes_and_is_reported_once(seed):
    crashes, silent, second = [], [], []
    count = 0
    for kube, path, new, doc in _mutations(seed, per_doc=40):
        count += 1
        where = (doc.get("kind"), path, new)
        try:
            problems = validate_manifests([doc], kube_version=kube)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as err:
            crashes.append(
                (
                    *where,
                    "".join(traceback.format_exception_only(err)).strip(),
                    traceback.extract_tb(err.__traceback__)[-1][:2],
                )
            )
            continue
        if not _schema_rejects(doc, kube):
            continue  # the new value is one the schema allows (null in a CRD, a string for int-or-string, ...)
        if not any(p.check in FIRST_HAND for p in problems):
            silent.append(where)
        # the goldens are clean: any other problem comes from the one part of the wrong type, except a check
        # reading what a string says where the schema also takes a number (a quantity "x": the schema's
        # pattern and the quantity check both speak), and a check saying what is missing where the new value
        # is null (null reads as absent, as the API server drops it: `nvidia.com/gpu: null` requests no GPUs)
        others = [
            p
            for p in problems
            if p.check not in FIRST_HAND
            and not (isinstance(new, str) and p.path == json_path(path))
            and not (new is None and p.check in ("gpu-count", "fabric"))
        ]
        if others:
            second.append((*where, format_problems(others)))
    assert count > 3000
    assert not crashes, f"{len(crashes)} of {count} crashed, e.g.:\n" + "\n".join(map(str, crashes[:15]))
    assert not silent, f"{len(silent)} schema errors not reported, e.g.:\n" + "\n".join(map(str, silent[:15]))
    assert not second, f"{len(second)} second messages, e.g.:\n" + "\n".join(map(str, second[:15]))


def _jobset() -> dict:
    return doc_of("examples/a3ultra-405b.yaml", "JobSet")


def _pod_spec(doc: dict) -> dict:
    return doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


POD = "$.spec.replicatedJobs[0].template.spec.template.spec"


def _set_pod(key, value):
    def plant(doc):
        _pod_spec(doc)[key] = value

    return plant


def _set_container(key, value):
    def plant(doc):
        _pod_spec(doc)["containers"][0][key] = value

    return plant


def _set_meta(key, value):
    def plant(doc):
        doc["metadata"][key] = value

    return plant


def _set_label(key, value):
    def plant(doc):
        doc["metadata"]["labels"][key] = value

    return plant


# (id, how to break the JobSet, the JSON path the schema problem names)
CASES = [
    ("metadata-a-string", lambda d: d.__setitem__("metadata", "x"), "$.metadata"),
    ("labels-a-list", _set_meta("labels", [1]), "$.metadata.labels"),
    ("label-value-an-int", _set_label("a", 1), "$.metadata.labels.a"),
    ("annotations-a-string", _set_meta("annotations", "x"), "$.metadata.annotations"),
    ("name-an-int", _set_meta("name", 7), "$.metadata.name"),
    ("namespace-a-list", _set_meta("namespace", ["a"]), "$.metadata.namespace"),
    ("spec-a-list", lambda d: d.__setitem__("spec", []), "$.spec"),
    ("replicated-jobs-a-string", lambda d: d["spec"].__setitem__("replicatedJobs", "x"), "$.spec.replicatedJobs"),
    (
        "pod-spec-a-string",
        lambda d: d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"].__setitem__("spec", "x"),
        "$.spec.replicatedJobs[0].template.spec.template.spec",
    ),
    ("containers-a-string", _set_pod("containers", "x"), POD + ".containers"),
    ("containers-ints", _set_pod("containers", [1, 2]), POD + ".containers[0]"),
    ("init-containers-an-int", _set_pod("initContainers", 7), POD + ".initContainers"),
    ("volumes-a-string", _set_pod("volumes", "x"), POD + ".volumes"),
    ("volumes-ints", _set_pod("volumes", [1]), POD + ".volumes[0]"),
    ("node-selector-a-list", _set_pod("nodeSelector", ["a"]), POD + ".nodeSelector"),
    (
        "node-selector-value-an-int",
        lambda d: _pod_spec(d)["nodeSelector"].__setitem__("cloud.google.com/gke-accelerator", 7),
        POD + '.nodeSelector["cloud.google.com/gke-accelerator"]',
    ),
    ("host-network-a-list", _set_pod("hostNetwork", [1]), POD + ".hostNetwork"),
    ("env-a-string", _set_container("env", "x"), POD + ".containers[0].env"),
    ("env-ints", _set_container("env", [1, 2]), POD + ".containers[0].env[0]"),
    ("resources-a-string", _set_container("resources", "x"), POD + ".containers[0].resources"),
    (
        "limits-a-list",
        lambda d: _pod_spec(d)["containers"][0]["resources"].__setitem__("limits", [1]),
        POD + ".containers[0].resources.limits",
    ),
    (
        "gpu-limit-a-mapping",
        lambda d: _pod_spec(d)["containers"][0]["resources"]["limits"].__setitem__("nvidia.com/gpu", {"x": 1}),
        POD + '.containers[0].resources.limits["nvidia.com/gpu"]',
    ),
    ("volume-mounts-a-mapping", _set_container("volumeMounts", {"x": 1}), POD + ".containers[0].volumeMounts"),
    (
        "mount-name-a-mapping",
        lambda d: _pod_spec(d)["containers"][0]["volumeMounts"][0].__setitem__("name", {"x": 1}),
        POD + ".containers[0].volumeMounts[0].name",
    ),
    ("container-name-an-int", _set_container("name", 7), POD + ".containers[0].name"),
    ("ports-true", _set_container("ports", True), POD + ".containers[0].ports"),
    (
        "accelerator-label-a-list",
        _set_label("helm-nemo.dev/accelerator", [1, 2]),
        '$.metadata.labels["helm-nemo.dev/accelerator"]',
    ),
    (
        "accelerator-label-true",
        _set_label("helm-nemo.dev/accelerator", True),
        '$.metadata.labels["helm-nemo.dev/accelerator"]',
    ),
    (
        "interfaces-annotation-an-int",
        lambda d: d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"].__setitem__(
            "networking.gke.io/interfaces", 7
        ),
        '$.spec.replicatedJobs[0].template.spec.template.metadata.annotations["networking.gke.io/interfaces"]',
    ),
]


@pytest.mark.parametrize("plant, path", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_part_of_the_wrong_type_is_one_schema_problem(plant, path):
    doc = _jobset()
    plant(doc)
    problems: list[ManifestProblem] = validate_manifests([doc])
    shown = format_problems(problems)
    assert any(p.check == "schema" and p.path == path for p in problems), shown
    assert {p.check for p in problems} == {"schema"}, shown


@pytest.mark.parametrize(
    "kind",
    [
        "Pod",
        "Deployment",
        "CronJob",
        "PyTorchJob",
        "LeaderWorkerSet",
        "Service",
        "ConfigMap",
        "PersistentVolume",
        "PersistentVolumeClaim",
    ],
)
@pytest.mark.parametrize("value", REPLACEMENTS, ids=_type)
def test_every_kind_with_a_spec_or_data_of_the_wrong_type(kind, value):
    """The kinds pod_templates and the checks look into, built by hand, their spec (data) of each wrong type."""
    doc = {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "a"},
        "spec": copy.deepcopy(value),
        "data": copy.deepcopy(value),
    }
    for key in (
        "template",
        "jobTemplate",
        "replicatedJobs",
        "pytorchReplicaSpecs",
        "leaderWorkerTemplate",
        "ports",
        "capacity",
        "resources",
        "selector",
    ):
        nested = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "a"}, "spec": {key: copy.deepcopy(value)}}
        validate_manifests([nested])
    validate_manifests([doc])  # unknown kinds or schema problems, never an exception


def test_mapping_keys_that_are_not_strings_are_read_as_the_api_server_reads_them():
    """YAML `1:`, `true:`, `null:` keys reach the API server as the JSON strings "1", "true", "null"
    (sigs.k8s.io/yaml); the check reads them so too, instead of crashing on an int key (was:
    `helm nemo: 'int' object is not iterable`, exit 1)."""
    text = (
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  1: x\n  ports: [{port: 80}]\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations: {2: b, true: c}\n"
        "  labels: {null: d}\ndata:\n  3: y\n"
    )
    problems = validate_manifests(text)
    assert [(p.kind, p.path, p.message) for p in problems] == [("Service", '$.spec["1"]', "unknown field '1'")]
    config_map = mv.parse_documents(text)[0][1].data
    assert config_map["metadata"]["annotations"] == {"2": "b", "true": "c"}
    assert config_map["metadata"]["labels"] == {"null": "d"} and config_map["data"] == {"3": "y"}
