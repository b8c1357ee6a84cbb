"""The semantic differ of helm_nemo/diff/semantic.py and the allowed-difference matcher, on the real anchor renders.

Each test changes an anchor in one known way and checks that the differ reports exactly that (or, for the
changes that do not count semantically, nothing). tests/test_parity.py relies on both being exact.
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import pytest

from helm_nemo.diff.semantic import Difference, index_by_kind_name, normalize, parse_manifests, semantic_diff

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures" / "parity"
CASES = sorted(str(p.parent.relative_to(FIXTURES)) for p in FIXTURES.rglob("command.txt"))

sys.path.insert(0, str(TESTS))
from test_parity import explain

WORKLOAD = "JobSet/parity .spec.replicatedJobs[workload].template.spec.template.spec"


def anchor(case: str, name: str = "anchor-normalized.yaml") -> list[dict]:
    return parse_manifests((FIXTURES / case / name).read_text())


def obj(docs: list[dict], kind: str) -> dict:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def pod_spec(docs: list[dict]) -> dict:
    return obj(docs, "JobSet")["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def container(docs: list[dict], name: str = "workload") -> dict:
    (found,) = [c for c in pod_spec(docs)["containers"] if c["name"] == name]
    return found


def env(docs: list[dict], name: str) -> dict:
    (found,) = [e for e in container(docs)["env"] if e["name"] == name]
    return found


A3MEGA = "a3mega-jobset-gpt3-175b"
A4X = "a4x-jobset-llama31-405b"
NEMO = "a3mega-nemo-training-llama3-70b/default"


# --- parsing ---------------------------------------------------------------------------------------


def test_every_case_of_the_shared_readme_is_here():
    assert len(CASES) == 12
    for case in CASES:
        for name in ("anchor.yaml", "anchor-normalized.yaml", "source.txt"):
            assert (FIXTURES / case / name).is_file(), (case, name)


def test_parse_drops_empty_and_comment_only_documents():
    text = "---\n# Source: chart/templates/a.yaml\n---\n\n---\nkind: ConfigMap\nmetadata:\n  name: a\n---\n"
    assert parse_manifests(text) == [{"kind": "ConfigMap", "metadata": {"name": "a"}}]


def test_parse_raw_render_gives_the_objects_of_the_readme_table():
    keys = sorted(index_by_kind_name(anchor(A4X, "anchor.yaml")))  # raw helm output, with `# Source:` lines
    assert re.fullmatch(r"ComputeDomain/parity-[a-z0-9]{4}", keys[0])  # the random suffix (anchor quirk 1)
    assert keys[1:] == ["ConfigMap/parity-config", "ConfigMap/parity-launcher", "JobSet/parity", "Service/parity"]
    assert sorted(index_by_kind_name(anchor(A4X)))[0] == "ComputeDomain/parity"  # masked by the normaliser


def test_parse_rejects_a_duplicated_key():
    # anchor quirk 5 (a second nodeSelectorTerms key): a reader keeping the last key would hide a term
    with pytest.raises(Exception, match="(?i)duplicate"):
        parse_manifests("kind: Pod\nspec:\n  a: 1\n  a: 2\n")


def test_index_keeps_a_second_object_of_the_same_kind_and_name():
    docs = anchor(A3MEGA)
    index = index_by_kind_name(docs + [copy.deepcopy(obj(docs, "JobSet"))])
    assert {"JobSet/parity", "JobSet/parity#2"} <= set(index)
    (diff,) = semantic_diff(docs, docs + [copy.deepcopy(obj(docs, "JobSet"))])
    assert (diff.path, diff.change) == ("JobSet/parity#2", "added")


# --- no difference --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_anchor_against_itself_has_no_difference(case):
    assert semantic_diff(anchor(case), anchor(case)) == []


@pytest.mark.parametrize("case", [c for c in CASES if "supervisor" in c or "gcs-fuse" in c])
def test_raw_render_equals_its_normalised_form(case):
    # deterministic charts: the normaliser only re-orders keys and documents and re-styles strings
    assert semantic_diff(anchor(case), anchor(case, "anchor.yaml")) == []


def test_reordered_named_lists_and_tolerations_are_equal():
    ours = anchor(A3MEGA)
    list.reverse(obj(ours, "JobSet")["spec"]["replicatedJobs"])  # one item, still exercised
    spec = pod_spec(ours)
    for key in ("containers", "initContainers", "volumes", "tolerations"):
        spec[key].reverse()
    for c in spec["containers"]:
        for key in ("env", "volumeMounts"):
            (c.get(key) or []).reverse()
    assert semantic_diff(anchor(A3MEGA), ours) == []


def test_null_is_absent():
    ours = anchor(NEMO)
    job = obj(ours, "Job")
    assert "labels" in job["metadata"] and job["metadata"]["labels"] is None  # the anchor's empty key
    del job["metadata"]["labels"]
    job["spec"]["template"]["spec"]["nodeSelector"] = None
    assert semantic_diff(anchor(NEMO), ours) == []


def test_blank_lines_and_trailing_spaces_in_scripts_do_not_count():
    ours = anchor(A3MEGA)
    command = container(ours)["command"]
    command[2] = "\n\n" + "\n".join(line + "  " for line in command[2].split("\n")) + "\n\n"
    config = next(d for d in ours if d["kind"] == "ConfigMap" and "launcher" in d["metadata"]["name"])
    (key,) = config["data"]
    config["data"][key] = config["data"][key].strip("\n")  # `|-` + nindent's leading empty line gone
    workload_config = next(d for d in ours if d["metadata"]["name"] == "parity-config")["data"]
    assert workload_config["workload-configuration"] == "\n# placeholder workload config"
    workload_config["workload-configuration"] = "# placeholder workload config"  # one line, no newline at all
    assert semantic_diff(anchor(A3MEGA), ours) == []
    workload_config["workload-configuration"] = "# another config"
    assert semantic_diff(anchor(A3MEGA), ours) == [
        Difference(
            "ConfigMap/parity-config .data.workload-configuration", "removed", expected="# placeholder workload config"
        ),
        Difference("ConfigMap/parity-config .data.workload-configuration", "added", actual="# another config"),
    ]


# --- exactly the change made ----------------------------------------------------------------------


def test_one_env_value_changed_is_one_difference_with_a_readable_path():
    ours = anchor(A3MEGA)
    env(ours, "NCCL_DEBUG")["value"] = "WARN"
    assert semantic_diff(anchor(A3MEGA), ours) == [
        Difference(f"{WORKLOAD}.containers[workload].env[NCCL_DEBUG].value", "changed", "VERSION", "WARN")
    ]


def test_env_removed_and_duplicated():
    ours = anchor(A3MEGA)
    entries = container(ours)["env"]
    entries.remove(env(ours, "NCCL_DEBUG"))
    entries.append({"name": "JOB_COMPLETION_INDEX", "value": "0"})  # a second entry of an existing name
    diffs = semantic_diff(anchor(A3MEGA), ours)
    assert [(d.path, d.change) for d in diffs] == [
        (f"{WORKLOAD}.containers[workload].env[NCCL_DEBUG]", "removed"),
        (f"{WORKLOAD}.containers[workload].env[JOB_COMPLETION_INDEX#2]", "added"),
    ]
    assert diffs[0].expected == {"name": "NCCL_DEBUG", "value": "VERSION"}


def test_toleration_is_keyed_by_key_and_effect():
    ours = anchor(A3MEGA)
    (gpu,) = [t for t in pod_spec(ours)["tolerations"] if t["key"] == "nvidia.com/gpu"]
    gpu["operator"] = "Equal"
    assert semantic_diff(anchor(A3MEGA), ours) == [
        Difference(f"{WORKLOAD}.tolerations[nvidia.com/gpu:].operator", "changed", "Exists", "Equal")
    ]


def test_extra_and_missing_objects_are_one_difference_each():
    ours = anchor(A4X)
    ours.remove(obj(ours, "Service"))
    extra = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "parity"}}
    ours.append(extra)
    diffs = semantic_diff(anchor(A4X), ours)
    assert [(d.path, d.change) for d in diffs] == [("Service/parity", "removed"), ("ServiceAccount/parity", "added")]
    assert diffs[1].actual == extra
    assert diffs[0].expected == obj(anchor(A4X), "Service")  # shown as plain data, not the comparison form


def test_changed_script_line_is_reported_as_that_line_only():
    ours = anchor(A3MEGA)
    command = container(ours)["command"]
    lines = command[2].split("\n")
    (i,) = [n for n, line in enumerate(lines) if line.strip() == "sleep 10"]
    lines[i] = lines[i].replace("sleep 10", "sleep 20")
    command[2] = "\n".join(lines)
    diffs = semantic_diff(anchor(A3MEGA), ours)
    path = f"{WORKLOAD}.containers[workload].command[2]"
    # one changed line = the old line removed + the new one added, at the script's path, so that an allowed
    # entry can match the line text (`value`) on either side
    assert diffs == [Difference(path, "removed", expected="sleep 10"), Difference(path, "added", actual="sleep 20")]


def test_positional_list_and_type_change():
    ours = anchor(A3MEGA)
    container(ours)["command"][0] = "sh"
    obj(ours, "JobSet")["spec"]["replicatedJobs"][0]["replicas"] = "1"
    diffs = {d.path: d for d in semantic_diff(anchor(A3MEGA), ours)}
    assert diffs[f"{WORKLOAD}.containers[workload].command[0]"].change == "changed"
    assert diffs["JobSet/parity .spec.replicatedJobs[workload].replicas"] == Difference(
        "JobSet/parity .spec.replicatedJobs[workload].replicas", "changed", 1, "1"
    )
    assert len(diffs) == 2


def test_normalize_is_plain_data_and_does_not_touch_its_input():
    docs = anchor(NEMO)
    before = copy.deepcopy(docs)
    normalize(docs[0])
    assert docs == before


# --- allowed differences --------------------------------------------------------------------------


LABEL = Difference("JobSet/parity .metadata.labels", "added", actual={"app.kubernetes.io/name": "jobset"})
SCRIPT = Difference(f"{WORKLOAD}.containers[workload].command[2]", "added", actual="export NCCL_DEBUG=INFO")


def entry(id_, path, change="any", cases=("a3mega-*",), **extra):
    return {"id": id_, "cases": list(cases), "path": path, "change": change, "reason": "test", **extra}


def test_explain_covers_a_difference_with_a_matching_entry():
    entries = [entry("labels-added", r"\.metadata\.labels(\.|$)", "added")]
    assert explain([LABEL], entries, A3MEGA) == ([], [])


def test_explain_reports_an_unused_entry_and_an_unexplained_difference():
    entries = [entry("labels-added", r"\.metadata\.labels(\.|$)", "added"), entry("stale", r"\.spec\.gone$", "removed")]
    assert explain([LABEL, SCRIPT], entries, A3MEGA) == ([SCRIPT], ["stale"])


def test_explain_honours_case_globs_change_and_value():
    wrong_case = entry("other", r"\.metadata\.labels", cases=("a4x-*",))
    wrong_change = entry("removed-only", r"\.metadata\.labels", "removed")
    assert explain([LABEL], [wrong_case, wrong_change], A3MEGA) == ([LABEL], ["removed-only"])
    by_value = entry("nccl-debug-export", r"\.command\[2\]$", "added", value=r"^export NCCL_DEBUG=INFO$")
    other_value = entry("other-line", r"\.command\[2\]$", "added", value=r"^export NCCL_ALGO=")
    assert explain([SCRIPT], [by_value, other_value], A3MEGA) == ([], ["other-line"])
