"""Issue 27, hardening: each finding of the hostile catalogue as a class, not as its one example.
The catalogue (tests/test_bad_input_catalogue.py, "issue 27: hardening") drives each example through the
CLI; these tests walk every schema, every tag and every release instead.

- every integer and number a values schema accepts is bounded, every object is closed (or is the one
  documented open object, Helm's `global`), every array says what its items are: over the compiled
  values.schema.json of every generated chart and the slurm: section's schema;
- a field's bound holds where the field is: a value past it is reported at that field's path;
- every explicit YAML tag but the core ones is refused with file:line, on any kind of node;
- a NUL reaches no string; a pod env name is scoped to its release.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from helm_nemo.user_errors import UserError
from helm_nemo.values.helm_yaml import ALLOWED_TAGS
from helm_nemo.values.load import load_values_text
from helm_nemo.values.plan import build_plans
from helm_nemo.values.validation import validate

ROOT = Path(__file__).resolve().parent.parent
CHART_SCHEMAS = sorted(ROOT.glob("charts/**/values.schema.json"))
VALUE_SCHEMAS = CHART_SCHEMAS + [ROOT / "schemas/slurm.schema.json"]
INT32_MAX = 2**31 - 1
EXACT = 2**53 - 1  # helm reads every number of the values as a float64
OPEN = "x-helm-nemo-open"


def _types(node: dict) -> set:
    kind = node.get("type")
    return set(kind if isinstance(kind, list) else [kind] if kind else [])


def _nodes(node, path=""):
    """Every schema node (a dict) with its JSON pointer."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                yield from _nodes(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _nodes(value, f"{path}/{index}")


def _value_schemas(node, path="", constraint=False):
    """The nodes that describe a value (not keyword containers like `properties` itself), and whether the node
    only narrows a typed parent (an anyOf option such as `{"maximum": 8}`)."""
    if not isinstance(node, dict):
        return
    yield path, node, constraint
    for key, child in (node.get("properties") or {}).items():
        yield from _value_schemas(child, f"{path}/properties/{key}")
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            yield from _value_schemas(node[key], f"{path}/{key}")
    for key in ("anyOf", "oneOf", "allOf"):
        for index, child in enumerate(node.get(key) or []):
            yield from _value_schemas(child, f"{path}/{key}/{index}", bool(_types(node)))
    for name, child in (node.get("definitions") or {}).items():
        yield from _value_schemas(child, f"/definitions/{name}")


@pytest.mark.parametrize("schema_file", VALUE_SCHEMAS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_number_is_bounded_every_object_closed_every_array_typed(schema_file):
    schema = json.loads(schema_file.read_text())
    problems = []
    for path, node, constraint in _value_schemas(schema):
        kinds = _types(node)
        if kinds & {"integer", "number"}:
            low, high = node.get("minimum"), node.get("maximum")
            if low is None or high is None:
                problems.append(f"{path}: {sorted(kinds)} without minimum and maximum")
            elif not (-EXACT - 1 <= low and high <= EXACT):
                problems.append(f"{path}: bounds {low}..{high} beyond what helm's float64 holds exactly")
        closed = node.get("additionalProperties") is False or isinstance(node.get("additionalProperties"), dict)
        if ("object" in kinds or "properties" in node) and not closed:
            if not node.get(OPEN) or path != "/properties/global":
                problems.append(
                    f"{path}: an object that takes any key (additionalProperties false, a typed map, "
                    f"or the Kubernetes type's schema)"
                )
        if "array" in kinds and not isinstance(node.get("items"), dict):
            problems.append(f"{path}: an array whose items can be anything")
        if not (kinds or {"$ref", "const", "enum", "anyOf", "oneOf", "allOf"} & set(node)) and path and not constraint:
            problems.append(f"{path}: no type: any value, objects with any keys included")
    assert not problems, f"{schema_file}:\n" + "\n".join(problems)


def test_only_global_is_open_and_it_says_why():
    for schema_file in CHART_SCHEMAS:
        schema = json.loads(schema_file.read_text())
        opened = [path for path, node in _nodes(schema) if isinstance(node, dict) and OPEN in node]
        assert opened == ["/properties/global"], schema_file
        assert "parent chart" in schema["properties"]["global"][OPEN]


def test_fields_landing_in_kubernetes_int32_fields_fit_int32():
    """replicas/parallelism/completions come from workload.gpus (and nodes); ports, backoffLimit, restarts,
    ttlSecondsAfterFinished are int32 in Kubernetes: each maximum fits."""
    for schema_file in CHART_SCHEMAS:
        schema = json.loads(schema_file.read_text())
        props = schema["properties"]
        workload = (props.get("workload") or {}).get("properties", {})
        for name in ("gpus", "nodes", "backoffLimit", "ttlSecondsAfterFinished", "max_workload_restarts", "masterPort"):
            if name in workload:
                assert workload[name]["maximum"] <= INT32_MAX, (schema_file, name)
        for name in ("port",):
            for component in ("actuator", "sensor", "controller", "host_daemon"):
                if component in props:
                    definition = schema["definitions"]["component"]["properties"][name]
                    assert definition["maximum"] <= 65535


def _integer_fields(schema: dict, node: dict, where: tuple = ()):
    """Paths (through `properties` and `$ref`s, not lists) of every integer field of a schema."""
    while "$ref" in node:
        node = {
            **schema["definitions"][node["$ref"].rsplit("/", 1)[-1]],
            **{k: v for k, v in node.items() if k != "$ref"},
        }
    if "integer" in _types(node):
        yield where, node
    for key, child in (node.get("properties") or {}).items():
        yield from _integer_fields(schema, child, where + (key,))


def _set(data: dict, where: tuple, value) -> dict:
    node = data
    for key in where[:-1]:
        node = node.setdefault(key, {}) if isinstance(node.get(key), dict) or key not in node else node[key]
    node[where[-1]] = value
    return data


@pytest.mark.parametrize("schema_file", CHART_SCHEMAS, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.parametrize("value", [2**63, 2**64 - 1, -(2**63), 2**31])
def test_an_integer_past_its_bound_is_reported_at_its_own_path(schema_file, value):
    schema = json.loads(schema_file.read_text())
    fields = list(_integer_fields(schema, schema))
    assert fields or "fsx-lustre" in str(schema_file) or "gcs-fuse" in str(schema_file)
    for where, node in fields:
        if node["minimum"] <= value <= node["maximum"]:
            continue
        data = _set({"workload": {"gpus": 8, "image": "i"}} if "workload" in schema["properties"] else {}, where, value)
        found = [p.json_path for p in validate(data, schema)]
        wanted = "$." + ".".join(where)
        assert wanted in found, (schema_file, where, found)


# --- tags: every tag but the core ones, on every kind of node, is an error at its line ---------------------

TAG_NAMES = st.one_of(
    st.sampled_from(
        [
            "!!python/object:os.system",
            "!!python/object/apply:os.system",
            "!!python/name:os.system",
            "!!binary",
            "!!timestamp",
            "!!set",
            "!!omap",
            "!!pairs",
            "!!merge",
            "!!value",
            "!!yaml",
            "!",
            "!foo",
            "!<tag:example.com,2026:x>",
            "!<tag:yaml.org,2002:python/none>",
        ]
    ),
    st.from_regex(r"!![a-z][a-z/:._]{0,12}", fullmatch=True).filter(
        lambda t: "tag:yaml.org,2002:" + t[2:] not in ALLOWED_TAGS
    ),
    st.from_regex(r"![a-z][a-z0-9_]{0,10}", fullmatch=True),
)
NODES = {"scalar": "x", "quoted": "'x'", "mapping": "{a: 1}", "sequence": "[1, 2]", "empty": ""}


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(tag=TAG_NAMES, kind=st.sampled_from(sorted(NODES)), depth=st.integers(0, 3))
def test_every_non_core_tag_is_refused_with_its_line(tag, kind, depth):
    if tag in ("!!set", "!!omap", "!!pairs") and kind in ("scalar", "quoted"):
        kind = "mapping"  # these tags need a collection to parse at all
    lines = ["release: r1"] + [("  " * i) + f"k{i}:" for i in range(depth)]
    lines.append("  " * depth + f"leaf: {tag} {NODES[kind]}".rstrip())
    text = "\n".join(lines) + "\n"
    with pytest.raises(UserError) as raised:
        load_values_text(text, "v.yaml")
    problem = raised.value.problems[0]
    assert problem.line is not None and problem.column is not None, problem.format()
    shown = tag if not tag.startswith("!<") else ""
    assert "is not allowed in values" in problem.message or "invalid YAML" in problem.message, problem.format()
    if "is not allowed" in problem.message:
        assert problem.line == depth + 2 and shown in problem.message + tag, problem.format()


@pytest.mark.parametrize("tag", sorted(ALLOWED_TAGS))
def test_core_tags_stay_allowed(tag):
    value = {"str": "x", "int": "8", "float": "1.5", "bool": "true", "null": "~", "map": "{a: 1}", "seq": "[1]"}[
        tag.rsplit(":", 1)[-1]
    ]
    load_values_text(f"release: r1\nleaf: !<{tag}> {value}\n", "v.yaml")


@pytest.mark.parametrize("merge", ["5", "text", "[1, 2]", "[*m, 3]", "[]", "null"])
def test_a_merge_key_takes_mappings_only(merge):
    with pytest.raises(UserError) as raised:
        load_values_text(f"m: &m {{a: 1}}\nn:\n  <<: {merge}\n  b: 2\n", "v.yaml")
    problem = raised.value.problems[0]
    assert (problem.line, problem.json_path) == (3, "$.n['<<']") and "merge key" in problem.message


# --- NUL: no string carries one, wherever it is written ---------------------------------------------------


@settings(max_examples=100, deadline=None, database=None)
@given(
    before=st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=8),
    escape=st.sampled_from(["\\0", "\\x00", "\\u0000", "\\U00000000"]),
    after=st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=8),
    where=st.sampled_from(["value", "key", "item"]),
)
def test_a_nul_is_refused_at_its_line(before, escape, after, where):
    quoted = json.dumps(before, ensure_ascii=False)[1:-1] + escape + json.dumps(after, ensure_ascii=False)[1:-1]
    body = {"value": f'a: "{quoted}"', "key": f'"{quoted}": 1', "item": f'a: [x, "{quoted}"]'}[where]
    with pytest.raises(UserError) as raised:
        load_values_text("release: r1\n" + body + "\n", "v.yaml")
    problem = raised.value.problems[0]
    assert problem.line == 2 and "NUL" in problem.message, problem.format()


# --- the pod-variable scope is per release ----------------------------------------------------------------


def test_an_env_name_belongs_to_its_release_only(tmp_path):
    text = "recipe: demo\nreleases:\n" + "".join(
        f"  - release: {name}\n    chart: jobset\n    accelerator: a3ultra\n    values:\n"
        f"      workload: {{gpus: 16, image: 'img:1', {body}}}\n"
        for name, body in (
            ("a", "envs: [{name: MY_VAR, value: v}], arguments: ['--a=${MY_VAR}']"),
            ("b", "arguments: ['--b=${MY_VAR}']"),
        )
    )
    values = tmp_path / "recipe.yaml"
    values.write_text(text)
    # not set locally: a's reference is the pod's, b's is an unset local variable
    with pytest.raises(UserError) as raised:
        build_plans(values, {})
    assert [(p.json_path, p.message) for p in raised.value.problems] == [
        ("$.releases[1].values.workload.arguments[0]", "variable MY_VAR is not set")
    ]
    # set locally: a's reference is ambiguous (its pod defines MY_VAR), b's is the local value
    with pytest.raises(UserError) as raised:
        build_plans(values, {"MY_VAR": "local"})
    assert [p.json_path for p in raised.value.problems] == ["$.releases[0].values.workload.arguments[0]"]
    assert "ambiguous" in raised.value.problems[0].message
    text = text.replace("arguments: ['--a=${MY_VAR}']", "arguments: ['--a=$${MY_VAR}']")
    values.write_text(text)
    plans = build_plans(values, {"MY_VAR": "local"})
    assert plans[0].values["workload"]["arguments"] == ["--a=${MY_VAR}"]
    assert plans[1].values["workload"]["arguments"] == ["--b=local"]


# --- cross-field rules: every `fail` of the chart sources is checked before helm, with file:line ---------

import re
import subprocess

from helm_nemo.values.cross_field import RULES

HELM3 = ROOT / ".tools/helm3/helm"
R53 = "r" * 53
# rule -> (values file, JSON path of the problem); each also makes the real chart `fail` (checked with helm).
CROSS_FIELD = {
    "hostname": (
        "chart: jobset\naccelerator: a3ultra\nrelease: " + "r" * 51 + "\nworkload: {gpus: 16, image: i}\n",
        "$.release",
    ),
    "hostname-suffix": (
        "chart: nemo-training\naccelerator: a3ultra\nrelease: " + "r" * 41 + "\n"
        "workload: {gpus: 16, image: i, nameSuffix: " + "s" * 20 + "}\n",
        None,
    ),
    "local-ckpt-needs-ssd": (
        "chart: jobset\naccelerator: a3ultra\nrelease: r1\nworkload: {gpus: 16, image: i, enable_local_ckpt: true}\n",
        "$.workload.enable_local_ckpt",
    ),
    "one-ckpt-cleaner": (
        "chart: jobset\naccelerator: a3mega\nrelease: r1\nvolumes: {ssdMountPath: /ssd}\n"
        "workload: {gpus: 16, image: i, enable_local_ckpt: true, enable_ckpt_cleaner: true, "
        "local_ckpt_dir: /ssd/c}\n",
        "$.workload.enable_ckpt_cleaner",
    ),
    "node-selector": (
        "chart: jobset\naccelerator: a3ultra\nrelease: r1\nworkload:\n  gpus: 16\n  image: i\n"
        "  nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}\n",
        "$.workload.nodeSelector['cloud.google.com/gke-accelerator']",
    ),
    "nsys-steps": (
        "chart: nemo-training\naccelerator: a3ultra\nrelease: r1\n"
        "workload: {gpus: 16, image: i, profile: {enabled: true, startStep: 20, endStep: 5}}\n",
        "$.workload.profile.endStep",
    ),
    "nsys-steps-from-arguments": (
        "chart: nemo-training\naccelerator: a3ultra\nrelease: r1\nworkload: {gpus: 16, image: i, "
        "arguments: [model.nsys_profile.enabled=true, ++model.nsys_profile.end_step=3]}\n",
        "$.workload.arguments",
    ),
    "nodes": (
        "chart: nemo-training\naccelerator: a3ultra\nrelease: r1\nworkload: {gpus: 16, nodes: 3, image: i}\n",
        "$.workload.nodes",
    ),
    "nfs-server": (
        "chart: nemo-training\naccelerator: a3ultra\nrelease: r1\nworkload: {gpus: 16, image: i}\n"
        "volumes: {nfsMountPath: /nfs}\n",
        "$.volumes.nfsMountPath",
    ),
    "download-needs-ssd": (
        "chart: nemo-training\naccelerator: a3ultra\nrelease: r1\nworkload: {gpus: 16, image: i}\n"
        "gcsDownload: {source: 'gs://bkt/x'}\n",
        "$.gcsDownload.source",
    ),
    "download-target": (
        "chart: nemo-training\naccelerator: a3ultra\nrelease: r1\nworkload: {gpus: 16, image: i}\n"
        "volumes: {ssdMountPath: /ssd, gcsDownload: {source: 'gs://bkt/x', target: /ssdx}}\n",
        "$.volumes.gcsDownload.target",
    ),
    "gcs-bucket-needs-sidecar": (
        "chart: nemo-training\naccelerator: a3ultra\nrelease: r1\n"
        "workload: {gpus: 16, image: i, gcsBucketForDataCataPath: bkt}\n"
        "volumes: {gcsVolumes: false}\n",
        "$.workload.gcsBucketForDataCataPath",
    ),
    "data-prep-shards": (
        "chart: data-prep\nrelease: r1\nshards:\n  files: [{url: 'https://h/a/x.jsonl'}, {url: 'https://h/b/x.jsonl.gz'}]\n"
        "output: {path: /fsx/out}\nvolumes: {pvcMounts: [{claimName: c, mountPath: /fsx}]}\n",
        "$.shards",
    ),
    "data-prep-shards-checksum": (
        "chart: data-prep\nrelease: r1\nshards:\n  urlPattern: 'https://h/{index}.jsonl.zst'\n  numbers: '0-1'\n"
        "  sha256: {'02': "
        + "a" * 64
        + "}\noutput: {path: /fsx/out}\nvolumes: {pvcMounts: [{claimName: c, mountPath: /fsx}]}\n",
        "$.shards.sha256.02",
    ),
    "data-prep-output": (
        "chart: data-prep\nrelease: r1\nshards: {files: [{url: 'https://h/a.jsonl'}]}\n"
        "output: {path: /data/out}\nvolumes: {pvcMounts: [{claimName: c, mountPath: /fsx}]}\n",
        "$.output.path",
    ),
    "data-prep-output-read-only": (
        "chart: data-prep\nrelease: r1\nshards: {files: [{url: 'https://h/a.jsonl'}]}\n"
        "output: {path: /fsx/out}\nvolumes: {pvcMounts: [{claimName: c, mountPath: /fsx, readOnly: true}]}\n",
        "$.output.path",
    ),
}


def _fails_in_sources() -> list[str]:
    found = []
    for source in sorted((ROOT / "generator").rglob("*")):
        if source.is_file() and source.suffix in (".j2", ".tpl", ".yaml", ".txt"):
            found += re.findall(r"\{\{-?\s*fail\b[^\n]*", source.read_text())
    return found


def test_every_fail_of_the_charts_has_a_rule_with_an_example():
    fails = _fails_in_sources()
    assert len(fails) >= 12
    for text in fails:
        matched = [rule for words, rule in RULES.items() if words in text]
        assert len(matched) == 1, text
        if matched[0] != "schema":
            assert any(name.startswith(matched[0]) for name in CROSS_FIELD), matched[0]


@pytest.mark.parametrize("rule", sorted(CROSS_FIELD))
def test_a_cross_field_rule_is_an_error_at_its_line_and_the_chart_agrees(tmp_path, rule):
    text, path = CROSS_FIELD[rule]
    values = tmp_path / "values.yaml"
    values.write_text(text)
    with pytest.raises(UserError) as raised:
        build_plans(values, {})
    problems = raised.value.problems
    hit = [p for p in problems if p.json_path == (path or "$.workload.nameSuffix") and p.line is not None]
    assert hit and len(problems) == 1, "\n".join(p.format() for p in problems)
    # the chart's own `fail` says the same values are wrong (so the rule mirrors it, not something stricter)
    import yaml

    data = yaml.safe_load(text)
    chart = ROOT / "charts" / data.get("accelerator", "") / data["chart"]  # no accelerator: one chart for all
    proc = subprocess.run(
        [str(HELM3), "template", data["release"], str(chart), "-f", str(values)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "execution error" in proc.stderr, proc.stderr


@pytest.mark.parametrize("length, ok", [(50, True), (51, False)])
def test_the_hostname_rule_draws_the_line_where_the_chart_does(tmp_path, length, ok):
    values = tmp_path / "values.yaml"
    values.write_text("chart: jobset\naccelerator: a3ultra\nworkload: {gpus: 16, image: i}\n")
    name = "r" * length
    if ok:
        assert build_plans(values, {}, release=name)[0].release == name
    else:
        with pytest.raises(UserError) as raised:
            build_plans(values, {}, release=name)
        assert raised.value.problems[0].file == "command line"
    proc = subprocess.run(
        [str(HELM3), "template", name, str(ROOT / "charts/a3ultra/jobset"), "-f", str(values)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode == 0) is ok, proc.stderr


def test_a_chart_without_a_schema_is_said_to_be_unchecked(tmp_path):
    """The other way a schema check could be skipped silently: a chart folder that has no values.schema.json."""
    chart = tmp_path / "mychart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: mychart\nversion: 0.1.0\n")
    values = tmp_path / "values.yaml"
    values.write_text("chart: ./mychart\nrelease: r1\nanything: 1\n")
    plan = build_plans(values, {})[0]
    assert any(
        "has no values.schema.json" in warning and "not against a schema" in warning for warning in plan.warnings
    )


def test_an_oci_chart_is_pulled_with_registry_flags_only(tmp_path, monkeypatch):
    """The pull gets the registry flags of the command line (and nothing of the values); the pulled chart's schema
    decides; one pull per chart and version in a run."""
    from helm_nemo.values import chart_source

    log = tmp_path / "calls.jsonl"
    helm = tmp_path / "helm"
    source = ROOT / "charts/a3ultra/jobset"
    helm.write_text(f"""#!{__import__("sys").executable}
import json, shutil, sys
argv = sys.argv[1:]
open({str(log)!r}, "a").write(json.dumps(argv) + "\\n")
if argv[:1] == ["pull"]:
    shutil.copytree({str(source)!r}, argv[argv.index("--untardir") + 1] + "/jobset-a3ultra")
""")
    helm.chmod(0o755)
    monkeypatch.setenv("HELM_BIN", str(helm))
    monkeypatch.setattr(chart_source, "_PULLED", {})
    values = tmp_path / "values.yaml"
    values.write_text("release: r1\nworkload: {gpus: 9223372036854775808, image: i}\n")
    extra = ["--namespace", "ns", "--plain-http", "--ca-file", "/ca.pem", "--wait"]
    with pytest.raises(UserError) as raised:
        build_plans(
            values,
            {},
            chart="oci://reg.example/c/jobset-a3ultra",
            version="7.7.7",
            pull_flags=chart_source.registry_flags(extra),
        )
    assert [(p.line, p.json_path) for p in raised.value.problems] == [(2, "$.workload.gpus")]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 1 and calls[0][:2] == ["pull", "oci://reg.example/c/jobset-a3ultra"]
    assert calls[0][2:] == [
        "--untar",
        "--untardir",
        calls[0][4],
        "--plain-http",
        "--ca-file",
        "/ca.pem",
        "--version",
        "7.7.7",
    ]
