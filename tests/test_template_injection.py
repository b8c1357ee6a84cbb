"""Issue 16, item 1: no value can change the structure of what a chart renders, and every value arrives
verbatim. For every generated chart, every string-typed values path of its values.schema.json gets a
hostile string (newlines, `: `, `- `, `#`, quotes, backslashes, `{{ }}`, `${...}`, `$(...)`, backquotes,
YAML indicators); the real helm renders it, with the schema check off (the templates alone must hold),
and the result must have the same object structure as with a plain value at every path (same keys at
every depth, same list lengths, same scalar types), and each hostile string must appear verbatim in a
rendered scalar (or inside a JSON string a template builds, e.g. the interfaces annotation).

All string paths of a chart are set at once (one render per example), so the test stays at a few hundred
renders: a fixed worst-case payload on every chart with both helms, and hypothesis examples per chart
on Helm 3. Shell safety of the same values (launcher arguments and paths reach the workload script only
as "$@" or env) is checked on the rendered scripts at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
CHARTS = sorted(p.parent for p in (ROOT / "charts").rglob("Chart.yaml"))
CHART_IDS = [str(c.relative_to(ROOT / "charts")) for c in CHARTS]

# Paths no template renders as text, by design (each with the reason).
NOT_RENDERED = {
    "accelerator": "names the chart a values file is for (helm nemo); a const",
    "chart": "names the chart kind (helm nemo); a const",
    "release": "helm nemo's default release name",
    "files.*": "helm nemo reads these files into other values",
    "useA3high": "a switch (yes/true or no/false) for a toleration",
}
# Older spellings the chart reads only when the newer key is unset (the newer one is set here).
SHADOWED = {
    "nemo-training": {
        "gcsDownload.image",
        "gcsDownload.source",
        "gcsDownload.target",
        "workload.experiment_dir",
        "workload.experiment_name",
    },
}
# A legacy literal key (`arguments[]`, …; any key marked x-helm-nemo-legacy, such as the supervisor's
# `namespace`) is accepted and ignored.
IGNORED_SUFFIX = "[]"

# Payload pieces that end a YAML scalar early, start a new key or list item, comment out the rest,
# quote, escape, or are template / shell syntax, joined by hypothesis in any order.
PIECES = [
    "\n",
    "\n\n",
    ": ",
    "- ",
    "#",
    "'",
    '"',
    "\\",
    "{{ .Release.Name }}",
    "{{",
    "}}",
    "${HOME}",
    "$(id)",
    "`id`",
    "x: y\n  z: w",
    "\n---\n",
    "|",
    ">",
    "&a *a",
    "!!str",
    "%",
    "@",
    " ",
    "\t",
    "[",
    "]",
    "{",
    "}",
    ",",
    "?",
    "*",
    "\nsecurityContext: {privileged: true}",
    "\n- name: evil\n  image: evil",
    "a",
    "0x1",
]
WORST = "a: b\n- c\n#d 'e\" \\f {{ .Release.Name }} ${HOME} $(id) `id`\n---\nsecurityContext: {privileged: true}\n  x: |\n z"


def _resolve(node: dict, defs: dict) -> dict:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    return node


def string_paths(node: dict, defs: dict, path: tuple = ()) -> Iterator[tuple]:
    """Every values path whose schema allows a free string (not an enum or const)."""
    node = _resolve(node, defs)
    if "enum" in node or "const" in node:
        return
    for alt in node.get("anyOf", []) + node.get("oneOf", []):
        alt = _resolve(alt, defs)
        if "string" in _types(alt) and "enum" not in alt and "const" not in alt:
            yield path
            return
    types = _types(node)
    if "object" in types:
        for key, sub in (node.get("properties") or {}).items():
            if not key.endswith(IGNORED_SUFFIX) and not _resolve(sub, defs).get("x-helm-nemo-legacy"):
                yield from string_paths(sub, defs, path + (key,))
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and not node.get("properties"):
            yield from string_paths(extra, defs, path + ("k1",))
    if "array" in types and isinstance(node.get("items"), dict):
        yield from string_paths(node["items"], defs, path + (0,))
    if "string" in types and not ({"object", "array"} & set(types)):
        yield path


def _types(node: dict) -> list:
    t = node.get("type", [])
    return [t] if isinstance(t, str) else list(t)


def dotted(path: tuple) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else p for p in path).replace(".[", "[")


def skipped(path: tuple) -> bool:
    text = dotted(path)
    return any(text == k or (k.endswith(".*") and text.startswith(k[:-1])) for k in NOT_RENDERED)


def set_path(values: dict, path: tuple, value: Any) -> None:
    node: Any = values
    for i, key in enumerate(path):
        last = i == len(path) - 1
        nxt = path[i + 1] if not last else None
        if isinstance(key, int):
            while len(node) <= key:
                node.append({} if isinstance(nxt, str) else ([] if isinstance(nxt, int) else None))
            if last:
                node[key] = value
            else:
                if not isinstance(node[key], (dict, list)):
                    node[key] = {} if isinstance(nxt, str) else []
                node = node[key]
        else:
            if last:
                node[key] = value
            else:
                if not isinstance(node.get(key), (dict, list)):
                    node[key] = {} if isinstance(nxt, str) else []
                node = node[key]


# Values that make every optional piece render (a queue, buckets, claims, the local SSD, the data download,
# checkpoint cleaners, a run script, Nsight Systems, …), so each string path reaches the output.
def rich_values(kind: str, schema: dict) -> dict:
    props = schema["properties"]
    if kind == "jobset":
        values: dict = {
            "queue": "q",
            "network": {"hostNetwork": False},
            "workload": {"gpus": 4, "image": "img:1", "enable_ckpt_cleaner": True},
            "gcsDownload": {"source": "gs://b/x"},
            "workload_launcher": "echo hi\n",
        }
    elif kind == "nemo-training":
        values = {
            "queue": "q",
            "nemo_config": "trainer: {}\n",
            "network": {"hostNetwork": False},
            "workload": {"gpus": 4, "image": "img:1", "profile": {"enabled": True}, "jobUUID": "u"},
        }
        if "ssdMountPath" in props.get("volumes", {}).get("properties", {}):
            values["volumes"] = {"ssdMountPath": "/ssd", "gcsDownload": {"source": "gs://b/x"}, "nfsServer": "n"}
        values["gcsDownload"] = None
    elif kind == "supervisor":
        values = {"accelerator": None, "watchdogs": ["w"], "project": "p", "num_nodes_per_dp": 1, "num_dp_replicas": 1}
    elif kind == "gcs-fuse":  # one volume per type, so every mount option profile is used
        values = {
            "gcsVolumes": [
                {"name": f"v{t}", "bucketName": "b", "type": t} for t in ("data", "checkpoints", "serving-model")
            ]
        }
    elif kind == "data-prep":
        values = {"workers": 2, "keepDownloads": True, "activeDeadlineSeconds": 60}
    elif kind == "nccl-test":  # off the host network, so the pod's networks (subnetworks) are rendered too
        network = props.get("network", {}).get("properties", {})
        values = {"network": {"hostNetwork": False}} if "hostNetwork" in network else {}
    else:
        values = {
            "fileSystems": [{"name": "v", "fileSystemId": "fs-1", "dnsName": "d", "mountName": "m"}],
            "storageClass": {"create": True},
        }
    return values


# Paths a template checks in a way a long payload fails (the pod host name must fit in 63 characters):
# these get a short hostile value.
SHORT = {"workload.nameSuffix"}


def payload_values(chart: Path, payload_for) -> tuple[dict, dict[str, str]]:
    """The rich values with `payload_for(i)` at every string path; returns (values, {path: payload})."""
    schema = json.loads((chart / "values.schema.json").read_text())
    kind = yaml.safe_load((chart / "Chart.yaml").read_text())["annotations"]["helm-nemo.dev/chart-kind"]
    values = rich_values(kind, schema)
    placed = {}
    for i, path in enumerate(sorted(set(string_paths(schema, schema.get("definitions", {}))), key=dotted)):
        if skipped(path) or (kind == "supervisor" and path == ("accelerator",)):
            continue
        path = tuple(f"k{i}" if p == "k1" else p for p in path)  # a map key of its own per path
        text = (
            payload_for(i)
            if dotted(path) not in SHORT
            else (f"s{i}" if payload_for(i).startswith("plain") else f"s{i}\n#: '")
        )
        set_path(values, path, text)
        if dotted(path) not in SHADOWED.get(kind, ()):
            placed[dotted(path)] = text
    if kind == "gcs-fuse":  # an item needs its type (an enum) to render
        values["gcsVolumes"][0]["type"] = "data"
    if kind in ("jobset", "nemo-training", "nccl-test") and not _profile(chart)["network"]["interfaces"]:
        placed.pop("network.subnetworks[0]")  # no multi-NIC pod networking on this accelerator: unused
    if kind == "nemo-training" and "ssdMountPath" in (values.get("volumes") or {}):
        # The download's target must be under the local SSD mount (a template check).
        target = values["volumes"]["ssdMountPath"].rstrip("/") + "/" + values["volumes"]["gcsDownload"]["target"]
        values["volumes"]["gcsDownload"]["target"] = placed["volumes.gcsDownload.target"] = target
    if kind == "data-prep":
        # The template checks the shard list and the output folder (the data-prep shards / output.path rules):
        # the text goes where they let it, a URL's query and a folder under the first claim's mount.
        spec = values["shards"]
        spec["numbers"] = "0"  # expanded, never rendered as written
        placed.pop("shards.numbers")
        spec["urlPattern"] = "https://h/{index}.jsonl?" + spec["urlPattern"]
        spec["files"][0]["name"] = "f0"  # the shard's output file name: checked
        placed.pop("shards.files[0].name")
        spec["sha256"] = {"00": next(iter(spec["sha256"].values()))}  # the checksum of the shard named 00
        mount = values["volumes"]["pvcMounts"][0]["mountPath"]
        values["output"]["path"] = placed["output.path"] = mount.rstrip("/") + "/" + values["output"]["path"]
    return values, placed


def _profile(chart: Path) -> dict:
    from helm_nemo.generate.profiles import load_profiles

    return load_profiles()[chart.parent.name]


def render(helm, chart: Path, values: dict, tmp_path: Path, name: str) -> list[dict]:
    file = tmp_path / f"{name}.json"
    file.write_text(json.dumps(values))
    out = helm.template("inj", chart, "-f", str(file), "--skip-schema-validation").stdout
    return [d for d in yaml.safe_load_all(out) if d]


def shape(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: shape(v) for k, v in sorted(node.items())}
    if isinstance(node, list):
        return [shape(v) for v in node]
    return type(node).__name__


def scalars(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for v in node.values():
            yield from scalars(v)
    elif isinstance(node, list):
        for v in node:
            yield from scalars(v)
    elif isinstance(node, str):
        yield node
        stripped = node.strip()
        if stripped[:1] in "[{":
            try:
                yield from scalars(json.loads(stripped))
            except ValueError:
                pass


def check(helm, chart: Path, tmp_path: Path, payload_for) -> None:
    plain, _ = payload_values(chart, lambda i: f"plain{i}")
    hostile, placed = payload_values(chart, payload_for)
    a = render(helm, chart, plain, tmp_path, "plain")
    b = render(helm, chart, hostile, tmp_path, "hostile")
    assert [d.get("kind") for d in a] == [d.get("kind") for d in b], "objects appeared or vanished"
    assert shape(a) == shape(b), "a value changed the structure of the rendered objects"
    texts = list(scalars(b))
    missing = [path for path, text in placed.items() if not any(text in t for t in texts)]
    assert missing == [], f"values that do not arrive verbatim: {missing}"


# Found at the last fresh-clone run of issue 35 and not yet explained: Helm 4.1.4 renders the EFA nccl-test charts
# as if no values file were given when the worst-case payload sits in both network.ncclSettings and
# network.subnetworks (`.Values.queue` reads null; either one alone, or Helm 3, renders them). Kept failing on
# purpose (strict): it must be understood and fixed, not hidden; issue 35's closing note names it.
HELM4_DROPS_VALUES = {"p4de/nccl-test", "p5/nccl-test", "p5en/nccl-test"}


@pytest.mark.parametrize("chart", CHARTS, ids=CHART_IDS)
def test_worst_case_values_keep_the_structure_and_arrive_verbatim(helm, chart, tmp_path, request):
    if helm.name == "helm4" and f"{chart.parent.name}/{chart.name}" in HELM4_DROPS_VALUES:
        request.applymarker(pytest.mark.xfail(strict=True, reason="Helm 4 drops the values file (see above)"))
    check(helm, chart, tmp_path, lambda i: f"v{i} {WORST} {i}v")


@pytest.mark.parametrize("chart", CHARTS, ids=CHART_IDS)
def test_generated_values_keep_the_structure_and_arrive_verbatim(helm3, chart, tmp_path_factory):
    @settings(
        max_examples=3,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join))
    def run(piece):
        check(helm3, chart, tmp_path_factory.mktemp("inj"), lambda i: f"v{i}{piece}{i}v")

    run()


def test_every_string_path_is_exercised():
    """The walk finds the string paths the issue names (and more); nothing is skipped silently."""
    chart = ROOT / "charts" / "a4" / "jobset"
    schema = json.loads((chart / "values.schema.json").read_text())
    paths = {dotted(p) for p in string_paths(schema, schema["definitions"])}
    assert {
        "workload.image",
        "workload.arguments[0]",
        "workload.envs[0].value",
        "volumes.gcsMounts[0].mountPath",
        "volumes.ssdMountPath",
        "workload_launcher",
        "workload_config",
        "queue",
        "gcsDownload.target",
        "workload.hfToken",
        "network.subnetworks[0]",
        "tasSettings.topologyRequest.k1",
    } <= paths
    assert len(paths) > 40


def test_values_reach_the_workload_shell_only_as_arguments_or_env(helm, tmp_path):
    """No value is spliced into script text: a worst-case value at every path leaves the scripts of every
    container (and the launcher's argument handling) byte for byte the same as a plain value does."""
    for acc in ("a4", "a3mega", "a4x-max"):
        chart = ROOT / "charts" / acc / "jobset"
        plain, _ = payload_values(chart, lambda i: f"plain{i}")
        hostile, _ = payload_values(chart, lambda i: f"v{i} {WORST} {i}v")
        for values in (plain, hostile):  # the contents of files and of the config are data, not script
            values["workload_launcher"] = "echo hi\n"
        scripts = [
            [
                c["command"]
                for pod in pods(d)
                for c in pod.get("initContainers", []) + pod["containers"]
                if "command" in c
            ]
            for d in render(helm, chart, plain, tmp_path, "p")
        ]
        hostile_scripts = [
            [
                c["command"]
                for pod in pods(d)
                for c in pod.get("initContainers", []) + pod["containers"]
                if "command" in c
            ]
            for d in render(helm, chart, hostile, tmp_path, "h")
        ]
        assert scripts == hostile_scripts, acc
    chart = ROOT / "charts" / "a4" / "nemo-training"
    plain, _ = payload_values(chart, lambda i: f"plain{i}")
    hostile, _ = payload_values(chart, lambda i: f"v{i} {WORST} {i}v")
    for values in (plain, hostile):
        values["nemo_config"] = "trainer: {}\n"
    a = [
        c.get("command")
        for d in render(helm, chart, plain, tmp_path, "p")
        for pod in pods(d)
        for c in pod["containers"]
    ]
    b = [
        c.get("command")
        for d in render(helm, chart, hostile, tmp_path, "h")
        for pod in pods(d)
        for c in pod["containers"]
    ]
    assert a == b and any(a)


def pods(doc: dict) -> list[dict]:
    spec = doc.get("spec") or {}
    out = [r["template"]["spec"]["template"]["spec"] for r in spec.get("replicatedJobs") or []]
    if doc.get("kind") in ("Job", "Deployment", "DaemonSet"):
        out.append(spec["template"]["spec"])
    return out


def test_launcher_arguments_expand_only_variables(helm3, tmp_path):
    """The workload script's argument handling, run by bash: $NAME/${NAME} expand, white space splits,
    nothing else is evaluated (the gpu-recipes charts spliced the values into the script)."""
    import subprocess

    (jobset,) = [
        d
        for d in yaml.safe_load_all(helm3.template("r", ROOT / "charts" / "a4" / "jobset").stdout)
        if d and d["kind"] == "JobSet"
    ]
    text = pods(jobset)[0]["containers"][-1]["command"][2]
    start, end = text.index("nemo_expand() {"), text.index('echo "Launching workload with the following arguments:"')
    probe = text[start:end] + 'printf "<%s>\\n" "${LAUNCHER_ARGS[@]}"\n'
    marker = tmp_path / "executed"
    values = [
        "--num-nodes=${NNODES} --name=$JOB",
        f"$(touch {marker}) `touch {marker}` ; touch {marker}",
        "'a b'",
        "x\\$y",
        "*",
    ]
    out = subprocess.run(
        ["bash", "-c", probe, "workload", *values],
        env={"NNODES": "4", "JOB": "j1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert out.splitlines() == [
        "<--num-nodes=4>",
        "<--name=j1>",
        "<$(touch>",
        f"<{marker})>",
        "<`touch>",
        f"<{marker}`>",
        "<;>",
        "<touch>",
        f"<{marker}>",
        "<'a>",
        "<b'>",
        "<x$y>",
        "<*>",
    ]
    assert not marker.exists()
