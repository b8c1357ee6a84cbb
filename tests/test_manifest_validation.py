"""Offline validation of rendered manifests (helm_nemo.validate, `helm nemo lint`).

Every golden render of every chart validates clean (a known chart defect would be listed in KNOWN and
must stay exactly as listed); so do our charts' parity renders. Each check has a planted error caught with
its check id and JSON path, so removing a check fails a test (test_every_check_has_a_planted_error
keeps the table complete). No timing asserts here: bench/validate_bench.py measures speed.
"""

from __future__ import annotations

import copy
from decimal import Decimal
import json
import random
import subprocess
from pathlib import Path

import pytest

from helm_nemo import validate as mv
from helm_nemo.actions.lint import kube_version_from_flags
from helm_nemo.validate import CHECKS, ManifestProblem, format_problems, parse_documents, validate_manifests
from helm_nemo.validate.checks.names import dns_problems
from helm_nemo.validate import compiled
from helm_nemo.validate.compiled import _Checker as Checker, validator_for
from helm_nemo.validate.quantity import parse_quantity
from helm_nemo.validate.schemas import go_regex_to_python, prepare_crd_node, prepare_crd_schema

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
GOLDENS = sorted(GOLDEN.glob("**/*.yaml"))

# Real defects of a chart, found by this validator and reported; they must be fixed in the chart (and
# the golden re-recorded), then removed here. Each entry: golden -> [(check, kind/name, path)].
# Known chart defects, listed exactly (empty: nemo-training 1.0.1 fixed the duplicate GLOO_SOCKET_IFNAME
# of the EKS profiles that this check found).
KNOWN: dict[str, list] = {}


def golden_docs(name: str) -> list[dict]:
    docs, problems = parse_documents((GOLDEN / name).read_text())
    assert not problems
    return [d.data for d in docs]


def doc_of(name: str, kind: str, index: int = 0) -> dict:
    return copy.deepcopy([d for d in golden_docs(name) if d["kind"] == kind][index])


def problems_of(doc: dict, **kwargs) -> list[ManifestProblem]:
    return validate_manifests([doc], **kwargs)


def found(problems: list[ManifestProblem]) -> set[tuple[str, str]]:
    return {(p.check, p.path) for p in problems}


# --- goldens and parity renders ------------------------------------------------------------------


@pytest.mark.parametrize("golden", GOLDENS, ids=[str(g.relative_to(GOLDEN)) for g in GOLDENS])
def test_every_golden_validates_clean(golden):
    rel = str(golden.relative_to(GOLDEN))
    # validated for the accelerator's minimum Kubernetes version where it has one (A4X Max: DRA v1, 1.34),
    # as helm nemo does (actions/lint.kube_version_for)
    from helm_nemo.generate.profiles import load_profiles

    minimums = [
        load_profiles()[acc].get("minKubernetesVersion")
        for acc in {
            d["metadata"]["labels"].get("helm-nemo.dev/accelerator")
            for d in golden_docs(rel)
            if (d.get("metadata") or {}).get("labels")
        }
        if acc
    ]
    kube = max([m for m in minimums if m] or ["1.32"], key=lambda v: tuple(int(x) for x in v.split(".")))
    problems = validate_manifests(golden.read_text(), kube_version=kube)
    got = sorted((p.check, f"{p.kind}/{p.name}", p.path) for p in problems)
    assert got == sorted(KNOWN.get(rel, [])), format_problems(problems, title=rel)


def test_goldens_cover_every_chart_folder_and_the_crds():
    assert {g.parent.name for g in GOLDENS} >= {"examples", "nemo-training", "supervisor", "gcs-fuse"}
    kinds = {d["kind"] for g in GOLDENS for d in golden_docs(str(g.relative_to(GOLDEN)))}
    assert {"JobSet", "ComputeDomain", "Job", "Deployment", "DaemonSet", "PersistentVolume"} <= kinds


def _parity_cases():
    import yaml

    return sorted(yaml.safe_load((ROOT / "tests/parity/cases.yaml").read_text()) or {})


@pytest.mark.parametrize("case", _parity_cases())
def test_parity_renders_of_our_charts_validate_clean(helm3, case):
    from test_parity import case_spec, render

    text = render(helm3, case, case_spec(case)["chart"])
    problems = validate_manifests(text)
    assert not problems, format_problems(problems, title=case)


# --- planted errors: one per check ---------------------------------------------------------------

A3ULTRA = "examples/a3ultra-405b.yaml"  # supervisor + gcs-fuse + a3ultra JobSet
P4DE = "examples/p4de-gpt3-5b.yaml"  # EKS Job with EFA
POD = ("spec", "replicatedJobs", 0, "template", "spec", "template", "spec")
JS_POD = "$.spec.replicatedJobs[0].template.spec.template.spec"
JOB_POD = "$.spec.template.spec"


def jobset() -> dict:
    return doc_of(A3ULTRA, "JobSet")


def pod(doc: dict) -> dict:
    return (
        doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        if doc["kind"] == "JobSet"
        else doc["spec"]["template"]["spec"]
    )


def efa_job() -> dict:
    job = doc_of(P4DE, "Job")
    env = pod(job)["containers"][0]["env"]
    env[:] = [e for i, e in enumerate(env) if not (e["name"] == "GLOO_SOCKET_IFNAME" and i > 20)]  # the KNOWN defect
    return job


def plant_core_typo(doc):
    pod(doc)["containers"][0]["resourcez"] = {}
    return doc


def plant_crd_typo(doc):
    doc["spec"]["replicatedJobs"][0]["templat"] = doc["spec"]["replicatedJobs"][0].pop("template")
    return doc


def plant_long_jobset(doc):
    doc["metadata"]["name"] = "x" * 50  # Job name x*50-workload-0 is 61; pod x*50-workload-0-15-abcde is 70
    return doc


def plant_long_indexed_job(doc):
    doc["metadata"]["name"] = "j" * 61  # valid Job name; hostname j*61-1 is 63; j*61-15 would be 64
    doc["spec"]["completions"] = doc["spec"]["parallelism"] = 16
    return doc


def plant_gpus(doc):
    pod(doc)["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 4
    return doc


def plant_no_efa(doc):
    for which in ("requests", "limits"):
        pod(doc)["containers"][0]["resources"][which].pop("vpc.amazonaws.com/efa")
    return doc


def plant_gib_without_nics(doc):
    pod(doc)["hostNetwork"] = False
    pod(doc).pop("dnsPolicy", None)
    return doc


def plant_duplicate_env(doc):
    env = pod(doc)["containers"][0]["env"]
    env.insert(1, copy.deepcopy(env[0]))
    return doc


def plant_duplicate_volume(doc):
    volumes = pod(doc)["volumes"]
    volumes.insert(1, copy.deepcopy(volumes[0]))
    return doc


def plant_bad_mount(doc):
    pod(doc)["containers"][0]["volumeMounts"][0]["name"] = "shared-memroy"
    return doc


def plant_bad_interfaces(doc):
    doc["spec"]["template"]["metadata"]["annotations"]["networking.gke.io/interfaces"] = (
        '[{"interfaceName":"eth0","network":"default"},]'  # the trailing-comma template bug
    )
    return doc


def plant_label(doc):
    doc["metadata"]["labels"]["team"] = "ML team"
    return doc


def plant_node_selector(doc):
    pod(doc).setdefault("nodeSelector", {})["pool"] = "gpu pool"  # issue 16: nodeSelector values were unchecked
    return doc


def plant_big_annotations(doc):
    doc["metadata"].setdefault("annotations", {})["note"] = "x" * (256 * 1024)  # 256 KiB + the key
    return doc


def plant_big_configmap(doc):
    doc["data"] = {"a": "x" * (600 * 1024), "b": "y" * (500 * 1024)}  # 1.07 MiB together
    return doc


def plant_int32(doc):
    doc["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 2**31  # format: int32 was ignored
    return doc


def plant_quantity(doc):
    doc["spec"]["resources"]["requests"]["storage"] = "lots"
    return doc


def plant_request_over_limit(doc):
    resources = pod(doc)["containers"][0]["resources"]
    resources["requests"] = {"memory": "2Gi"}
    resources["limits"]["memory"] = "1Gi"
    return doc


def plant_accelerator(doc):
    doc["metadata"]["labels"]["helm-nemo.dev/accelerator"] = "a9"
    return doc


def plant_dns_name(doc):
    doc["metadata"]["name"] = "Llama_405B"
    return doc


def plant_no_name(doc):
    del doc["metadata"]["name"]
    return doc


def plant_unknown_kind(doc):
    doc["apiVersion"], doc["kind"] = "example.com/v1", "Widget"
    return doc


def a3high_job() -> dict:
    return doc_of("examples/a3high-gpt-5b.yaml", "Job")


# (test id, base document factory, plant, check id, JSON path)
PLANTED = [
    ("core-typo", efa_job, plant_core_typo, "schema", f"{JOB_POD}.containers[0].resourcez"),
    ("crd-typo", jobset, plant_crd_typo, "schema", "$.spec.replicatedJobs[0].templat"),
    ("document", efa_job, plant_no_name, "document", "$.metadata"),
    ("unknown-kind", efa_job, plant_unknown_kind, "unknown-kind", "$.kind"),
    ("dns-name", jobset, plant_dns_name, "dns-name", "$.metadata.name"),
    ("jobset-pod-names", jobset, plant_long_jobset, "derived-name", "$.spec.replicatedJobs[0].name"),
    ("indexed-job-hostname", efa_job, plant_long_indexed_job, "derived-name", "$.metadata.name"),
    ("label", efa_job, plant_label, "label", "$.metadata.labels.team"),
    ("node-selector", jobset, plant_node_selector, "label", f"{JS_POD}.nodeSelector.pool"),
    ("annotations-size", jobset, plant_big_annotations, "size", "$.metadata.annotations"),
    ("configmap-size", lambda: doc_of(A3ULTRA, "ConfigMap"), plant_big_configmap, "size", "$"),
    ("int32", jobset, plant_int32, "schema", "$.spec.replicatedJobs[0].template.spec.parallelism"),
    (
        "quantity",
        lambda: doc_of(A3ULTRA, "PersistentVolumeClaim"),
        plant_quantity,
        "quantity",
        "$.spec.resources.requests.storage",
    ),
    ("resources", jobset, plant_request_over_limit, "resources", f"{JS_POD}.containers[0].resources.requests.memory"),
    ("gpu-count", jobset, plant_gpus, "gpu-count", f'{JS_POD}.containers[0].resources.limits["nvidia.com/gpu"]'),
    ("accelerator", jobset, plant_accelerator, "accelerator", '$.metadata.labels["helm-nemo.dev/accelerator"]'),
    ("fabric-efa", efa_job, plant_no_efa, "fabric", f"{JOB_POD}.containers[0].resources.limits"),
    ("fabric-gib", jobset, plant_gib_without_nics, "fabric", f"{JS_POD}.containers[0].env"),
    ("duplicate-env", jobset, plant_duplicate_env, "duplicate-env", f"{JS_POD}.containers[0].env[1].name"),
    ("duplicate-name", jobset, plant_duplicate_volume, "duplicate-name", f"{JS_POD}.volumes[1].name"),
    ("volume-mount", efa_job, plant_bad_mount, "volume-mount", f"{JOB_POD}.containers[0].volumeMounts[0].name"),
    (
        "interfaces-json",
        a3high_job,
        plant_bad_interfaces,
        "interfaces-json",
        '$.spec.template.metadata.annotations["networking.gke.io/interfaces"]',
    ),
]


@pytest.mark.parametrize("base, plant, check, path", [p[1:] for p in PLANTED], ids=[p[0] for p in PLANTED])
def test_planted_error_is_caught_with_its_check_and_path(base, plant, check, path):
    clean = base()
    assert problems_of(clean) == [], format_problems(problems_of(clean))
    problems = problems_of(plant(clean))
    assert (check, path) in found(problems), format_problems(problems)


def test_every_check_has_a_planted_error():
    planted = {p[3] for p in PLANTED} | {"yaml", "duplicate-object"}  # tested below
    assert planted == set(CHECKS)


def test_duplicate_objects_across_the_releases_of_a_recipe():
    from helm_nemo.validate.manifests import duplicate_objects

    pvc, pv, cm = doc_of(A3ULTRA, "PersistentVolumeClaim"), doc_of(A3ULTRA, "PersistentVolume"), jobset()
    other_ns = copy.deepcopy(pvc)
    other_ns["metadata"]["namespace"] = "elsewhere"
    elsewhere_pv = copy.deepcopy(pv)
    elsewhere_pv["metadata"]["namespace"] = "elsewhere"  # a PV has no namespace: still the same PV
    problems = duplicate_objects([("storage", [pvc, pv, cm]), ("storage-2", [pvc, other_ns, elsewhere_pv])])
    assert [(p.kind, p.check) for p in problems] == [
        ("PersistentVolumeClaim", "duplicate-object"),
        ("PersistentVolume", "duplicate-object"),
    ]
    assert "also rendered by release storage" in problems[0].message
    assert duplicate_objects([("a", [pvc]), ("b", [other_ns])]) == []


def test_not_yaml_and_not_a_mapping():
    problems = validate_manifests("---\nkind: [\n---\n- a list\n")
    assert [p.check for p in problems] == ["yaml", "yaml"]


def test_unknown_kind_is_an_error_naming_what_is_known():
    (problem,) = [p for p in problems_of(plant_unknown_kind(efa_job())) if p.check == "unknown-kind"]
    assert "example.com/v1 Widget" in problem.message and "jobset.x-k8s.io/v1alpha2 jobset" in problem.message


def test_crd_typo_names_the_field_and_suggests_the_right_one():
    problems = problems_of(plant_crd_typo(jobset()))
    (typo,) = [p for p in problems if p.path == "$.spec.replicatedJobs[0].templat"]
    assert "did you mean 'template'" in typo.message
    assert ("schema", "$.spec.replicatedJobs[0]") in found(problems)  # `template` is required


def test_all_errors_of_a_document_are_reported():
    doc = jobset()
    doc["spec"]["replicatedJobs"][0]["replicas"] = "1"
    doc["spec"]["failurePolicy"]["maxRestarts"] = "zero"
    pod(doc)["containers"][0]["image"] = 5
    pod(doc)["containers"][0]["envv"] = []
    paths = {p.path for p in problems_of(doc) if p.check == "schema"}
    assert paths == {
        "$.spec.replicatedJobs[0].replicas",
        "$.spec.failurePolicy.maxRestarts",
        f"{JS_POD}.containers[0].image",
        f"{JS_POD}.containers[0].envv",
    }


def test_crd_root_metadata_is_typed_and_unknown_root_fields_are_errors():
    doc = jobset()
    doc["metadata"]["labels"]["replicas"] = 4
    doc["metadata"]["bogus"] = 1
    doc["specs"] = {}
    assert {("schema", "$.metadata.labels.replicas"), ("schema", "$.metadata.bogus"), ("schema", "$.specs")} <= found(
        problems_of(doc)
    )


def test_null_in_a_crd_is_accepted_like_the_api_server_does():
    doc = jobset()
    pod(doc)["initContainers"] = None
    pod(doc)["nodeSelector"] = None
    assert problems_of(doc) == []


def test_computedomain_and_kueue_and_pytorchjob_schemas():
    cd = doc_of("examples/a4x-llama31-405b.yaml", "ComputeDomain")
    assert problems_of(cd) == []
    cd["spec"]["numNodez"] = 2
    assert ("schema", "$.spec.numNodez") in found(problems_of(cd))
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "a"},
        "spec": {"clusterQueue": "cq"},
    }
    assert problems_of(queue) == []
    pytorch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "x", "resourcez": {}}]}},
                }
            }
        },
    }
    assert ("schema", "$.spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resourcez") in found(
        problems_of(pytorch)
    )


def test_go_regex_patterns_are_translated():
    assert go_regex_to_python("^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$") == "(?i)^[a-z]([-a-z0-9]*[a-z0-9])?$"
    assert go_regex_to_python(r"^a\z") == r"^a\Z"
    assert go_regex_to_python(r"^[[:alpha:]]+$") == "^[a-zA-Z]+$"
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "c"},
        },
    }
    assert problems_of(check) == []  # the schema's ^(?i)… pattern compiles and matches
    check["spec"]["parameters"]["kind"] = "Bad_Kind"
    assert ("schema", "$.spec.parameters.kind") in found(problems_of(check))


def test_preserve_unknown_fields_stays_open_everything_else_is_closed():
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
            "open": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"a": {"type": "string"}},
                "additionalProperties": False,
            },
            "plain": {"type": "object", "properties": {"b": {"type": "integer"}}},
        },
    }
    out = prepare_crd_schema(schema)
    assert out["additionalProperties"] is False  # root closed too (pruning would drop the typo)
    assert "additionalProperties" not in out["properties"]["open"]
    assert out["properties"]["plain"]["additionalProperties"] is False
    assert out["properties"]["plain"]["properties"]["b"]["type"] == ["integer", "null"]


def test_kube_version_selects_the_schemas():
    assert mv.resolve_kube_version("1.32") == (1, 32)
    assert mv.resolve_kube_version("v1.32.7") == (1, 32)
    assert mv.resolve_kube_version("1.99") == mv.shipped_kube_versions()[-1]
    with pytest.raises(ValueError, match="no core schemas"):
        mv.resolve_kube_version("1.2")
    with pytest.raises(ValueError, match="not a Kubernetes version"):
        mv.resolve_kube_version("latest")
    flow = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta3",
        "kind": "FlowSchema",
        "metadata": {"name": "f"},
        "spec": {"priorityLevelConfiguration": {"name": "p"}},
    }
    assert problems_of(flow, kube_version="1.28") == []
    assert [p.check for p in problems_of(flow, kube_version="1.32")] == ["unknown-kind"]  # removed in 1.32


def test_fast_path_agrees_with_jsonschema_on_goldens_and_mutations():
    kube = mv.resolve_kube_version(mv.DEFAULT_KUBE_VERSION)
    rnd = random.Random(8)
    values = [None, True, 1, 1.5, -3, "x", "", [], {}, {"zz": 1}, ["a"], "Indexed", "9Gi"]
    docs = [d for g in GOLDENS for d in golden_docs(str(g.relative_to(GOLDEN)))]
    checked = 0
    for doc in docs:
        # resource.k8s.io/v1 (A4X Max's ResourceClaimTemplate) is a core kind from Kubernetes 1.34
        validator = validator_for(doc["apiVersion"], doc["kind"], kube) or validator_for(
            doc["apiVersion"], doc["kind"], mv.resolve_kube_version("1.34")
        )
        assert validator.fast is not None, f"{doc['kind']}: schema keyword the fast path lacks"
        nodes = list(_nodes(doc))[1:]
        for _ in range(8):
            mutated, path, node = _mutation(rnd, doc, nodes, values)
            assert validator.fast(mutated) == validator.slow.is_valid(mutated), (doc["kind"], path, node)
            checked += 1
    assert checked > 500


def test_lazy_fast_path_agrees_with_the_eager_one_and_jsonschema():
    """The validators compile a node when a value first reaches it (validator_for); compiled whole up
    front (lazy=False) every keyword must be one the fast path has, and on goldens and mutations, fed in
    one order to lazy checkers that are reused (so later documents meet half-compiled schemas), lazy,
    eager and jsonschema give one verdict."""
    kube = mv.resolve_kube_version(mv.DEFAULT_KUBE_VERSION)
    rnd = random.Random(19)
    values = [None, True, 1, 1.5, -3, "x", "", [], {}, {"zz": 1}, ["a"], "Indexed", "9Gi", "a" * 300]
    docs = [d for g in GOLDENS for d in golden_docs(str(g.relative_to(GOLDEN)))]
    lazy: dict = {}
    checked = 0
    for doc in docs:
        key = (doc["apiVersion"], doc["kind"])
        reference = validator_for(*key, kube) or validator_for(*key, mv.resolve_kube_version("1.34"))
        if key not in lazy:
            lazy[key] = Checker(reference.raw, reference.kube, reference._prepare, reference._schema_id)
            eager = Checker(reference.raw, reference.kube, reference._prepare, reference._schema_id, lazy=False)
            assert eager.fast is not None, f"{doc['kind']}: schema keyword the fast path lacks"
            lazy[key, "eager"] = eager
        nodes = list(_nodes(doc))[1:]
        for _ in range(6):
            mutated, path, node = _mutation(rnd, doc, nodes, values)
            verdict = reference.slow.is_valid(mutated)
            assert lazy[key].fast(mutated) == lazy[key, "eager"].fast(mutated) == verdict, (doc["kind"], path, node)
            checked += 1
    assert checked > 400


def test_lazy_compilation_compiles_what_the_documents_reach(monkeypatch):
    """A ConfigMap reaches a few nodes of its schema and of the shared definitions; a JobSet a part of its
    CRD (which holds every field of a PodSpec). The count of compiled nodes shows the laziness."""
    counted = []
    real = compiled._FastCompiler.compile
    monkeypatch.setattr(
        compiled._FastCompiler, "compile", lambda self, *a, **k: counted.append(self.lazy) or real(self, *a, **k)
    )
    kube = mv.resolve_kube_version(mv.DEFAULT_KUBE_VERSION)
    for kind in ("ConfigMap", "JobSet"):
        reference = validator_for(
            *{"ConfigMap": ("v1", "ConfigMap"), "JobSet": ("jobset.x-k8s.io/v1alpha2", "JobSet")}[kind], kube
        )
        counted.clear()
        checker = Checker(reference.raw, kube, reference._prepare, reference._schema_id)
        assert checker.is_valid_fast(doc_of(A3ULTRA, kind)) is True
        lazy_count = len(counted)
        counted.clear()
        Checker(reference.raw, kube, reference._prepare, reference._schema_id, lazy=False)
        assert 0 < lazy_count * 3 < len(counted), (kind, lazy_count, len(counted))


def _fast_and_slow(schema: dict):
    from jsonschema import Draft202012Validator

    from helm_nemo.schema_check import whole_string_jsonschema

    slow = whole_string_jsonschema(Draft202012Validator)(schema)
    kube = mv.resolve_kube_version(mv.DEFAULT_KUBE_VERSION)
    return Checker(schema, kube), Checker(schema, kube, lazy=False), slow


TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                "labels": {
                    "type": "object",
                    "patternProperties": {
                        "^x-": {"type": "integer"},
                        "^[a-z]+$": {"type": "string"},
                        "[0-9]": {"type": "integer"},
                    },
                    "properties": {"fixed": {"enum": ["a", "b"]}},
                    "additionalProperties": {"type": "boolean"},
                },
            },
        }
    },
    "$ref": "#/$defs/node",
}


def test_lazy_recursion_through_ref_and_pattern_properties_agree_with_jsonschema():
    """One $ref target reached at several depths (recursion), patternProperties beside properties and a
    schema-valued additionalProperties: a deep error is found only when the walk first gets there."""

    def tree(depth: int, leaf: dict) -> dict:
        return leaf if depth == 0 else {"name": "n", "children": [{"name": "m"}, tree(depth - 1, leaf)]}

    leaves = [
        {"name": "ok"},
        {"name": "Bad"},
        {"name": "ok", "extra": 1},
        {"children": []},
        {"name": "ok", "labels": {"x-a": 1, "abc": "s", "fixed": "a", "AB": True}},
        {"name": "ok", "labels": {"x-a": "1"}},
        {"name": "ok", "labels": {"abc": 1}},
        {"name": "ok", "labels": {"fixed": "c"}},
        {"name": "ok", "labels": {"fixed": 1}},
        {"name": "ok", "labels": {"AB": "s"}},
        {"name": "ok", "labels": {"x-b": 2, "x-": True}},
        {"name": "ok", "labels": {"fixed": "b", "x-1": 1, "Q": False}},
        {"name": "ok", "children": {}},
        {"name": "ok", "labels": {"a1": 1}},
        {"name": "ok", "labels": {"a1": True}},
        {"name": "ok", "labels": {"x-1": "s"}},
        {"name": "ok\n"},
    ]
    lazy, eager, slow = _fast_and_slow(TREE)
    verdicts = []
    for depth in (0, 1, 5, 30):
        for leaf in leaves:
            doc = tree(depth, copy.deepcopy(leaf))
            verdicts.append(slow.is_valid(doc))
            assert lazy.fast(doc) == eager.fast(doc) == verdicts[-1], (depth, leaf)
    assert True in verdicts and False in verdicts
    # a fresh lazy checker whose first document holds its only error deep down
    fresh, _, _ = _fast_and_slow(TREE)
    assert fresh.fast(tree(20, {"name": "ok", "labels": {"x-q": "not a number"}})) is False
    assert fresh.fast(tree(20, {"name": "ok", "labels": {"x-q": 3}})) is True


def test_a_subschema_first_reached_by_a_later_document():
    """Checkers are shared across documents: a field the first documents never had is compiled (and its
    error found, with jsonschema's message) when a later one has it."""
    reference = validator_for("jobset.x-k8s.io/v1alpha2", "JobSet", mv.resolve_kube_version(mv.DEFAULT_KUBE_VERSION))
    checker = Checker(reference.raw, reference.kube, reference._prepare, reference._schema_id)
    clean = jobset()
    assert checker.is_valid_fast(clean) is True
    late = jobset()
    pod(late)["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": [3]}]}]
            }
        }
    }
    assert checker.is_valid_fast(late) is False
    messages = [e.message for e in checker.iter_errors(late)]
    assert messages == ["3 is not of type 'string', 'null'"]
    pod(late)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]["values"] = ["3"]
    assert checker.is_valid_fast(late) is True and checker.is_valid_fast(clean) is True


def test_a_keyword_the_fast_path_lacks_hands_over_to_jsonschema_when_reached():
    schema = {
        "type": "object",
        "properties": {"plain": {"type": "string"}, "odd": {"type": "array", "uniqueItems": True}},
    }
    lazy, eager, slow = _fast_and_slow(schema)
    assert eager.fast is None  # compiled whole, the unknown keyword is found at once
    assert lazy.is_valid_fast({"plain": "x"}) is True  # not reached yet
    assert lazy.is_valid_fast({"odd": [1, 1]}) is None and lazy.fast is None  # reached: jsonschema from now on
    assert [e.message for e in lazy.iter_errors({"odd": [1, 1]})] == ["[1, 1] has non-unique elements"]
    assert list(lazy.iter_errors({"odd": [1, 2], "plain": "y"})) == []
    assert [e.message for e in lazy.iter_errors({"plain": 1})] == ["1 is not of type 'string'"]


def test_prepare_crd_schema_leaves_its_input_alone_and_the_node_version_matches():
    raw = json.loads((ROOT / "schemas/k8s/jobset.x-k8s.io/jobset_v1alpha2.json").read_text())
    before = copy.deepcopy(raw)
    whole = prepare_crd_schema(raw)
    assert raw == before and whole != raw

    def by_node(node, root=False):  # prepare_crd_node applied top-down, as the lazy fast path does
        out = dict(prepare_crd_node(node, root=root))
        for key, value in out.items():
            if key in ("properties", "patternProperties", "$defs") and isinstance(value, dict):
                out[key] = {k: by_node(v) for k, v in value.items()}
            elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
                out[key] = by_node(value)
            elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
                out[key] = [by_node(v) for v in value]
        return out

    assert by_node(raw, root=True) == whole
    assert raw == before


def _nodes(obj, path=()):
    yield path, obj
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield from _nodes(value, path + (key,))


def _mutation(rnd: random.Random, doc: dict, nodes: list, values: list) -> tuple[dict, tuple, object]:
    """A copy of `doc` with one node (from `nodes`, as _nodes lists them) replaced by one of `values`, or, half
    the time for a mapping, given an extra, a known or a misspelt key: (the copy, the path, the new node)."""
    mutated, (path, node) = copy.deepcopy(doc), rnd.choice(nodes)
    if isinstance(node, dict) and rnd.random() < 0.5:
        node = copy.deepcopy(node)
        node[rnd.choice(["extra", "name", "templat"])] = rnd.choice(values)
    else:
        node = rnd.choice(values)
    _set(mutated, path, node)
    return mutated, path, node


def _set(obj, path, value):
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


# --- the extra checks in more detail -------------------------------------------------------------


def test_quantities():
    parse = parse_quantity
    assert parse("500m") == parse("0.5") and parse("1Gi") == 2**30 and parse("1e3") == 1000 and parse(8) == 8
    # as apimachinery's ParseQuantity reads them (issue 16), quirks included: a missing number is zero on
    # its fast path (`Gi`, `-`, `.`), the API server trims white space around a field's value
    for text, value in (
        ("1.5Gi", 1.5 * 2**30),
        ("100m", 0.1),
        ("1E3", 1000),
        ("1e+3", 1000),
        ("1e-3", 0.001),
        (".5", 0.5),
        ("1.", 1),
        ("+1", 1),
        ("1.G", 10**9),
        ("Gi", 0),
        ("-", 0),
        (".", 0),
        (" 1Gi\n", 2**30),
        ("12345678901234567890", 12345678901234567890),
    ):
        assert parse(text) == Decimal(str(value)), text
    for bad in ("lots", "1 Gi", "1GB", "", "1.2.3", True, None, "1e", "1Ki3", "1ki", "１", "1_000", "0x10", "Ei"):
        assert parse(bad) is None, bad
    assert parse(" 1Gi", json=False) is None  # an annotation a driver parses is taken as written
    job = efa_job()
    pod(job)["volumes"][1]["emptyDir"]["sizeLimit"] = "250 Gi"
    pod(job)["containers"][0]["resources"]["limits"]["hugepages-2Mi"] = "-5Mi"
    paths = {p.path for p in problems_of(job) if p.check == "quantity"}
    assert paths == {
        f"{JOB_POD}.volumes[1].emptyDir.sizeLimit",
        f'{JOB_POD}.containers[0].resources.limits["hugepages-2Mi"]',
    }


def test_extended_resources_must_be_whole_and_requested_like_their_limit():
    job = efa_job()
    resources = pod(job)["containers"][0]["resources"]
    resources["requests"]["vpc.amazonaws.com/efa"] = 2
    resources["limits"]["nvidia.com/gpu"] = resources["requests"]["nvidia.com/gpu"] = "7.5"
    got = {(p.check, p.path) for p in problems_of(job) if p.check == "resources"}
    assert ("resources", f'{JOB_POD}.containers[0].resources.requests["vpc.amazonaws.com/efa"]') in got and (
        "resources",
        f'{JOB_POD}.containers[0].resources.limits["nvidia.com/gpu"]',
    ) in got


def test_gpu_count_single_node_and_no_gpus():
    job = efa_job()
    job["spec"]["parallelism"] = job["spec"]["completions"] = 1
    pod(job)["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 4
    pod(job)["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = 4
    assert [p for p in problems_of(job) if p.check == "gpu-count"] == []  # one pod may take part of a node
    pod(job)["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 16
    pod(job)["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = 16
    assert [p.check for p in problems_of(job) if p.check == "gpu-count"] == ["gpu-count"]  # never schedulable
    multi = efa_job()
    for which in ("limits", "requests"):
        pod(multi)["containers"][0]["resources"][which].pop("nvidia.com/gpu")
    (problem,) = [p for p in problems_of(multi) if p.check == "gpu-count"]
    assert "requests no GPUs" in problem.message


def test_fabric_is_data_driven_from_the_profile():
    """A profile's `fabric: {resource, perNode}` decides what a pod with fabric env must request."""
    from helm_nemo.generate.profiles import load_profiles

    profiles = copy.deepcopy(load_profiles())
    job = efa_job()
    assert problems_of(job, profiles=profiles) == []
    profiles["p4de"]["fabric"] = {"resource": "example.com/rdma", "perNode": 4}
    (problem,) = problems_of(job, profiles=profiles)
    assert problem.check == "fabric" and "example.com/rdma" in problem.message
    profiles["p4de"]["fabric"] = {"resource": "vpc.amazonaws.com/efa", "perNode": 32}  # a p5 node
    (problem,) = problems_of(job, profiles=profiles)
    assert (problem.check, problem.path) == (
        "fabric",
        f'{JOB_POD}.containers[0].resources.limits["vpc.amazonaws.com/efa"]',
    )


def test_gib_needs_every_interface_of_the_node():
    doc = plant_gib_without_nics(jobset())
    meta = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
    meta["annotations"]["networking.gke.io/interfaces"] = json.dumps(
        [{"interfaceName": f"eth{i}", "network": n} for i, n in enumerate(["default", "gvnic-1", "rdma-0"])]
    )
    (problem,) = problems_of(doc)
    assert problem.check == "fabric" and "all 10 interfaces" in problem.message


def test_interfaces_annotation_shape():
    for raw, words in (
        ('{"interfaceName":"eth0"}', "non-empty JSON list"),
        ('[{"interfaceName":"eth0"}]', "item 0"),
        ('[{"interfaceName":"eth0","network":"a"},{"interfaceName":"eth0","network":"b"}]', "twice"),
    ):
        job = a3high_job()
        job["spec"]["template"]["metadata"]["annotations"]["networking.gke.io/interfaces"] = raw
        assert any(p.check == "interfaces-json" and words in p.message for p in problems_of(job)), raw


def test_names_volume_mounts_and_duplicates_in_detail():
    job = efa_job()
    spec = pod(job)
    spec["containers"].append({"name": "workload", "image": "x"})  # same name as the first container
    spec["containers"][0]["volumeMounts"].append({"name": "shared-memory", "mountPath": "/dev/shm"})
    spec["containers"][0]["ports"] = [{"name": "very-long-port-name", "containerPort": 80}]
    job["metadata"]["namespace"] = "ML"
    got = found(problems_of(job))
    assert {
        ("duplicate-name", f"{JOB_POD}.containers[1].name"),
        ("volume-mount", f"{JOB_POD}.containers[0].volumeMounts[3].mountPath"),
        ("dns-name", f"{JOB_POD}.containers[0].ports[0].name"),
        ("dns-name", "$.metadata.namespace"),
    } <= got


def test_dns_rules():
    assert dns_problems("a" * 63, "label1123") == []
    assert dns_problems("a" * 64, "label1123")
    assert dns_problems("1abc", "label1035") and not dns_problems("1abc", "label1123")
    assert not dns_problems("a.b-c", "subdomain") and dns_problems("a..b", "subdomain")
    assert dns_problems("a/b", "path-segment") and not dns_problems("system:x", "path-segment")


def test_format_problems_groups_by_object_with_the_template():
    text = (GOLDEN / A3ULTRA).read_text().replace("nvidia.com/gpu: 8", "nvidia.com/gpu: 3")
    problems = validate_manifests(text)
    out = format_problems(problems, title="release x:")
    assert out.splitlines()[0] == "release x:"
    assert "JobSet/llama31-405b (jobset-a3ultra/templates/jobset.yaml):" in out
    assert "[gpu-count]" in out and out.splitlines()[-1] == "1 problem(s) in 1 object(s)"
    assert format_problems([]) == "no problems"


# --- CLI -----------------------------------------------------------------------------------------

ENV = {"GCS_BUCKET": "test-bucket", "KUEUE_NAME": "test-queue", "PROJECT_ID": "test-project-1"}
RECIPE = ROOT / "values/examples/a3ultra-405b.yaml"


def _invoke(args, env=ENV):
    from click.testing import CliRunner

    from helm_nemo.cli import main

    return CliRunner().invoke(main, args, env={**ENV, **env, "HELM_BIN": str(ROOT / ".tools/helm3/helm")})


def test_lint_renders_and_validates_every_release(helm3):
    result = _invoke(["lint", "--values", str(RECIPE), "-n", "ml-team", "--kube-version", "1.33"])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("ok: release") == 3 and "Kubernetes 1.33" in result.stdout


@pytest.fixture
def planted_render(monkeypatch):
    """helm template returns the golden with a planted error; helm install must never run."""
    from helm_nemo.actions import releases

    bad = (GOLDEN / A3ULTRA).read_text().replace("nvidia.com/gpu: 8", "nvidia.com/gpu: 3")
    installs = []
    monkeypatch.setattr(releases, "render", lambda plan, helm, extra: subprocess.CompletedProcess([], 0, bad, ""))
    monkeypatch.setattr(
        releases,
        "render_all",
        lambda plans, helm, extra, while_waiting=None: [subprocess.CompletedProcess([], 0, bad, "") for _ in plans],
    )
    monkeypatch.setattr(releases, "install", lambda *a, **k: installs.append(a) or 0)
    return installs


def test_lint_exits_2_and_prints_every_problem(planted_render):
    result = _invoke(["lint", "--values", str(RECIPE)])
    assert result.exit_code == 2
    assert result.stdout.count("[gpu-count]") == 3  # the planted stream, once per release


def test_template_validates_before_output_unless_skipped(planted_render):
    result = _invoke(["template", "--values", str(RECIPE)])
    assert result.exit_code == 2
    assert "[gpu-count]" in result.stderr and "--skip-manifest-validation" in result.stderr
    result = _invoke(["template", "--values", str(RECIPE), "--skip-manifest-validation"])
    assert result.exit_code == 0 and "[gpu-count]" not in result.stderr


def test_template_writes_nothing_unless_every_release_is_clean(planted_render):
    import io

    from helm_nemo.actions import releases
    from helm_nemo.values.plan import build_plans

    plans, seen = build_plans(RECIPE, ENV), []
    out = io.StringIO()
    code = releases.template(
        plans,
        None,
        [],
        out=out,
        echo=lambda m: None,
        check=lambda rendered: seen.extend(p.release for p, _ in rendered) or False,
    )
    assert code == releases.EXIT_INVALID_MANIFESTS and out.getvalue() == ""
    assert seen == [p.release for p in plans]  # every release is rendered and checked together
    assert releases.template(plans, None, [], out=out, echo=lambda m: None, check=lambda rendered: True) == 0
    assert out.getvalue().count("kind: JobSet") == 3


def test_install_validates_every_release_before_the_first_install(planted_render):
    result = _invoke(["install", "--values", str(RECIPE), "-n", "ml-team"])
    assert result.exit_code == 2 and planted_render == []
    assert "nothing was installed" in result.stderr
    result = _invoke(
        ["install", "--values", str(RECIPE), "-n", "ml-team", "--skip-manifest-validation", "--no-preflight"]
    )
    assert result.exit_code == 0 and len(planted_render) == 1


def test_kube_version_passed_to_helm_is_used_for_validation():
    assert kube_version_from_flags(["--kube-version", "1.30"]) == "1.30"
    assert kube_version_from_flags(["-n", "a", "--kube-version=1.29.1"]) == "1.29.1"
    assert kube_version_from_flags(["-n", "a"]) == mv.DEFAULT_KUBE_VERSION
