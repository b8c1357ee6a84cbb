"""The generator: in sync with charts/, deterministic, self-contained draft-07 schemas, profile checks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from helm_nemo.generate import charts as generator

from helm_nemo.generate import profiles
from helm_nemo.generate.schema_bundle import bundle

ROOT = Path(__file__).resolve().parent.parent
GKE = ["a3high", "a3mega", "a3ultra", "a4", "a4x"]


def test_charts_are_in_sync_with_sources():
    assert generator.check(ROOT) == [], "run `helm-nemo generate` and commit charts/"


def test_generation_is_byte_identical_twice():
    assert generator.render_all(ROOT) == generator.render_all(ROOT)


def test_check_reports_drift_and_stale_files(tmp_path):
    for folder in ("generator", "schemas", "values", "charts"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path)  # the release record: the lock and the changelog must agree
    assert generator.check(tmp_path) == []
    (tmp_path / "charts/a3ultra/jobset/values.yaml").write_text("edited: by hand\n")
    (tmp_path / "charts/a3ultra/jobset/templates/extra.yaml").write_text("kind: Stale\n")
    (tmp_path / "charts/a4/jobset/templates/jobset.yaml").unlink()
    assert generator.check(tmp_path) == [
        "stale: charts/a3ultra/jobset/templates/extra.yaml",
        "differs: charts/a3ultra/jobset/values.yaml",
        "missing: charts/a4/jobset/templates/jobset.yaml",
    ]
    generator.write(tmp_path)
    assert generator.check(tmp_path) == []
    assert not (tmp_path / "charts/a3ultra/jobset/templates/extra.yaml").exists()


def test_cli_check_exit_codes(tmp_path):
    from click.testing import CliRunner

    from helm_nemo.cli import main

    for folder in ("generator", "schemas", "values", "charts"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path)  # the release record: the lock and the changelog must agree
    runner = CliRunner()
    env = {"HELM_NEMO_HOME": str(tmp_path)}
    assert runner.invoke(main, ["generate", "--check"], env=env).exit_code == 0
    (tmp_path / "values/accelerators/a4.yaml").write_text(
        (tmp_path / "values/accelerators/a4.yaml")
        .read_text()
        .replace("sharedMemorySize: 250Gi", "sharedMemorySize: 300Gi")
    )
    result = runner.invoke(main, ["generate", "--check"], env=env)
    assert result.exit_code == 1
    assert "differs: charts/a4/jobset/values.yaml" in result.output


@pytest.mark.parametrize("acc", GKE)
def test_every_gke_profile_has_a_jobset_chart(acc):
    chart = ROOT / "charts" / acc / "jobset"
    for name in (
        "Chart.yaml",
        "values.yaml",
        "values.schema.json",
        "README.md",
        "templates/_helpers.tpl",
        "templates/jobset.yaml",
    ):
        assert (chart / name).is_file(), name


@pytest.mark.parametrize("acc", GKE)
def test_chart_yaml_version_is_quoted_strict_semver(acc):
    text = (ROOT / "charts" / acc / "jobset" / "Chart.yaml").read_text()
    version = re.search(r'^version: "([^"]+)"$', text, re.M)
    assert version, "version must be a quoted string"
    assert re.fullmatch(
        r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?", version.group(1)
    )
    assert re.search(r'^appVersion: "', text, re.M)
    assert f'name: "jobset-{acc}"' in text


@pytest.mark.parametrize("acc", GKE)
def test_chart_schema_is_self_contained_draft07(acc):
    schema = json.loads((ROOT / "charts" / acc / "jobset" / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    refs = re.findall(r'"\$ref": "([^"]+)"', json.dumps(schema))
    assert refs and all(r.startswith("#/definitions/") for r in refs)
    for ref in refs:
        assert ref.split("/")[-1] in schema["definitions"]
    text = json.dumps(schema)
    for keyword in ("$defs", "unevaluatedProperties", "prefixItems", "dependentRequired", "$profile"):
        assert keyword not in text
    import jsonschema

    jsonschema.Draft7Validator.check_schema(schema)


def test_profile_markers_are_filled_from_the_profile():
    a4x = bundle("jobset.values.schema.json", profiles.load_profiles()["a4x"])
    gpus = a4x["properties"]["workload"]["properties"]["gpus"]
    assert gpus["anyOf"] == [{"maximum": 4}, {"multipleOf": 4}]
    assert a4x["properties"]["accelerator"]["const"] == "a4x"


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            ("network", "pluginInstaller", "image"),
            "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:latest",
        ),
        (("gpusPerNode",), "eight"),
        (("architecture",), "x86"),
        (("sharedMemorySize",), "lots"),
    ],
)
def test_profile_schema_rejects_bad_profiles(tmp_path, edit, message):
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    data = yaml.load((ROOT / "values/accelerators/a3ultra.yaml").read_text())
    node = data
    for key in edit[:-1]:
        node = node[key]
    node[edit[-1]] = message
    target = tmp_path / "a3ultra.yaml"
    with target.open("w") as fh:
        yaml.dump(data, fh)
    with pytest.raises(profiles.ProfileError) as err:
        profiles.load_profile(target)
    assert ".".join(edit) in str(err.value)


def test_profile_images_are_pinned():
    for profile in profiles.load_profiles().values():
        for part in ("pluginInstaller", "daemonSidecar"):
            spec = profile["network"][part]
            if spec:
                assert re.search(r":v?\d[\w.-]*$|@sha256:[0-9a-f]{64}$", spec["image"]), spec["image"]


def test_readme_values_table_covers_every_schema_key():
    readme = (ROOT / "charts/a3ultra/jobset/README.md").read_text()
    for key in ("queue", "workload.gpus", "volumes.gcsMounts", "network.gibVersion", "workload.jobTimestamp"):
        assert f"| `{key}` |" in readme
    assert "| `network.pluginVersion` |" not in readme  # a TCPXO key, not an A3 Ultra one
